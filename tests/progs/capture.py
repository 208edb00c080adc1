"""Child program of ``tests/integration/test_capture.py``: stream capture and replay
(``aclmdlRICaptureBegin`` / ``End`` / ``ExecuteAsync``), models built by hand on persistent
streams, the calls a capture forbids, and the stream and copy flags whose effects a capture
shares (PERSISTENT, HOST_TO_BUF_TO_DEVICE).

``python capture.py SCENARIO`` initializes pyACL, sets device 0, loads the kernels of
``capture_kernels.py``, runs one scenario and prints ``R`` (see ``childlib``); the
assertions are the test's.
"""

import json
import os
import threading
import time

import numpy as np
from childlib import (
    R,
    acl,
    d2h,
    event,
    h2d,
    hold,
    ints,
    main,
    malloc,
    ok,
    scenario,
    source,
    stream,
)

N = 64
GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2
H2D, D2H, D2D, BUF = 1, 2, 3, 5
K = {}
"""The kernels of capture_kernels.py by name."""


def kernels():
    b, ret = acl.rt.binary_load_from_data(source("capture_kernels.py"))
    ok(ret, "binary_load_from_data")
    for name in ("axpb", "add_into", "boom", "nap"):
        K[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, f"binary_get_function {name}")


def launch(name, s, *args, blocks=1):
    ok(acl.rt.launch_kernel(K[name], blocks, list(args), s), f"launch {name}")


def put(p, arr):
    h2d(p, np.ascontiguousarray(arr, np.float32).tobytes())


def get(p, n=N):
    return np.frombuffer(d2h(p, n * 4), np.float32).tolist()


def pinned(n):
    p, ret = acl.rt.malloc_host(n)
    ok(ret, "malloc_host")
    return p


def end(s):
    ri, ret = acl.mdl.ri_capture_end(s)
    ok(ret, "ri_capture_end")
    return ri


def replay(ri, s):
    ok(acl.mdl.ri_execute_async(ri, s), "ri_execute_async")
    return acl.rt.synchronize_stream(s)


# ---------------------------------------------------------------------- one stream
def chain_tasks(s, x, y, host):
    """Kernels, a memset, a D2D and an H2D copy from pinned memory, a D2H copy back."""
    launch("axpb", s, x, N, 2.0, 1.0)
    ok(acl.rt.memcpy_async(y, N * 4, host, N * 4, H2D, s), "H2D")
    launch("add_into", s, x, y, N)
    ok(acl.rt.memset_async(y, N * 4, 0, N * 4, s), "memset")
    ok(acl.rt.memcpy_async(y, N * 4, x, N * 4, D2D, s), "D2D")
    launch("axpb", s, y, N, 1.0, 0.5)
    ok(acl.rt.memcpy_async(host, N * 4, y, N * 4, D2H, s), "D2H")


@scenario
def one_stream():
    """A chain replayed equals the same chain run eagerly, replay after replay, with new
    input data each time; the capture itself runs nothing."""
    kernels()
    s = stream()
    x, y, xe, ye = (malloc(N * 4) for _ in range(4))
    host, host_e = pinned(N * 4), pinned(N * 4)
    put(x, np.ones(N))
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "ri_capture_begin")
    R["info"] = ints(acl.mdl.ri_capture_get_info(s))[::2]  # status, ret
    chain_tasks(s, x, y, host)
    ri = end(s)
    R["info_after"] = ints(acl.mdl.ri_capture_get_info(s))
    R["untouched"] = get(x)[:2]
    R["equal"] = []
    for k in range(3):
        data = np.arange(N, dtype=np.float32) * (k + 1)
        put(x, data)
        put(xe, data)
        src = (np.arange(N, dtype=np.float32) + k).tobytes()
        for p in (host, host_e):
            ok(acl.rt.memcpy(p, N * 4, acl.util.bytes_to_ptr(src), N * 4, H2D), "to pinned")
        R.setdefault("sync", []).append(replay(ri, s))
        chain_tasks(s, xe, ye, host_e)
        ok(acl.rt.synchronize_stream(s), "eager")
        R["equal"].append(get(x) == get(xe) and get(y) == get(ye)
                          and d2h(host, N * 4) == d2h(host_e, N * 4))
    R["value"] = get(y)[:2]
    R["destroy"] = acl.mdl.ri_destroy(ri)


