"""Host program of the containment tests (``tests/integration/test_containment.py``).

``python containment_host.py MODE`` attaches to the node named by ``NPUEMU_NODE`` (or
starts an embedded one), runs one scenario and prints ``RESULT <json>``:

- ``kernels``: kernels that raise SystemExit, KeyboardInterrupt or GeneratorExit on each
  engine (on the engine thread, and a tiny one run inline in the loop thread), a kernel
  file that exits at import; the codes, the exception callbacks, the device log lines;
- ``after``: a kernel on each engine, from a fresh process (the engines must still run);
- ``model``: model tasks (raw ``MODEL_LOAD`` frames) whose kernel raises SystemExit, on
  stream 0 (the engine thread) and on stream 1 (a helper thread), then good executes;
- ``collective``: a kernel raising SystemExit on rank 0's stream right before an
  all_reduce of two cards, then a second all_reduce.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "containment_kernels.py")
IMPORT_EXIT = os.path.join(HERE, "containment_import_exit.py")
ENGINES = ("aicore", "aivector", "aicpu")
KINDS = ("exit", "interrupt", "generator")
SYNC_MS = 10_000
"""Synchronize timeout: far below the execution timeout (1091 s), far above a kernel."""


def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret}")


def pyacl():
    from npuemu.tools.cli import install_acl

    install_acl()
    import acl

    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    return acl


def functions(acl, path):
    binary, ret = acl.rt.binary_load_from_file(path)
    ok(ret, "binary_load_from_file")
    names = [f"{k}_{e}" for k in ("leave", "mark") for e in ENGINES] + ["flaky"]
    out = {}
    for name in names:
        out[name], ret = acl.rt.binary_get_function(binary, name)
        ok(ret, name)
    return out


def word(acl, value=0):
    import numpy as np

    data = np.array([value], np.int64).tobytes()
    ptr, ret = acl.rt.malloc(8, 0)
    ok(ret, "malloc")
    ok(acl.rt.memcpy(ptr, 8, acl.util.bytes_to_ptr(data), 8, 1), "H2D")
    return ptr


def read_word(acl, ptr):
    out = bytearray(8)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), 8, ptr, 8, 2), "D2H")
    return int.from_bytes(out, "little", signed=True)


def device_log(dev=0):
    from npuemu.host.core import runtime
    from npuemu.shared import logring

    return logring.read_device_log(runtime.get().node.name, dev) or ""


def kernels():
    acl = pyacl()
    fns = functions(acl, KERNELS)
    codes = []
    ok(acl.rt.set_exception_info_callback(
        lambda info: codes.append(acl.rt.get_error_code_from_exception_info(info))))
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    r = {"runs": {}}
    for engine in ENGINES:
        for kind in KINDS:
            launched = acl.rt.launch_kernel(fns[f"leave_{engine}"], 2, [kind], s)
            first = acl.rt.synchronize_stream_with_timeout(s, SYNC_MS)
            again = acl.rt.synchronize_stream_with_timeout(s, SYNC_MS)
            flag = word(acl)  # the same engine, right after, on the same stream
            ok(acl.rt.launch_kernel(fns[f"mark_{engine}"], 1, [flag], s), "mark")
            after = acl.rt.synchronize_stream_with_timeout(s, SYNC_MS)
            r["runs"][f"{engine}/{kind}"] = [launched, first, again, after,
                                             read_word(acl, flag)]
    r["inline"] = inline(acl, fns, s)
    r["import_exit"] = acl.rt.binary_load_from_file(IMPORT_EXIT)[1]
    r["import_exit_msg"] = "SystemExit" in acl.get_recent_err_msg()
    r["reload"] = acl.rt.binary_load_from_file(KERNELS)[1]
    deadline = time.monotonic() + 10
    while len(codes) < len(ENGINES) * len(KINDS) + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    r["callbacks"] = sorted(codes)
    lines = device_log().splitlines()
    r["log_failed"] = sorted({ln.split("kernel execute failed, ret=")[1].split(",")[0]
                              for ln in lines if "kernel execute failed, ret=" in ln})
    r["log_causes"] = sorted({name for ln in lines
                              for name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit")
                              if name in ln})
    r["status"] = list(acl.rt.query_device_status(0))
    return r


def inline(acl, fns, s):
    """``flaky`` runs until it is tiny (inline in the loop thread), then its flag is set."""
    flag = word(acl)
    for _ in range(20):
        ok(acl.rt.launch_kernel(fns["flaky"], 1, [flag], s), "flaky")
    clean = acl.rt.synchronize_stream_with_timeout(s, SYNC_MS)
    ok(acl.rt.memcpy(flag, 8, acl.util.bytes_to_ptr((1).to_bytes(8, "little")), 8, 1), "set")
    ok(acl.rt.launch_kernel(fns["flaky"], 1, [flag], s), "flaky")
    failed = acl.rt.synchronize_stream_with_timeout(s, SYNC_MS)
    mark = word(acl)
    ok(acl.rt.launch_kernel(fns["mark_aivector"], 1, [mark], s), "mark")
    return [clean, failed, acl.rt.synchronize_stream_with_timeout(s, SYNC_MS),
            read_word(acl, mark)]


def after():
    acl = pyacl()
    fns = functions(acl, KERNELS)
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    flags = {engine: word(acl) for engine in ENGINES}
    for engine in ENGINES:
        ok(acl.rt.launch_kernel(fns[f"mark_{engine}"], 1, [flags[engine]], s), engine)
    sync = acl.rt.synchronize_stream_with_timeout(s, SYNC_MS)
    return {"sync": sync, "marks": [read_word(acl, flags[e]) for e in ENGINES]}


def model():
    from npuemu.host.core import kernel as core_kernel
    from npuemu.host.core import runtime
    from npuemu.host.core import stream as core_stream
    from npuemu.shared.protocol import Op

    acl = pyacl()
    binary = core_kernel.binary_load_from_file(KERNELS)
    link = runtime.get().current_link()

    def step(name, args, lane=0, slots=(), waits=(), records=()):
        return [lane, binary.bin_id, name, 2, list(args), [list(x) for x in slots],
                list(waits), list(records)]

    mark = step("mark_aicore", [0], slots=[(0, 0, 0)])
    models = {
        "lane0": [step("leave_aicore", ["exit"]), mark],
        "lane1": [step("mark_aicore", [0], slots=[(0, 0, 0)], records=[1]),
                  step("leave_aivector", ["exit"], lane=1, waits=[1])],
        "good": [mark],
        "good2": [step("mark_aicore", [0], slots=[(0, 0, 0)], records=[1]),
                  step("mark_aivector", [0], lane=1, slots=[(0, 0, 0)], waits=[1])],
    }
    ids = {name: link.call(Op.MODEL_LOAD, 0, 1, 0, steps)[0] for name, steps in models.items()}
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    st = core_stream.resolve(s)
    r = {}
    for name in ("lane0", "lane1", "good", "good2"):
        flag = word(acl)
        core_stream.submit(st, Op.MODEL_EXECUTE, ids[name], [flag], [])
        r[name] = [acl.rt.synchronize_stream_with_timeout(s, SYNC_MS), read_word(acl, flag)]
    return r


def collective():
    import numpy as np

    from npuemu.host.api import DeviceArray, Stream, hccl, load_kernels
    from npuemu.shared import errors

    kernels = load_kernels(KERNELS, 0)
    comms = hccl.init_all([0, 1])
    n = 1024
    xs = [DeviceArray.from_numpy(np.full(n, d + 1.0, np.float32), d) for d in range(2)]
    ys = [DeviceArray(n, np.float32, d) for d in range(2)]
    streams = [Stream(d) for d in range(2)]
    streams[0].launch(kernels["leave_aicore"], 2, "exit")
    for d in range(2):
        comms[d].all_reduce(xs[d], ys[d], stream=streams[d])
    r = {"syncs": []}
    for st in streams:
        try:
            st.synchronize(SYNC_MS)
            r["syncs"].append(0)
        except errors.AclError as err:
            r["syncs"].append(err.code)
    r["first"] = [float(y.to_numpy().min()) for y in ys]
    for d in range(2):
        comms[d].all_reduce(ys[d], xs[d], stream=streams[d])
    for st in streams:
        st.synchronize(SYNC_MS)
    r["second"] = [float(x.to_numpy().max()) for x in xs]
    for c in comms:
        c.destroy()
    return r


if __name__ == "__main__":
    result = {"kernels": kernels, "after": after, "model": model,
              "collective": collective}[sys.argv[1]]()
    print("RESULT " + json.dumps(result), flush=True)
