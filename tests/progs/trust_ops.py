"""Child of ``tests/integration/test_trust_ops.py``: op binaries, the op disk cache and
single-op model files against a real worker. Prints one ``RESULT`` JSON line.

Usage: ``python trust_ops.py SCENARIO [ARG]``:

- ``raw``: raw ``OP_LOAD`` / ``OP_UNLOAD`` frames that must be refused (marshalled code,
  other bytes, source that fails at compile or import in every way), each with its answer,
  then whether the card is the same process, still serves, and got its HBM back.
- ``bystander``: a well-behaved host copying and checking data until the file ``ARG``
  exists (``READY`` is created once it runs).
- ``limit``: ``OP_LOAD`` of a tiny source until the card refuses (pipelined, 256 loads a
  wait); then two unloads, three op compiles and a raw load again.
- ``compile``: one ``Add`` compiled and executed (``ASCEND_CACHE_PATH`` from the test), the
  result and the op cache statistics.
- ``models DIR EACH``: ``aclopSetModelDir(DIR)``, ``aclopLoad`` of every file in ``EACH``,
  then an ``Add`` of the model found in ``DIR``, executed without compiling.
"""

from __future__ import annotations

import json
import marshal
import os
import sys
import time

import numpy as np

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)

from npuemu.host.api import op_cache_stats  # noqa: E402
from npuemu.host.core import runtime  # noqa: E402
from npuemu.shared import errors, layout, protocol  # noqa: E402
from npuemu.shared.protocol import Op  # noqa: E402

R: dict = {}
F32, ND = 0, 2
GOOD_SOURCE = """
from npuemu.shared.kernel import kernel

@kernel("aivector")
def fill(ctx, ptr, n, value):
    ctx.tensor(ptr, "uint8", n)[:] = value
"""


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def malloc(size: int) -> int:
    ptr, ret = acl.rt.malloc(size, 0)
    ok(ret, "malloc")
    return ptr