@scenario
def op_capture():
    """An operator (aclopExecuteV2) captured and replayed gives the eager result."""
    s = stream()
    desc = acl.create_tensor_desc(0, [N], 2)
    a, b, c = (malloc(N * 4) for _ in range(3))
    bufs = [acl.create_data_buffer(p, N * 4) for p in (a, b, c)]
    attr = acl.op.create_attr()
    put(a, np.arange(N))
    put(b, np.ones(N))
    ok(acl.op.compile_and_execute_v2("Add", [desc, desc], bufs[:2], [desc], bufs[2:], attr,
                                     0, 0, None, s), "compile Add")
    ok(acl.rt.synchronize_stream(s), "eager Add")
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin")
    ok(acl.op.execute_v2("Add", [desc, desc], bufs[:2], [desc], bufs[2:], attr, s), "Add")
    ok(acl.op.execute_v2("Add", [desc, desc], [bufs[2], bufs[1]], [desc], bufs[:1], attr, s),
       "Add 2")
    ri = end(s)
    put(a, np.full(N, 10.0))
    R["sync"] = replay(ri, s)
    R["c"] = get(c)[:3]
    R["a"] = get(a)[:3]
    ok(acl.mdl.ri_destroy(ri), "destroy")


# ---------------------------------------------------------------------- two streams
@scenario
def two_streams():
    """Capture across two streams: the second joins through an event recorded on the
    origin (an ACL_EVENT_CAPTURE_STREAM_PROGRESS event) and is joined back; the replay
    orders them by those events."""
    kernels()
    s1, s2 = stream(), stream()
    e1, e2 = event(0x2), event()  # e1: ACL_EVENT_CAPTURE_STREAM_PROGRESS
    x, y = malloc(N * 4), malloc(N * 4)
    ok(acl.mdl.ri_capture_begin(s1, GLOBAL), "begin")
    launch("axpb", s1, x, N, 2.0, 0.0)          # x = 2x
    ok(acl.rt.record_event(e1, s1), "record e1")
    ok(acl.rt.stream_wait_event(s2, e1), "s2 waits e1")  # s2 joins the capture
    R["joined"] = ints(acl.mdl.ri_capture_get_info(s2))[::2]
    R["query_captured_event"] = acl.rt.query_event_status(e1)[1]
    launch("nap", s2, 0.2)
    ok(acl.rt.memcpy_async(y, N * 4, x, N * 4, D2D, s2), "y = x on s2")
    launch("axpb", s2, y, N, 1.0, 3.0)          # y = 2x + 3
    ok(acl.rt.record_event(e2, s2), "record e2")
    ok(acl.rt.stream_wait_event(s1, e2), "s1 waits e2")
    launch("add_into", s1, x, y, N)             # x = 4x + 3
    R["end_on_joined"] = acl.mdl.ri_capture_end(s2)[1]
    ri = end(s1)
    R["after"] = [ints(acl.mdl.ri_capture_get_info(s))[0] for s in (s1, s2)]
    R["streams"] = len(acl.mdl.ri_get_streams(ri)[0])
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ri-{os.getpid()}.json")
    ok(acl.mdl.ri_debug_json_print(ri, path, 1), "ri_debug_json_print")
    with open(path) as f:
        R["json"] = [[t["type"] for t in st["tasks"]] for st in json.load(f)["streams"]]
    os.unlink(path)
    R["json_bad_flag"] = acl.mdl.ri_debug_json_print(ri, path, 5)
    put(x, np.arange(N))
    R["sync"] = replay(ri, s1)
    R["x"] = get(x)[:3]
    R["y"] = get(y)[:3]
    R["e2_status"] = acl.rt.query_event_status(e2)  # recorded again by the replay
    ok(acl.mdl.ri_destroy(ri), "destroy")


# ---------------------------------------------------------------------- what is forbidden
def _code(fn, *args):
    out = fn(*args)
    return out[-1] if isinstance(out, tuple) else out


