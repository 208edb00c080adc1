"""Child program of ``tests/integration/test_streams.py``: pyACL streams and events
(``aclrtCreateStream``, ``aclrtLaunchHostFunc``, ``aclrtRecordEvent``/``StreamWaitEvent``,
``aclrtSynchronize*`` with and without timeouts, queries, failure modes, limits, destroy,
cross-device rules, stream flags).

``python streams.py SCENARIO`` initializes pyACL, sets device 0, runs one scenario and prints
``R`` (see ``childlib``); the assertions are the test's. The kernels are
``stream_kernels.py``. A stream is "held" by ``childlib.hold``.
"""

import os
import threading
import time

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
    zeroed,
)


def kernels():
    """The functions of ``stream_kernels.py`` by name."""
    b, ret = acl.rt.binary_load_from_data(source("stream_kernels.py"))
    ok(ret, "binary_load_from_data")
    out = {}
    for name in ("boom", "nap", "slow_fill"):
        out[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, name)
    return out


def launch(fn, args, s, blocks=1):
    """``aclrtLaunchKernel`` of ``fn``; exits the child on an error."""
    ok(acl.rt.launch_kernel(fn, blocks, args, s), "launch_kernel")


# ------------------------------------------------------------------------------- ordering
@scenario
def order():
    """Kernel, memsets and copies of one stream, then 200 memsets into one byte."""
    K = kernels()
    s = stream()
    n = 256 * 1024  # above the worker's inline limit: these go through the DMA engine
    a, b = zeroed(n), zeroed(n)
    pinned, ret = acl.rt.malloc_host(n)
    ok(ret, "malloc_host")
    # a slow kernel first, so every later task is queued behind a running one
    launch(K["slow_fill"], [a, n, 0x11, 0.1], s)
    ok(acl.rt.memset_async(a, n, 0x22, 16, s))             # small: done inline
    ok(acl.rt.memcpy_async(b, n, a, n, 3, s))              # D2D on the DMA engine
    ok(acl.rt.memcpy_async(pinned, n, b, n, 2, s))         # D2H into pinned memory
    R["sync"] = acl.rt.synchronize_stream(s)
    got = acl.util.ptr_to_bytes(pinned, n)
    R["chain"] = got == b"\x22" * 16 + b"\x11" * (n - 16)
    R["chain_head"] = list(got[:20])

    # a big memset (DMA engine) then a small one (inline) over the same bytes
    c = zeroed(n)
    ok(acl.rt.memset_async(c, n, 0x33, n, s))
    ok(acl.rt.memset_async(c, n, 0x44, 8, s))
    page = bytearray(64)  # pageable destination
    ok(acl.rt.memcpy_async(acl.util.bytes_to_ptr(page), 64, c, 64, 2, s))
    R["sync2"] = acl.rt.synchronize_stream(s)
    R["overlap"] = list(page[:10])

    # 200 one-byte memsets of increasing values into the same byte
    p = zeroed(64)
    launch(K["nap"], [0.05], s)
    for value in range(1, 201):
        ok(acl.rt.memset_async(p, 64, value, 1, s), f"memset_async {value}")
    R["sync3"] = acl.rt.synchronize_stream(s)
    R["last"] = d2h(p, 2)[0], d2h(p, 2)[1]
    ok(acl.rt.free_host(pinned))


# ---------------------------------------------------------------- concurrency and events
@scenario
def blocked_stream():
    """A held stream, a stream waiting on its event, an independent one; a dependency."""
    K = kernels()
    A, B, C = stream(), stream(), stream()
    pa, pc, pk = zeroed(64), zeroed(64), zeroed(64)
    # A waits on an event that B records only after its host function returns
    gate = hold(B)
    e = event()
    ok(acl.rt.record_event(e, B))
    ok(acl.rt.stream_wait_event(A, e))
    ok(acl.rt.memset_async(pa, 64, 0xAA, 64, A))
    # C is independent: its copy and kernel complete while A and B are blocked
    ok(acl.rt.memset_async(pc, 64, 0xCC, 64, C))
    launch(K["slow_fill"], [pk, 64, 0x5C, 0.0], C)
    t = time.monotonic()
    R["sync_c"] = acl.rt.synchronize_stream_with_timeout(C, 5000)
    R["sync_c_s"] = time.monotonic() - t
    R["c_data"] = [d2h(pc, 64) == b"\xcc" * 64, d2h(pk, 64) == b"\x5c" * 64]
    R["while_held"] = {"a": ints(acl.rt.stream_query(A)), "b": ints(acl.rt.stream_query(B)),
                       "c": ints(acl.rt.stream_query(C)), "e": ints(acl.rt.query_event(e)),
                       "pa": d2h(pa, 64) == bytes(64)}
    gate.set()
    R["sync_a"] = acl.rt.synchronize_stream(A)
    R["pa_after"] = d2h(pa, 64) == b"\xaa" * 64
    R["sync_b"] = acl.rt.synchronize_stream(B)

    # cross-stream dependency: B's copy sees what A's slow kernel wrote
    x, y = zeroed(4096), zeroed(4096)
    e2 = event()
    launch(K["slow_fill"], [x, 4096, 0x7E, 0.15], A)
    ok(acl.rt.record_event(e2, A))
    ok(acl.rt.stream_wait_event(B, e2))
    ok(acl.rt.memcpy_async(y, 4096, x, 4096, 3, B))
    R["sync_dep"] = acl.rt.synchronize_stream(B)
    R["y"] = d2h(y, 4096) == b"\x7e" * 4096
    R["y_head"] = list(d2h(y, 4))
    R["sync_a2"] = acl.rt.synchronize_stream(A)