def h2d(dst: int, data: bytes) -> None:
    ok(acl.rt.memcpy(dst, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")


def d2h(src: int, n: int) -> bytes:
    out = bytearray(n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2), "D2H")
    return bytes(out)


def link():
    return runtime.get().current_link()


def call(op: int, *args: object) -> list:
    """A raw request with a reply: ["ok", results] or ["err", code]."""
    try:
        return ["ok", list(link().call(op, *args))]
    except errors.AclError as err:
        return ["err", err.code]


def worker_pid() -> int:
    return int(link().ctl[layout.DEVICE_CTL.PID])


def free_hbm() -> int:
    free, _total, ret = acl.rt.get_mem_info(0)
    ok(ret, "get_mem_info")
    return free


# raw frames ------------------------------------------------------------------------------------
def crafted_code() -> bytes:
    """A code object whose byte code jumps and loads far outside itself (what crashes
    CPython if it is ever unmarshalled and run), marshalled."""
    base = compile("x = 1", "crafted", "exec")
    evil = base.replace(co_code=bytes([100, 255, 83, 0] * 8), co_consts=())  # LOAD_CONST 255
    return marshal.dumps(evil)


REFUSED_SOURCES = {
    "system_exit": "raise SystemExit(3)\n",
    "keyboard_interrupt": "raise KeyboardInterrupt\n",
    "generator_exit": "raise GeneratorExit\n",
    "base_exception": "raise BaseException('x')\n",
    "syntax_error": "def (:\n",
    "null_bytes": "x = 1\0\n",
    "recursion_at_compile": "x = " + "(" * 150 + ")" * 150 + "\n" + "y = " + "-" * 60000 + "1\n",
    "recursion_at_import": "def f():\n    return f()\nf()\n",
    "memory_error": "x = bytearray(1 << 62)\n",
    "exit_call": "import sys\nsys.exit(0)\n",
}


def raw() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    pid, before = worker_pid(), free_hbm()
    codes = {
        "marshalled_code": call(Op.OP_LOAD, marshal.dumps(compile("x = 1", "m", "exec")), "m"),
        "crafted_code_object": call(Op.OP_LOAD, crafted_code(), "crafted"),
        "bytes_as_text": call(Op.OP_LOAD, crafted_code().decode("latin-1"), "crafted"),
        "empty": call(Op.OP_LOAD, "", "e"),
        "too_long": call(Op.OP_LOAD, "#" * (protocol.OP_SOURCE_MAX + 1), "long"),
        "name_not_str": call(Op.OP_LOAD, GOOD_SOURCE, b"name"),
        "unload_list": call(Op.OP_UNLOAD, [1], 0),
        "unload_unknown": call(Op.OP_UNLOAD, 999, 4096),
        "unload_negative": call(Op.OP_UNLOAD, -1, -1),
    }
    for name, source in REFUSED_SOURCES.items():
        codes[name] = call(Op.OP_LOAD, source, name)
    R["codes"] = codes
    R["hbm_back"] = free_hbm() == before
    R["same_worker"] = worker_pid() == pid
    R["ping"] = call(Op.PING)[0]
    R["good_kernel"] = good_kernel_runs()


def good_kernel_runs() -> bool:
    """A good source loads by OP_LOAD, its kernel runs on a stream, and it unloads."""
    status, (bin_id, ptr, _span, kernels) = call(Op.OP_LOAD, GOOD_SOURCE, "good")
    assert status == "ok" and [list(k) for k in kernels] == [["fill", "aivector"]], kernels
    buf = malloc(64)
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    from npuemu.host.core.stream import resolve, submit

    submit(resolve(s, for_submit=True), Op.LAUNCH, bin_id, "fill", 1, [buf, 64, 9])
    ok(acl.rt.synchronize_stream(s), "sync")
    done = d2h(buf, 64) == bytes([9]) * 64
    unload = call(Op.OP_UNLOAD, bin_id, ptr)
    return done and unload == ["ok", []]


def bystander(stop: str) -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    n = 256 << 10
    src, dst = malloc(n), malloc(n)
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    R["pid"] = worker_pid()
    open(os.environ["READY"], "w").close()
    R["rounds"] = R["failures"] = 0
    while not os.path.exists(stop) or R["rounds"] < 3:
        value = R["rounds"] % 251
        h2d(src, bytes([value]) * n)
        ok(acl.rt.memcpy_async(dst, n, src, n, 3, s), "memcpy_async")
        ret = acl.rt.synchronize_stream_with_timeout(s, 20000)
        if ret != 0 or d2h(dst, n) != bytes([value]) * n:
            R["failures"] += 1
        R["rounds"] += 1
    R["same_worker"] = worker_pid() == R["pid"]


LIMIT_BATCH = 256
"""Raw loads ``limit`` sends back to back before it waits for their replies."""


def limit() -> None:
    """Raw loads until the card refuses (``LIMIT_BATCH`` at a time through the link's
    ``call_many``: sent back to back, one wait; the refusals past the first are kept: each
    must be 207012 and no load may succeed after one); two unloads; then three op compiles
    (distinct binaries): the third finds the card full and the op map sheds its oldest
    entry."""
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    loaded, refused, t0 = [], [], time.monotonic()
    R["loaded_after_refusal"] = 0
    while not refused and len(loaded) <= 200_000:  # pipelined, LIMIT_BATCH loads a wake
        for result in link().call_many([(Op.OP_LOAD, "x = 1\n", "tiny")] * LIMIT_BATCH):
            if isinstance(result, errors.AclError):
                refused.append(result.code)
            else:
                R["loaded_after_refusal"] += bool(refused)
                loaded.append(list(result[:2]))
    R["refused_with"] = refused[0] if refused else None
    R["refused"] = sorted(set(refused))
    R["loaded"] = len(loaded)
    R["seconds"] = round(time.monotonic() - t0, 1)
    R["unload"] = [call(Op.OP_UNLOAD, *loaded.pop())[0] for _ in range(2)]
    R["adds"] = [add_once(True, rows) for rows in (2, 3, 4)]
    R["evictions"] = op_cache_stats()["evictions"]
    R["raw_again"] = call(Op.OP_LOAD, "x = 1\n", "tiny")
    R["ping"] = call(Op.PING)[0]


# the compile cache and models ------------------------------------------------------------------
def add_once(compile_it: bool, rows: int = 4) -> tuple[int, list]:
    """``x + 2x`` of a ``[rows, 8]`` float tensor by the Add op: ``(ret, [right?])``."""
    x = np.arange(rows * 8, dtype=np.float32).reshape(rows, 8)
    descs, bufs, ptrs = [], [], []
    for arr in (x, x * 2, np.zeros_like(x)):
        d = acl.create_tensor_desc(F32, [rows, 8], ND)
        p = malloc(arr.nbytes)
        h2d(p, arr.tobytes())
        descs.append(d)
        bufs.append(acl.create_data_buffer(p, arr.nbytes))
        ptrs.append(p)
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    if compile_it:
        ret = acl.op.compile_and_execute_v2("Add", descs[:2], bufs[:2], descs[2:], bufs[2:], 0,
                                            0, 0, None, s)
    else:
        ret = acl.op.execute_v2("Add", descs[:2], bufs[:2], descs[2:], bufs[2:], 0, s)
    if ret:
        return ret, []
    ok(acl.rt.synchronize_stream(s), "sync")
    got = np.frombuffer(d2h(ptrs[2], x.nbytes), np.float32)
    return 0, [bool((got == (x * 3).ravel()).all())]


def compile_scenario() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    R["ret"], R["right"] = add_once(True)
    R["stats"] = op_cache_stats()


def models_scenario(folder: str, each: str) -> None:
    """``aclopSetModelDir(folder)``, ``aclopLoad`` of every file in ``each`` (name -> ret),
    then an Add of the model from ``folder`` without compiling."""
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    R["dir"] = acl.op.set_model_dir(folder)
    R["load"] = {}
    for name in sorted(os.listdir(each)):
        with open(os.path.join(each, name), "rb") as f:
            R["load"][name] = acl.op.load(f.read())
    R["ret"], R["right"] = add_once(False)
    R["stats"] = op_cache_stats()
    R["ping"] = call(Op.PING)[0]


SCENARIOS = {"raw": raw, "limit": limit, "compile": compile_scenario}


def main(argv: list[str]) -> None:
    if argv[1] == "bystander":
        bystander(argv[2])
    elif argv[1] == "models":
        models_scenario(argv[2], argv[3])
    else:
        SCENARIOS[argv[1]]()
    print("RESULT " + json.dumps(R))


if __name__ == "__main__":
    main(sys.argv)