@scenario
def forbidden():
    """The calls a capture forbids, with their codes; the capture goes on after them."""
    kernels()
    s, other = stream(), stream()
    x = malloc(N * 4)
    e = event()
    page = bytearray(N * 4)
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin")
    R["begin_again"] = acl.mdl.ri_capture_begin(s, GLOBAL)
    launch("axpb", s, x, N, 1.0, 1.0)
    ok(acl.rt.record_event(e, s), "record")
    R["sync"] = acl.rt.synchronize_stream(s)
    R["query"] = _code(acl.rt.stream_query, s)
    R["destroy"] = acl.rt.destroy_stream(s)
    R["event_sync"] = acl.rt.synchronize_event(e)
    R["event_query"] = _code(acl.rt.query_event_status, e)
    R["memcpy"] = acl.rt.memcpy(x, N * 4, acl.util.bytes_to_ptr(page), N * 4, H2D)
    R["memset"] = acl.rt.memset(x, N * 4, 0, N * 4)
    R["pageable_async"] = acl.rt.memcpy_async(x, N * 4, acl.util.bytes_to_ptr(page), N * 4,
                                              H2D, s)
    R["pageable_other"] = acl.rt.memcpy_async(x, N * 4, acl.util.bytes_to_ptr(page), N * 4,
                                              H2D, other)
    old = ints(acl.mdl.ri_capture_thread_exchange_mode(RELAXED))
    R["exchange"] = old
    R["memcpy_relaxed"] = acl.rt.memcpy(x, N * 4, acl.util.bytes_to_ptr(page), N * 4, H2D)
    acl.mdl.ri_capture_thread_exchange_mode(GLOBAL)
    R["status"] = ints(acl.mdl.ri_capture_get_info(s))[0]
    wrong = []
    t = threading.Thread(target=lambda: wrong.append(acl.mdl.ri_capture_end(s)[1]))
    t.start()
    t.join()
    R["end_other_thread"] = wrong[0]
    R["end_after"] = acl.mdl.ri_capture_end(s)[1]  # the capture is over
    R["not_capturing"] = acl.mdl.ri_capture_end(other)[1]
    R["bad_mode"] = acl.mdl.ri_capture_begin(s, 7)


@scenario
def thread_modes():
    """THREAD_LOCAL forbids only the capturing thread; RELAXED forbids nobody; a GLOBAL
    capture forbids every GLOBAL thread."""
    s = stream()
    x = malloc(N * 4)
    page = bytearray(N * 4)

    ctx, ret = acl.rt.get_context()
    ok(ret, "get_context")

    def copy():
        ok(acl.rt.set_context(ctx), "set_context")
        return acl.rt.memcpy(x, N * 4, acl.util.bytes_to_ptr(page), N * 4, H2D)

    def copy_from_thread():
        out = []
        t = threading.Thread(target=lambda: out.append(copy()))
        t.start()
        t.join()
        return out[0]

    for name, mode in (("global", GLOBAL), ("thread_local", THREAD_LOCAL),
                       ("relaxed", RELAXED)):
        ok(acl.mdl.ri_capture_begin(s, mode), f"begin {name}")
        here = acl.rt.memcpy(x, N * 4, acl.util.bytes_to_ptr(page), N * 4, H2D)
        R[name] = [here, copy_from_thread()]
        ok(acl.mdl.ri_destroy(end(s)), f"end {name}")


@scenario
def invalidated():
    """A wait on an event recorded outside the capture invalidates it (107024); every later
    task gets 507903, so does the end; an unjoined stream ends the capture with 107025; a
    reset during a capture drops it."""
    kernels()
    s, s2 = stream(), stream()
    x = malloc(N * 4)
    outside = event()
    ok(acl.rt.record_event(outside, s2), "record outside")
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin")
    R["wait_outside"] = acl.rt.stream_wait_event(s, outside)
    R["status"] = ints(acl.mdl.ri_capture_get_info(s))[0]
    R["later_task"] = acl.rt.launch_kernel(K["axpb"], 1, [x, N, 1.0, 1.0], s)
    R["end"] = acl.mdl.ri_capture_end(s)
    R["after"] = ints(acl.mdl.ri_capture_get_info(s))[0]
    R["stream_ok"] = acl.rt.synchronize_stream(s)
    e = event()
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin 2")
    ok(acl.rt.record_event(e, s), "record")
    ok(acl.rt.stream_wait_event(s2, e), "join")
    launch("axpb", s2, x, N, 1.0, 1.0)  # s2 never joined back
    R["unjoined"] = acl.mdl.ri_capture_end(s)[1]
    R["s2_free"] = acl.rt.synchronize_stream(s2)
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin 4")
    ok(acl.rt.reset_device(0), "reset during a capture")  # drops the capture and its mode
    ok(acl.rt.set_device(0), "set_device again")
    x2, page = malloc(N * 4), bytearray(N * 4)
    R["memcpy_after_reset"] = acl.rt.memcpy(x2, N * 4, acl.util.bytes_to_ptr(page), N * 4, H2D)


