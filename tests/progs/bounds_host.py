"""Host program of the bounds tests (``tests/integration/test_bounds.py``).

``python bounds_host.py MODE`` attaches to the node named by ``NPUEMU_NODE`` (or starts an
embedded one), runs one scenario and prints ``RESULT <json>``:

- ``truncated_comm``: a communicator of cards 0 and 1 whose segment is truncated to 12
  bytes after both cards attached it; an all_reduce on it, then the cards' state and a
  fresh communicator's all_reduce;
- ``serves``: every card of the node copies data and runs a two-card all_reduce (the
  supervisor's reaper runs when this process leaves);
- ``vmm``: raw ``VMM_MAP`` frames past the windows limit and past the memory-area limit
  (sent in batches back to back: the link's ``call_many``);
  the worker's count of memory areas; with ``HOLD`` set, the mappings are kept until the
  file ``$HOLD`` appears (another process works on the card meanwhile);
- ``vmm_fresh``: a fresh process reserves and maps through the acl API and runs a copy;
- ``models``: ``MODEL_LOAD`` frames of steps of 65535 blocks, past the step limit and past
  the model limit, with the worker's RSS before and after;
- ``abandon``: a communicator segment joined by this process, which then exits at once;
- ``comm_attach``: ``COMM_ATTACH`` of one-rank communicators past the limit, with the
  worker's thread count (with ``HOLD``, kept attached until ``$HOLD`` appears); then detach
  all and attach again.
"""

import json
import os
import sys
import time

import psutil

R: dict = {}
MiB = 1 << 20


def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret}")


def setup(devices=(0,)):
    from npuemu.tools.cli import install_acl
    install_acl()
    import acl
    ok(acl.init(), "init")
    for dev in devices:
        ok(acl.rt.set_device(dev), "set_device")
    ok(acl.rt.set_device(devices[0]), "set_device")
    return acl


def link(dev=0):
    from npuemu.host.core import runtime
    return runtime.get().devices[dev].link


def code_of(fn, *args):
    """0, or the ACL code of the AclError ``fn(*args)`` raised."""
    from npuemu.shared import errors
    try:
        fn(*args)
    except errors.AclError as err:
        return err.code
    return 0


def worker(dev=0):
    from npuemu.shared.layout import DEVICE_CTL
    return psutil.Process(int(link(dev).ctl[DEVICE_CTL.PID]))


def map_count(proc):
    with open(f"/proc/{proc.pid}/maps") as f:
        return sum(1 for _ in f)


# --------------------------------------------------------------------------- collectives
def all_reduce_ok(comms, n=4096):
    """An all_reduce of ``comms`` (one per card) gives the sum on every card."""
    import numpy as np

    from npuemu.host.api import DeviceArray, Stream
    xs = [DeviceArray.from_numpy(np.full(n, d + 1.0, np.float32), d) for d in range(2)]
    ys = [DeviceArray(n, np.float32, d) for d in range(2)]
    streams = [Stream(d) for d in range(2)]
    for d in range(2):
        comms[d].all_reduce(xs[d], ys[d], stream=streams[d])
    for s in streams:
        s.synchronize()
    return [float(y.to_numpy().min()) for y in ys] == [3.0, 3.0]


def truncated_comm():
    import numpy as np

    from npuemu.host.api import Device, DeviceArray, Stream, hccl
    from npuemu.host.hccl import HcclError
    from npuemu.shared import errors
    _devs = [Device(0), Device(1)]
    comms = hccl.init_all([0, 1])
    pids = [worker(d).pid for d in range(2)]
    seg = comms[0]._c.seg
    os.truncate("/dev/shm" + seg.name, 12)  # after both cards attached it
    R["async_error"] = [c._c.async_error for c in comms]
    xs = [DeviceArray.from_numpy(np.ones(1 << 12, np.float32), d) for d in range(2)]
    streams = [Stream(d) for d in range(2)]
    codes = []
    for d in range(2):
        try:
            comms[d].all_reduce(xs[d], stream=streams[d])
            streams[d].synchronize()
            codes.append(0)
        except errors.AclError as err:
            codes.append(err.code)
        except HcclError as err:
            codes.append(["hccl", err.code])
    R["codes"] = codes
    R["same_workers"] = [worker(d).pid for d in range(2)] == pids
    for c in comms:
        c.destroy()
    R["fresh_comm"] = all_reduce_ok(hccl.init_all([0, 1]))
    R["copies"] = copies_ok(2)


def copies_ok(n_devices):
    import numpy as np

    from npuemu.host.api import DeviceArray
    data = np.arange(1 << 16, dtype=np.uint8)
    return all(np.array_equal(DeviceArray.from_numpy(data, d).to_numpy(), data)
               for d in range(n_devices))