@scenario
def event_timing():
    """Elapsed time around a 50 ms kernel, timestamps, and their error codes."""
    K = kernels()
    s = stream()
    start, end = event(), event()
    t0 = time.monotonic()
    ok(acl.rt.record_event(start, s))
    launch(K["nap"], [0.05], s)
    ok(acl.rt.record_event(end, s))
    ok(acl.rt.synchronize_event(end))
    R["wall_ms"] = (time.monotonic() - t0) * 1000
    ms, ret = acl.rt.event_elapsed_time(start, end)
    R["elapsed"] = [ms, ret]
    R["reversed"] = acl.rt.event_elapsed_time(end, start)[1]
    timestamps(K, s)
    timing_errors(s, start, end)


def timestamps(K, s):
    """Timestamps (microseconds) are monotonic across records and agree with elapsed time."""
    e1, e2, e3 = event(), event(), event()
    ok(acl.rt.record_event(e1, s))
    launch(K["nap"], [0.01], s)
    ok(acl.rt.record_event(e2, s))
    launch(K["nap"], [0.01], s)
    ok(acl.rt.record_event(e3, s))
    ok(acl.rt.synchronize_stream(s))
    ts = [ints(acl.rt.event_get_timestamp(e)) for e in (e1, e2, e3)]
    ok(acl.rt.record_event(e1, s))  # re-recorded: a later timestamp
    ok(acl.rt.synchronize_stream(s))
    ts.append(ints(acl.rt.event_get_timestamp(e1)))
    R["ts"] = ts
    ms23, ret = acl.rt.event_elapsed_time(e2, e3)
    R["ms23"] = [ms23, ret]


def timing_errors(s, start, end):
    """Events without a timeline, never recorded, or still pending."""
    plain = event(1)  # ACL_EVENT_SYNC only: no timestamp
    ok(acl.rt.record_event(plain, s))
    ok(acl.rt.synchronize_stream(s))
    R["no_timeline"] = [acl.rt.event_elapsed_time(plain, end)[1],
                        acl.rt.event_elapsed_time(start, plain)[1],
                        acl.rt.event_get_timestamp(plain)[1]]
    timed = event(8)  # ACL_EVENT_TIME_LINE
    ok(acl.rt.record_event(timed, s))
    ok(acl.rt.synchronize_stream(s))
    R["timeline_flag"] = acl.rt.event_elapsed_time(start, timed)[1]
    never = event()
    R["unrecorded"] = [acl.rt.event_elapsed_time(never, end)[1],
                       acl.rt.event_elapsed_time(start, never)[1],
                       acl.rt.event_get_timestamp(never)[1]]
    gate = hold(s)
    pending = event()
    ok(acl.rt.record_event(pending, s))
    R["pending"] = acl.rt.event_elapsed_time(start, pending)[1]
    gate.set()
    ok(acl.rt.synchronize_stream(s))


# ---------------------------------------------------------------------- timeouts, queries
def timed(call):
    """``call()``'s result and the seconds it took."""
    t = time.monotonic()
    ret = call()
    return ret, time.monotonic() - t