def subscribed_stream():
    """A stream and the thread subscribed to it (serving its callbacks until ``stop``)."""
    ctx, ret = acl.rt.get_context()
    ok(ret, "get_context")
    stop = threading.Event()

    def serve():
        ok(acl.rt.set_context(ctx), "set_context in the subscribed thread")
        while not stop.is_set():
            acl.rt.process_report(50)

    tid, ret = acl.util.start_thread(serve, None)
    ok(ret, "start_thread")
    s = stream()
    ok(acl.rt.subscribe_report(tid, s), "subscribe_report")
    return s, tid, stop


@scenario
def captured_callbacks():
    """Host callbacks captured run at every replay, not at the capture: a blocking
    aclrtLaunchCallback on the thread subscribed to the captured stream sees the kernel
    before it done and not the one after it; a non-blocking one and a host function run
    in their turn too."""
    kernels()
    s, tid, stop = subscribed_stream()
    x = malloc(N * 4)
    put(x, np.zeros(N))
    seen = []

    def look(tag):
        seen.append([tag, get(x, 1)[0], threading.get_ident() == tid])

    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin")
    launch("axpb", s, x, N, 1.0, 1.0)
    R["block"] = acl.rt.launch_callback(look, "block", 1, s)
    launch("axpb", s, x, N, 1.0, 10.0)
    R["host_func"] = acl.rt.launch_host_func(s, lambda tag: seen.append([tag]), "host")
    R["no_block"] = acl.rt.launch_callback(lambda tag: seen.append([tag]), "no_block", 0, s)
    ri = end(s)
    R["at_capture"] = list(seen)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ri-cb-{os.getpid()}.json")
    ok(acl.mdl.ri_debug_json_print(ri, path, 1), "debug_json_print")
    with open(path, encoding="utf-8") as f:
        R["types"] = [t["type"] for t in json.load(f)["streams"][0]["tasks"]]
    os.unlink(path)
    R["replays"] = []
    for _ in range(2):
        R["replays"].append(replay(ri, s))
        deadline = time.monotonic() + 10
        while len(seen) % 3 and time.monotonic() < deadline:  # the non-blocking one
            time.sleep(0.01)
    R["seen"] = seen
    R["x"] = get(x, 1)[0]
    R["destroy"] = acl.mdl.ri_destroy(ri)
    stop.set()
    ok(acl.rt.unsubscribe_report(tid, s), "unsubscribe_report")


@scenario
def events_in_place():
    """An event recorded in a capture completes at its place in each replay: a stream
    outside the capture waiting on it copies the data the steps before the record made,
    while the replay is held further on by a blocking callback (a gate the program opens
    afterwards); a replay that fails before a record completes that event with its code."""
    kernels()
    s, tid, stop = subscribed_stream()
    outside = stream()
    x, y = malloc(N * 4), malloc(N * 4)
    put(x, np.zeros(N))
    e, gate = event(), threading.Event()
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin")
    launch("axpb", s, x, N, 1.0, 1.0)
    ok(acl.rt.record_event(e, s), "record in the capture")
    ok(acl.rt.launch_callback(lambda _: gate.wait(30), None, 1, s), "gate")
    launch("axpb", s, x, N, 1.0, 10.0)
    ri = end(s)
    R["rounds"] = []
    for _ in range(2):
        gate.clear()
        ok(acl.mdl.ri_execute_async(ri, s), "replay")
        ok(acl.rt.stream_wait_event(outside, e), "outside waits")
        ok(acl.rt.memcpy_async(y, N * 4, x, N * 4, D2D, outside), "copy outside")
        # both return while the replay is held at the gate (a record at the end would not)
        waited = [acl.rt.synchronize_stream_with_timeout(outside, 20000),
                  acl.rt.synchronize_event(e)]
        held = ints(acl.rt.stream_query(s))[0]
        copied = get(y, 1)[0]
        gate.set()
        R["rounds"].append([waited, held, copied, acl.rt.synchronize_stream(s), get(x, 1)[0]])
    ok(acl.mdl.ri_destroy(ri), "destroy")
    e2 = event()
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin failing")
    launch("boom", s)
    ok(acl.rt.record_event(e2, s), "record after the failing kernel")
    ri = end(s)
    ok(acl.mdl.ri_execute_async(ri, s), "failing replay")
    R["failed"] = [acl.rt.synchronize_event(e2), acl.rt.synchronize_stream(s)]
    R["destroy"] = acl.mdl.ri_destroy(ri)
    stop.set()
    ok(acl.rt.unsubscribe_report(tid, s), "unsubscribe_report")


