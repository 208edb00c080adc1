"""Child program of ``tests/integration/test_tiny_kernels.py``: tiny kernels run inline in
the worker's scheduler (stream order and cross-stream events, an inline kernel's failure at
``aclrtSynchronizeStream`` and in the exception callback, a kernel that turns slow going back
to its engine where ``aclrtSetOpExecuteTimeOut`` applies, an op library kernel repeated on
the same buffers while their data, and then the buffers themselves, change).

``python tiny_kernels.py SCENARIO`` initializes pyACL, sets device 0, loads ``bump`` and
``nap`` of ``bump_kernels.py`` into ``F``, runs one scenario and prints ``R`` (see
``childlib``); the assertions are the test's.
"""

import time

import numpy as np
from childlib import (
    R,
    acl,
    d2h,
    event,
    h2d,
    hold,
    main,
    malloc,
    ok,
    scenario,
    source,
    stream,
    zeroed,
)

F: dict = {}
"""The kernels by name (``aclrtBinaryGetFunction``)."""


def put(p, values, dtype):
    """Write ``values`` as ``dtype`` at ``p``."""
    h2d(p, np.asarray(values, dtype).tobytes())


def get(p, dtype, n):
    """``n`` items of ``dtype`` read back from ``p``."""
    return np.frombuffer(d2h(p, n * np.dtype(dtype).itemsize), dtype, n).tolist()


@scenario
def order_and_events():
    a, c = stream(), stream()
    p, q = zeroed(16), zeroed(16)
    ev = event()
    for _ in range(300):
        ok(acl.rt.launch_kernel(F["bump"], 1, [p], a))
    ok(acl.rt.record_event(ev, a))
    gate = hold(a)                     # the next bumps wait until the copy is done
    ok(acl.rt.stream_wait_event(c, ev))
    ok(acl.rt.memcpy_async(q, 16, p, 16, 3, c))   # device to device, after the event
    for _ in range(100):
        ok(acl.rt.launch_kernel(F["bump"], 1, [p], a))
    R["sync"] = [acl.rt.synchronize_stream(c)]
    gate.set()
    R["sync"].append(acl.rt.synchronize_stream(a))
    R["p"], R["q"] = get(p, "int64", 2), get(q, "int64", 2)
    for n in (1, 4, 1):  # another block count is another measurement
        ok(acl.rt.launch_kernel(F["bump"], n, [q], a))
    R["sync2"] = acl.rt.synchronize_stream(a)
    R["q2"] = get(q, "int64", 2)


@scenario
def inline_failure():
    seen = []
    def on_exception(info):
        seen.append([acl.rt.get_error_code_from_exception_info(info),
                     acl.rt.get_stream_id_from_exception_info(info)])
    ok(acl.rt.set_exception_info_callback(on_exception))
    s = stream()
    p = zeroed(16)
    for _ in range(50):
        ok(acl.rt.launch_kernel(F["bump"], 1, [p], s))
    ok(acl.rt.synchronize_stream(s))
    put(p, [50, 1], np.int64)          # the next (same, tiny) launch raises
    ok(acl.rt.launch_kernel(F["bump"], 1, [p], s))
    R["fail"] = acl.rt.synchronize_stream(s)
    R["again"] = acl.rt.synchronize_stream(s)   # reported once
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    R["seen"] = seen
    put(p, [50, 0], np.int64)
    for _ in range(10):
        ok(acl.rt.launch_kernel(F["bump"], 1, [p], s))
    R["after"] = acl.rt.synchronize_stream(s)
    R["p"] = get(p, "int64", 2)


@scenario
def estimated_end():
    """A 2 ms kernel (on its engine) launched three times, the third with other arguments:
    whether the card wrote the stream's estimate of the launch's end (``ETA_NS``, from its
    last run of the same launch) when it started it, and how far past the launch."""
    from npuemu.host.core import stream as core_stream

    s = stream()
    handle = core_stream.resolve(s)
    p, q = zeroed(8), zeroed(8)
    put(p, [0.002], np.float64)
    put(q, [0.002], np.float64)
    R["estimated"], R["ahead_ms"] = [], []
    for buf in (p, p, q):
        before, t0 = handle.link.stream_eta[handle.slot], time.monotonic_ns()
        ok(acl.rt.launch_kernel(F["nap"], 1, [buf], s))
        ok(acl.rt.synchronize_stream(s))
        eta = handle.link.stream_eta[handle.slot]
        R["estimated"].append(eta != before)
        R["ahead_ms"].append((eta - t0) / 1e6 if eta != before else None)


@scenario
def turns_slow():
    s = stream()
    p = zeroed(8)
    for _ in range(20):
        ok(acl.rt.launch_kernel(F["nap"], 1, [p], s))
    ok(acl.rt.synchronize_stream(s))
    put(p, [0.2], np.float64)          # same launch, now 0.2 s: runs once more as it was
    ok(acl.rt.launch_kernel(F["nap"], 1, [p], s))
    R["slow"] = acl.rt.synchronize_stream(s)
    ok(acl.rt.set_op_execute_time_out(1))  # one interval: about 4.3 s
    put(p, [8.0], np.float64)          # back on the AI CPU engine: the timeout applies
    ok(acl.rt.launch_kernel(F["nap"], 1, [p], s))
    R["timeout"] = acl.rt.synchronize_stream(s)
    put(p, [0.0], np.float64)
    ok(acl.rt.launch_kernel(F["nap"], 1, [p], s))
    R["after"] = acl.rt.synchronize_stream(s)


@scenario
def op_on_changing_buffers():
    """aclopExecuteV2 of a small Add repeated on the same buffers (a repeated tiny launch
    runs inline, reusing what the card prepared for the last one): new input data each
    time, then the output freed and another block malloc'd at its address, then the inputs
    freed and malloc'd again."""
    s = stream()
    desc = acl.create_tensor_desc(0, [4, 4], 2)  # float32, ND
    attr = acl.op.create_attr()
    ok(acl.op.compile("Add", [desc, desc], [desc], attr, 0, 0, None))

    def buf(n=64):
        p = malloc(n)
        return p, acl.create_data_buffer(p, n)

    def add(px, py, bx, by, pz, bz, x, y):
        put(px, x, np.float32)
        put(py, y, np.float32)
        ok(acl.op.execute_v2("Add", [desc, desc], [bx, by], [desc], [bz], attr, s))
        ok(acl.rt.synchronize_stream(s))
        return get(pz, "float32", 16) == (x + y).ravel().tolist()

    (px, bx), (py, by), (pz, bz) = buf(), buf(), buf()
    rng = np.random.default_rng(5)
    R["same"] = [add(px, py, bx, by, pz, bz, *rng.standard_normal((2, 16)).astype(np.float32))
                 for _ in range(20)]
    acl.destroy_data_buffer(bz)
    ok(acl.rt.free(pz))
    pz, bz = buf()
    R["new_out"] = [add(px, py, bx, by, pz, bz, *rng.standard_normal((2, 16))
                        .astype(np.float32)) for _ in range(5)]
    for b, p in ((bx, px), (by, py)):
        acl.destroy_data_buffer(b)
        ok(acl.rt.free(p))
    (px, bx), (py, by) = buf(), buf()
    R["new_in"] = [add(px, py, bx, by, pz, bz, *rng.standard_normal((2, 16))
                       .astype(np.float32)) for _ in range(5)]


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    _b, _ret = acl.rt.binary_load_from_data(source("bump_kernels.py"))
    ok(_ret, "load")
    for _name in ("bump", "nap"):
        F[_name], _ret = acl.rt.binary_get_function(_b, _name)
        ok(_ret, _name)
    main()