@scenario
def timeouts():
    """Queries of a held stream and event; synchronize with timeouts; after release."""
    s, other = stream(), stream()
    gate = hold(s)
    e = event()
    ok(acl.rt.record_event(e, s))
    R["held"] = {"stream": ints(acl.rt.stream_query(s)),
                 "event": ints(acl.rt.query_event(e)),
                 "status": ints(acl.rt.query_event_status(e)),
                 "wait": ints(acl.rt.query_event_wait_status(e)),
                 "other": ints(acl.rt.stream_query(other))}
    R["stream_timeout"], R["stream_timeout_s"] = timed(
        lambda: acl.rt.synchronize_stream_with_timeout(s, 200))
    R["event_timeout"], R["event_timeout_s"] = timed(
        lambda: acl.rt.synchronize_event_with_timeout(e, 200))
    R["device_timeout"], R["device_timeout_s"] = timed(
        lambda: acl.rt.synchronize_device_with_timeout(200))
    R["bad_timeouts"] = [acl.rt.synchronize_stream_with_timeout(s, 0),
                         acl.rt.synchronize_stream_with_timeout(s, -2),
                         acl.rt.synchronize_event_with_timeout(e, 0),
                         acl.rt.synchronize_event_with_timeout(e, -5)]
    R["other_sync"] = acl.rt.synchronize_stream_with_timeout(other, 1000)
    gate.set()
    R["sync_forever"] = acl.rt.synchronize_stream_with_timeout(s, -1)
    R["done"] = {"stream": ints(acl.rt.stream_query(s)),
                 "event": ints(acl.rt.query_event(e)),
                 "status": ints(acl.rt.query_event_status(e)),
                 "wait": ints(acl.rt.query_event_wait_status(e))}
    R["event_sync"] = [acl.rt.synchronize_event(e),
                       acl.rt.synchronize_event_with_timeout(e, 100)]
    never = event()  # never recorded: complete by design
    R["never"] = [ints(acl.rt.query_event(never)), acl.rt.synchronize_event(never)]


def counter(gate, entered, box):
    """Count for 0.2 s (pure Python: needs the GIL), then release the held stream."""
    entered.wait(5)
    end = time.monotonic() + 0.2
    n = 0
    while time.monotonic() < end:
        n += 1
    box.append(n)
    gate.set()


@scenario
def threads_run():
    """Synchronize stream, event and device while only another thread can release them."""
    s = stream()
    e = event()
    results = {}
    for name, wait in (("stream", lambda: acl.rt.synchronize_stream(s)),
                       ("event", lambda: acl.rt.synchronize_event(e)),
                       ("device", lambda: acl.rt.synchronize_device())):
        gate = hold(s)
        ok(acl.rt.record_event(e, s))
        entered, box = threading.Event(), []
        th = threading.Thread(target=counter, args=(gate, entered, box))
        th.start()
        t = time.monotonic()
        entered.set()
        ret = wait()  # only the counter thread can release the stream
        results[name] = {"ret": ret, "count": box[0] if box else -1,
                         "released": gate.is_set(), "s": time.monotonic() - t}
        th.join()
    R.update(results)