@scenario
def abort_instance():
    """aclmdlRIAbort stops the replay running (at its next step: the kernel after a gate
    never runs) and the one queued, completes their events, and the instance replays
    again afterwards; an instance not built is 107000."""
    kernels()
    s, tid, stop = subscribed_stream()
    x = malloc(N * 4)
    put(x, np.zeros(N))
    e, gate, at_gate = event(), threading.Event(), threading.Event()

    def hold_gate(_):
        at_gate.set()
        gate.wait(30)

    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin")
    R["while_capturing"] = acl.mdl.ri_abort(ints(acl.mdl.ri_capture_get_info(s))[1])
    ok(acl.rt.launch_callback(hold_gate, None, 1, s), "gate")
    launch("axpb", s, x, N, 1.0, 1.0)
    ok(acl.rt.record_event(e, s), "record")
    ri = end(s)
    ok(acl.mdl.ri_execute_async(ri, s), "replay 1")
    ok(acl.mdl.ri_execute_async(ri, s), "replay 2")
    at_gate.wait(30)
    R["abort"] = acl.mdl.ri_abort(ri)
    gate.set()
    R["stopped"] = [acl.rt.synchronize_stream(s), acl.rt.synchronize_event(e) != 0,
                    get(x, 1)[0]]
    R["again"] = [replay(ri, s), acl.rt.synchronize_event(e), get(x, 1)[0]]
    R["destroy"] = acl.mdl.ri_destroy(ri)
    stop.set()
    ok(acl.rt.unsubscribe_report(tid, s), "unsubscribe_report")


# ---------------------------------------------------------------------- failures
@scenario
def failing_step():
    """A replay whose step fails fails with that step's code; the steps after it do not
    run; the stream and the instance stay usable; abort cancels a running replay."""
    kernels()
    s = stream()
    x = malloc(N * 4)
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin")
    launch("axpb", s, x, N, 0.0, 1.0)   # x = 1
    launch("boom", s)
    launch("axpb", s, x, N, 0.0, 5.0)   # not reached
    ri = end(s)
    put(x, np.zeros(N))
    R["sync"] = replay(ri, s)
    R["x"] = get(x)[:2]
    R["again"] = replay(ri, s)
    launch("axpb", s, x, N, 0.0, 7.0)
    R["eager_after"] = acl.rt.synchronize_stream(s)
    R["x_after"] = get(x)[:1]
    ok(acl.mdl.ri_destroy(ri), "destroy")
    ok(acl.mdl.ri_capture_begin(s, GLOBAL), "begin long")
    for _ in range(20):
        launch("nap", s, 0.25)
    launch("axpb", s, x, N, 0.0, 42.0)  # the last step: x = 42
    long = end(s)
    put(x, np.zeros(N))
    ok(acl.mdl.ri_execute_async(long, s), "execute long")
    time.sleep(0.3)
    R["abort"] = acl.rt.stream_abort(s)
    R["after_abort"] = acl.rt.synchronize_stream(s)
    R["x_after_abort"] = get(x)[:1]  # the last step never ran
    ok(acl.rt.set_op_execute_time_out(1), "timeout")  # one interval: about 4.3 s
    ok(acl.mdl.ri_execute_async(long, s), "execute long again")  # 20 x 0.25 s: 5 s
    R["timeout"] = acl.rt.synchronize_stream(s)
    R["x_after_timeout"] = get(x)[:1]
    ok(acl.rt.set_op_execute_time_out(0), "default timeout")
    R["destroy_long"] = acl.mdl.ri_destroy(long)