def serves():
    from npuemu.host.api import Device, hccl
    _devs = [Device(0), Device(1)]
    R["copies"] = copies_ok(2)
    comms = hccl.init_all([0, 1])
    R["all_reduce"] = all_reduce_ok(comms)
    for c in comms:
        c.destroy()


# --------------------------------------------------------------------------- windows
def vmm():
    from npuemu.device.memory import windows
    from npuemu.shared import address, errors
    from npuemu.shared.protocol import Op
    acl = setup()
    ptr, ret = acl.rt.malloc(2 * MiB, 0)
    ok(ret, "malloc")
    lk, proc = link(), worker()
    R["maps_before"] = map_count(proc)
    base = address.VIRT_BASE + (1 << 40)

    def vmm_map(va, size, offset, phys, length):
        return code_of(lk.call, Op.VMM_MAP, va, size, offset, phys, length)

    def codes_of(requests):
        """The codes of ``requests`` sent back to back (the link's call_many, one wait)."""
        return [r.code if isinstance(r, errors.AclError) else 0
                for r in lk.call_many(requests)]

    codes = codes_of([(Op.VMM_MAP, base + k * 2 * MiB, 2 * MiB, 0, ptr, 2 * MiB)
                      for k in range(windows.MAX_WINDOWS + 1)])
    R["windows"] = [codes.count(0), codes[-1]]
    # empty windows go at the next new one (no task)
    codes = codes_of([(Op.VMM_UNMAP, base + k * 2 * MiB, 0) for k in range(windows.MAX_WINDOWS)])
    ok(max(codes), "unmap")
    R["new_window_after_unmaps"] = vmm_map(base - (1 << 30), 2 * MiB, 0, ptr, 2 * MiB)
    # one big window, 4 KiB pieces of the block, until the memory-area limit refuses: 256
    # maps at a time; the maps after the first refusal must be refused too
    big, pieces, code, R["mapped_after_refusal"] = address.VIRT_BASE + (1 << 41), 0, 0, 0
    while pieces < 20000 and not code:
        offs = [(pieces + k) * 8192 for k in range(256)]
        for c in codes_of([(Op.VMM_MAP, big, 256 * MiB, off, ptr + off % (2 * MiB), 4096)
                           for off in offs]):
            R["mapped_after_refusal"] += bool(code) and not c
            code = code or c
            pieces += not code
    R["pieces"], R["pieces_code"] = pieces, code
    R["maps_full"] = map_count(proc)
    with open("/proc/sys/vm/max_map_count") as f:
        R["max_map_count"] = int(f.read())
    R["malloc_after"] = acl.rt.malloc(4 * MiB, 0)[1]
    hold_until_told()
    R["unmap"] = code_of(lk.call, Op.VMM_UNMAP, big, 0)
    R["map_again"] = vmm_map(big, 256 * MiB, 0, ptr, 4096)
    R["same_worker"] = worker().pid == proc.pid
    R["code_names"] = [errors.ACL_ERROR_RT_OVER_LIMIT, errors.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL]


def hold_until_told():
    """With ``HOLD`` set: touch ``$HOLD.ready``, then wait (bounded) for ``$HOLD``."""
    hold = os.environ.get("HOLD")
    if hold:
        open(hold + ".ready", "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)


def vmm_fresh():
    acl = setup()
    g = 2 * MiB
    va, ret = acl.rt.reserve_mem_address(4 * g, 0, 0, 0)
    ok(ret, "reserve")
    prop = {"handleType": 0, "allocationType": 0, "memAttr": 13,  # ACL_MEM_HUGE
            "location": {"type": 1, "id": 0}}
    handle, ret = acl.rt.malloc_physical(g, prop, 0)
    ok(ret, "malloc_physical")
    ok(acl.rt.map_mem(va, g, 0, handle, 0), "map_mem")
    src, ret = acl.rt.malloc(g, 0)
    ok(ret, "malloc")
    data = bytes(range(256)) * (g // 256)
    ok(acl.rt.memcpy(src, g, acl.util.bytes_to_ptr(data), g, 1), "H2D")
    ok(acl.rt.memcpy(va, g, src, g, 3), "D2D into the mapping")
    out = bytearray(g)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), g, va, g, 2), "D2H")
    R["copy"] = bytes(out) == data
    ok(acl.rt.unmap_mem(va), "unmap")
    ok(acl.rt.free_physical(handle), "free_physical")
    ok(acl.rt.release_mem_address(va), "release")


# --------------------------------------------------------------------------- models
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "touch_kernel.py")) as _f:
    KERNELS = _f.read()