@scenario
def concurrent_calls():
    """Three threads each calling synchronize_device and a D2H memcpy 3000 times."""
    stream()
    p = zeroed(64)
    seen = []

    def loop():
        ok(acl.rt.set_device(0))
        buf = bytearray(64)
        for _ in range(3000):
            try:
                rets = (acl.rt.synchronize_device(),
                        acl.rt.memcpy(acl.util.bytes_to_ptr(buf), 64, p, 64, 2))
            except Exception as err:  # what the bug raises
                seen.append(repr(err))
                return
            if rets != (0, 0):
                seen.append(repr(rets))
                return

    threads = [threading.Thread(target=loop) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    R["errors"] = seen


# ------------------------------------------------------------------------------ failures
@scenario
def failure_modes():
    """A failing kernel on a continue-mode and a stop-mode stream; a waiter; afterwards."""
    K = kernels()
    cont, stop = stream(), stream()
    R["modes"] = [acl.rt.set_stream_failure_mode(cont, 0),
                  acl.rt.set_stream_failure_mode(stop, 1),
                  acl.rt.set_stream_failure_mode(cont, 2)]
    pc, ps = zeroed(64), zeroed(64)
    for s, p in ((cont, pc), (stop, ps)):
        launch(K["boom"], [], s)
        ok(acl.rt.memset_async(p, 64, 0x77, 64, s))
    R["sync"] = [acl.rt.synchronize_stream(cont), acl.rt.synchronize_stream(stop)]
    R["data"] = [d2h(pc, 64) == b"\x77" * 64, d2h(ps, 64) == bytes(64)]

    # a stream waiting on an event recorded after a failure fails with the same code
    A, B = stream(), stream()
    e = event()
    pb = zeroed(64)
    launch(K["boom"], [], A)
    ok(acl.rt.record_event(e, A))
    ok(acl.rt.stream_wait_event(B, e))
    ok(acl.rt.memset_async(pb, 64, 1, 64, B))
    R["waiter"] = acl.rt.synchronize_stream_with_timeout(B, 5000)
    R["waiter_again"] = acl.rt.synchronize_stream(B)
    R["recorder"] = acl.rt.synchronize_stream(A)
    R["event"] = acl.rt.synchronize_event(e)

    # the worker is still up and serves normally
    p = malloc(4096)
    data = os.urandom(4096)
    h2d(p, data)
    R["alive"] = [d2h(p, 4096) == data, ints(acl.rt.query_device_status(0))]
    q = zeroed(64)
    ok(acl.rt.memset_async(q, 64, 9, 64, cont))
    R["cont_later"] = [acl.rt.synchronize_stream(cont), d2h(q, 1)[0]]


@scenario
def stop_mode_waiter():
    """An event recorded after a failure on a stop-mode stream, and its waiter."""
    K = kernels()
    A, B = stream(), stream()
    ok(acl.rt.set_stream_failure_mode(A, 1))
    e = event()
    launch(K["boom"], [], A)
    ok(acl.rt.record_event(e, A))
    ok(acl.rt.stream_wait_event(B, e))
    R["recorder"] = acl.rt.synchronize_stream(A)
    R["event"] = acl.rt.synchronize_event_with_timeout(e, 1000)
    R["waiter"] = acl.rt.synchronize_stream_with_timeout(B, 1000)


@scenario
def re_recorded():
    """An event recorded on a held stream, then again on a free one."""
    A, B = stream(), stream()
    gate = hold(A)
    e = event()
    ok(acl.rt.record_event(e, A))  # record 1: stuck behind the host function
    ok(acl.rt.record_event(e, B))  # record 2: the latest one, completes at once
    ok(acl.rt.synchronize_stream(B))
    R["before"] = ints(acl.rt.query_event(e))
    gate.set()
    ok(acl.rt.synchronize_stream(A))
    R["after"] = ints(acl.rt.query_event(e))
    R["sync"] = acl.rt.synchronize_event_with_timeout(e, 1000)


# ------------------------------------------------------------------ limits and lifecycle
@scenario
def stream_limit():
    """Streams up to NPUEMU_MAX_STREAMS (set by the test) on two devices."""
    made = [stream() for _ in range(4)]
    R["fifth"] = ints(acl.rt.create_stream())
    R["fifth_config"] = ints(acl.rt.create_stream_with_config(0, 0))
    ok(acl.rt.destroy_stream(made.pop()))
    _again, ret = acl.rt.create_stream()
    R["after_destroy"] = ret
    # the limit is per device; on device 1 the default stream takes one of the four
    ok(acl.rt.set_device(1))
    p = zeroed(64)
    ok(acl.rt.memset_async(p, 64, 3, 64, 0))  # creates device 1's default stream
    R["dev1"] = [acl.rt.create_stream()[1] for _ in range(4)]
    R["default_works"] = [acl.rt.synchronize_stream(0), d2h(p, 1)[0]]


@scenario
def destroy():
    """destroy_stream of a held stream, destroy_stream_force, an event destroyed pending."""
    s = stream()
    p = zeroed(64)
    gate = hold(s)
    ok(acl.rt.memset_async(p, 64, 0x31, 64, s))
    threading.Timer(0.2, gate.set).start()
    R["destroy"], R["destroy_s"] = timed(lambda: acl.rt.destroy_stream(s))
    R["released_first"] = gate.is_set()
    R["data"] = d2h(p, 64) == b"\x31" * 64
    R["reuse"] = [acl.rt.synchronize_stream(s), acl.rt.destroy_stream(s),
                  acl.rt.memset_async(p, 64, 0, 64, s)]

    f = stream()
    q = zeroed(64)
    gate = hold(f)
    ok(acl.rt.memset_async(q, 64, 0x32, 64, f))
    R["force"], R["force_s"] = timed(lambda: acl.rt.destroy_stream_force(f))
    R["force_before_release"] = not gate.is_set()
    gate.set()
    destroy_pending_event()

    # the device still works after all that
    time.sleep(0.05)
    R["q_untouched"] = d2h(q, 64) == bytes(64)
    h = stream()
    ok(acl.rt.memset_async(q, 64, 0x33, 64, h))
    R["later"] = [acl.rt.synchronize_stream(h), d2h(q, 1)[0]]


def destroy_pending_event():
    """An event may be destroyed while its record is still pending."""
    g = stream()
    gate = hold(g)
    e = event()
    ok(acl.rt.record_event(e, g))
    R["destroy_event"] = acl.rt.destroy_event(e)
    R["destroyed_query"] = acl.rt.query_event(e)[1]
    gate.set()
    R["g_sync"] = acl.rt.synchronize_stream(g)
    fresh = [event() for _ in range(3)]
    for ev in fresh:
        ok(acl.rt.record_event(ev, g))
    R["fresh"] = [acl.rt.synchronize_event(ev) for ev in fresh]


# ---------------------------------------------------------------------------- devices
@scenario
def cross_device():
    """Events and streams of device 1 used while device 0 is current."""
    s0, e0 = stream(), event()
    ok(acl.rt.set_device(1))
    s1, e1 = stream(), event()
    p1, q1 = zeroed(64), zeroed(64)
    R["record_foreign_event"] = acl.rt.record_event(e0, s1)
    R["wait_foreign_event"] = acl.rt.stream_wait_event(s1, e0)
    gate = hold(s1)
    ok(acl.rt.record_event(e1, s1))

    ok(acl.rt.set_device(0))
    R["memcpy_foreign_stream"] = acl.rt.memcpy_async(q1, 64, p1, 64, 3, s1)
    R["memset_foreign_stream"] = acl.rt.memset_async(p1, 64, 1, 64, s1)
    R["query_foreign_pending"] = ints(acl.rt.query_event(e1))
    gate.set()
    R["sync_foreign_event"] = acl.rt.synchronize_event(e1)
    R["query_foreign_done"] = ints(acl.rt.query_event(e1))
    R["status_foreign_done"] = ints(acl.rt.query_event_status(e1))
    # device 0 is unaffected and its own event works
    ok(acl.rt.record_event(e0, s0))
    R["own"] = [acl.rt.synchronize_event(e0), acl.rt.synchronize_stream(s0)]


@scenario
def sync_device():
    """synchronize_device over three streams and the default one; a failure on one."""
    K = kernels()
    ok(acl.rt.set_device(1))
    d1 = stream()
    gate1 = hold(d1)  # a held stream on device 1 must not matter to device 0
    ok(acl.rt.set_device(0))
    streams = [stream(), stream(), stream(), 0]  # 0: the default stream
    bufs = [zeroed(64) for _ in streams]
    for i, (s, p) in enumerate(zip(streams, bufs, strict=True)):
        launch(K["slow_fill"], [p, 64, 0x40 + i, 0.02 * (i + 1)], s)
    R["sync"], R["sync_s"] = timed(acl.rt.synchronize_device)
    R["data"] = [d2h(p, 64) == bytes([0x40 + i]) * 64 for i, p in enumerate(bufs)]
    R["queries"] = [ints(acl.rt.stream_query(s)) for s in streams]
    # a failure on any stream is reported by synchronize_device, once
    launch(K["boom"], [], streams[1])
    R["fail"] = [acl.rt.synchronize_device(), acl.rt.synchronize_device(),
                 acl.rt.synchronize_stream(streams[1])]
    gate1.set()
    ok(acl.rt.set_device(1))
    R["dev1"] = acl.rt.synchronize_device()


# ------------------------------------------------------------------------------- flags
@scenario
def flags():
    """A persistent stream's synchronize returns at once; a fast-sync stream's works."""
    gate = threading.Event()
    persistent, ret = acl.rt.create_stream_with_config(0, 0x4)   # ACL_STREAM_PERSISTENT
    ok(ret, "create persistent")
    ok(acl.rt.launch_host_func(persistent, lambda _: gate.wait(10), None))
    t0 = time.monotonic()
    R["persistent_sync"] = acl.rt.synchronize_stream(persistent)  # returns at once
    R["persistent_fast"] = time.monotonic() - t0 < 2
    R["persistent_query"] = ints(acl.rt.stream_query(persistent))  # still held
    gate.set()
    fast, ret = acl.rt.create_stream_with_config(9, 0x2)           # FAST_SYNC, priority 9
    ok(ret, "create fast-sync")
    p = zeroed(4096)
    ok(acl.rt.memset_async(p, 4096, 7, 4096, fast))
    R["fast_sync"] = acl.rt.synchronize_stream(fast)
    R["fast_data"] = d2h(p, 4096) == bytes([7]) * 4096


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    main()