# ---------------------------------------------------------------------- flags
@scenario
def persistent():
    """Tasks on PERSISTENT / DEVICE_USE_ONLY / CPU_SCHEDULE streams are kept for a model,
    not run: synchronize returns at once and the memory stays as it was; bound to a model
    built by hand they run when the model executes."""
    kernels()
    x = malloc(N * 4)
    put(x, np.zeros(N))
    R["kept"] = []
    for flag in (0x4, 0x10, 0x20):
        s, ret = acl.rt.create_stream_with_config(0, flag)
        ok(ret, f"create {flag:#x}")
        launch("nap", s, 0.3)
        launch("axpb", s, x, N, 0.0, 4.0)
        sync = acl.rt.synchronize_stream(s)  # nothing to wait for: neither task runs
        R["kept"].append([sync, ints(acl.rt.stream_query(s)), get(x)[0]])
        ok(acl.rt.destroy_stream(s), "destroy")
    p, ret = acl.rt.create_stream_with_config(0, 0x4)
    ok(ret, "create persistent")
    p2, ret = acl.rt.create_stream_with_config(0, 0x4)
    ok(ret, "create persistent 2")
    ri, ret = acl.mdl.ri_build_begin(0)
    ok(ret, "build_begin")
    R["bind_plain"] = acl.mdl.ri_bind_stream(ri, stream(), 0)
    ok(acl.mdl.ri_bind_stream(ri, p, 0), "bind")
    ok(acl.mdl.ri_bind_stream(ri, p2, 0), "bind 2")
    R["bind_again"] = acl.mdl.ri_bind_stream(ri, p, 0)
    e = event()
    launch("axpb", p, x, N, 1.0, 1.0)    # x += 1
    ok(acl.rt.record_event(e, p), "record")
    ok(acl.rt.stream_wait_event(p2, e), "wait")
    launch("axpb", p2, x, N, 3.0, 0.0)   # x *= 3
    ok(acl.mdl.ri_end_task(ri, p), "end_task")
    R["build_end_early"] = acl.mdl.ri_build_end(ri, None)
    ok(acl.mdl.ri_end_task(ri, p2), "end_task 2")
    ok(acl.mdl.ri_build_end(ri, None), "build_end")
    R["not_run_yet"] = get(x)[0]
    R["execute"] = [acl.mdl.ri_execute(ri, -1), get(x)[0], acl.mdl.ri_execute(ri, 5000),
                    get(x)[0]]
    R["execute_zero"] = acl.mdl.ri_execute(ri, 0)
    ok(acl.mdl.ri_unbind_stream(ri, p), "unbind")
    R["unbind_again"] = acl.mdl.ri_unbind_stream(ri, p)
    ok(acl.mdl.ri_destroy(ri), "destroy")


@scenario
def buf_to_device():
    """HOST_TO_BUF_TO_DEVICE stages the source at the call: overwriting it right after the
    call does not change what reaches the device, while HOST_TO_DEVICE from pinned memory
    reads it when the copy runs."""
    s = stream()
    out = {}
    for name, kind in (("buf", BUF), ("h2d", H2D)):
        x = malloc(N)
        src = pinned(N)
        ok(acl.rt.memset(src, N, 1, N), "src = 1")
        gate = hold(s)  # the copy cannot run before the source is overwritten
        ok(acl.rt.memcpy_async(x, N, src, N, kind, s), name)
        ok(acl.rt.memset(src, N, 2, N), "src = 2")
        gate.set()
        ok(acl.rt.synchronize_stream(s), "sync")
        out[name] = d2h(x, N)[0]
    R.update(out)


@scenario
def pythonic():
    """The Pythonic face: ``with stream.capture() as graph`` records, ``graph.replay`` runs;
    an exception in the block drops the capture and propagates."""
    import npuemu.host.api as npu

    dev = npu.Device(0)
    s = npu.Stream(dev)
    a, b = npu.DeviceBuffer(dev, 256), npu.DeviceBuffer(dev, 256)
    a.copy_from_host(bytes([5]) * 256)
    b.fill(0)
    with s.capture() as graph:
        s.copy(b, a)
    R["not_run"] = bytes(b.copy_to_host())[:1] == b"\0"
    R["tasks"] = [t["type"] for t in graph.describe()["streams"][0]["tasks"]]
    for value in (7, 9):
        a.copy_from_host(bytes([value]) * 256)
        graph.replay(s)
        s.synchronize()
        R.setdefault("replayed", []).append(bytes(b.copy_to_host())[0])
    graph.destroy()
    try:
        with s.capture():
            raise KeyError("inside the capture")
    except KeyError:
        R["propagated"] = True
    R["capturing_after"] = ints(acl.mdl.ri_capture_get_info(s.handle))[0]
    s.destroy()


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    main()