"""The text of ``touch_kernel.py`` (its one kernel, ``touch``)."""


def models():
    from npuemu.device.exec import model
    from npuemu.host.core import kernel as core_kernel
    from npuemu.shared import protocol
    from npuemu.shared.protocol import Op
    setup()
    lk, proc = link(), worker()
    binary = core_kernel.binary_load_from_data(KERNELS)
    load = lambda steps, mid=0: lk.call(Op.MODEL_LOAD, mid, 0, 0, steps)[0]  # noqa: E731
    wide = [[0, binary.bin_id, "touch", 65535, [0], [], [], []] for _ in range(12)]
    rss0 = proc.memory_info().rss
    mid = load(wide)
    R["wide_frame_bytes"] = len(protocol.pack([Op.MODEL_LOAD, 1, 0, 0, 0, wide]))
    R["wide_rss_mib"] = (proc.memory_info().rss - rss0) / MiB
    lk.call(Op.MODEL_UNLOAD, mid)
    # one model, chunk after chunk, until the step limit refuses
    empty, chunk = [0, 0, "", 0, [], [], [], []], 4096
    rss0 = proc.memory_info().rss
    mid, sent, code = load([empty] * chunk), chunk, 0
    while not code and sent <= model.MAX_STEPS:
        code = code_of(load, [empty] * chunk, mid)
        sent += 0 if code else chunk
    R["steps"] = [sent, code]
    R["steps_rss_mib"] = (proc.memory_info().rss - rss0) / MiB
    R["steps_bytes_mib"] = sent * len(protocol.pack(empty)) / MiB
    lk.call(Op.MODEL_UNLOAD, mid)
    models_count()
    R["same_worker"] = worker().pid == proc.pid


def models_count():
    """Models of one step each until the model limit refuses; an unload makes room."""
    from npuemu.device.exec import model
    from npuemu.shared import errors
    from npuemu.shared.protocol import Op
    lk = link()
    empty = [0, 0, "", 0, [], [], [], []]
    mids, code = [], 0
    while not code and len(mids) <= model.MAX_MODELS:
        try:
            mids.append(lk.call(Op.MODEL_LOAD, 0, 0, 0, [empty])[0])
        except errors.AclError as err:
            code = err.code
    R["models"] = [len(mids), code]
    lk.call(Op.MODEL_UNLOAD, mids.pop())
    R["after_unload"] = code_of(lk.call, Op.MODEL_LOAD, 0, 0, 0, [empty])


# --------------------------------------------------------------------------- communicators
def comm_attach():
    """One-rank communicators of card 0, attached raw until the limit refuses."""
    from npuemu.device.exec import collective
    from npuemu.host.driver.commseg import CommSegment
    from npuemu.shared import errors
    from npuemu.shared.protocol import Op
    setup()
    lk, proc = link(), worker()
    node = lk.node
    threads0 = proc.num_threads()
    segs, cids, code = [], [], 0
    while not code and len(cids) <= collective.MAX_COMMS:
        seg = CommSegment.create(node)
        seg.join(0, 1, 0, 0)
        segs.append(seg)
        try:
            cids.append(lk.call(Op.COMM_ATTACH, seg.name, 0)[0])
        except errors.AclError as err:
            code = err.code
    R["attached"], R["code"] = len(cids), code
    R["threads_grew"] = proc.num_threads() - threads0
    R["threads"] = proc.num_threads()
    hold_until_told()
    for cid in cids:
        lk.call(Op.COMM_ATTACH, "", cid)
    again = [lk.call(Op.COMM_ATTACH, seg.name, 0)[0] for seg in segs[:len(cids)]]
    R["again"] = len(again)
    R["threads_grew_again"] = proc.num_threads() - threads0
    for cid in again:
        lk.call(Op.COMM_ATTACH, "", cid)
    for seg in segs:
        seg.close()
    R["same_worker"] = worker().pid == proc.pid


def abandon():
    """A communicator segment whose one rank (this process) joined, left behind by an exit
    that runs no clean-up: the supervisor must remove it when this process goes."""
    from npuemu.host.driver.commseg import CommSegment
    setup()
    seg = CommSegment.create(link().node)
    seg.join(0, 1, 0, 0)
    print("RESULT " + json.dumps({"segment": seg.name}), flush=True)
    os._exit(0)


MODES = {"truncated_comm": truncated_comm, "serves": serves, "vmm": vmm,
         "vmm_fresh": vmm_fresh, "models": models, "comm_attach": comm_attach,
         "abandon": abandon}

if __name__ == "__main__":
    MODES[sys.argv[1]]()
    print("RESULT " + json.dumps(R), flush=True)
