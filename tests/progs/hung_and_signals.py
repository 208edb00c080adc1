"""Child program of ``tests/integration/test_hung_and_signals.py``: a card that stops
answering (its worker stopped by SIGSTOP) under every kind of wait, a signal during a
blocking ``aclrtSynchronizeStream``, and ints the wire cannot carry.

``python hung_and_signals.py SCENARIO`` runs one scenario (no ``aclInit``; each sets its
devices) and prints ``R`` (see ``childlib``); the assertions are the test's. The nap kernel
is ``stream_kernels.py``'s.
"""

import os
import signal
import time

from childlib import R, acl, event, main, malloc, ok, scenario, source, stream

from npuemu.host.core import runtime


@scenario
def hung():
    ok(acl.rt.set_device(1))
    ok(acl.rt.set_device(0))  # current: the stream and the memory are on card 0
    s = stream()
    p = malloc(4096)
    pid = runtime.get().devices[0].link.worker_pid
    R["before"] = acl.rt.query_device_status(0)[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        ok(acl.rt.memset_async(p, 4096, 1, 4096, s))  # queued: never runs while stopped
        t = time.monotonic()
        R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 3000)
        R["sync_s"] = time.monotonic() - t
        t = time.monotonic()
        R["malloc"] = acl.rt.malloc(64, 0)[1]
        R["malloc_s"] = time.monotonic() - t
        R["status"] = acl.rt.query_device_status(0)[0]
        R["other_card"] = acl.rt.query_device_status(1)[0]
        R["sync_after"] = acl.rt.synchronize_stream(s)
    finally:
        os.kill(pid, signal.SIGCONT)
    ok(acl.rt.reset_device_force(0))
    ok(acl.rt.set_device(0))
    R["again"] = acl.rt.malloc(64, 0)[1]
    R["status_again"] = acl.rt.query_device_status(0)[0]


@scenario
def blocked():
    """A 30 s nap kernel, ``READY`` on stdout, then a synchronize the test signals."""
    ok(acl.rt.set_device(0))
    s = stream()
    b, ret = acl.rt.binary_load_from_data(source("stream_kernels.py"))
    ok(ret)
    f, ret = acl.rt.binary_get_function(b, "nap")
    ok(ret)
    ok(acl.rt.launch_kernel(f, 1, [30.0], s))
    print("READY", flush=True)
    acl.rt.synchronize_stream(s)
    print("NOT REACHED", flush=True)


@scenario
def overflow():
    ok(acl.rt.set_device(0))
    s = stream()
    e = event()
    ok(acl.rt.record_event(e, s))
    R["wait"] = [acl.rt.stream_wait_event_with_timeout(s, e, 2**64) for _ in range(1100)]
    R["create"] = sorted({acl.rt.create_stream_with_config(0, 2**64)[1] for _ in range(1100)})
    R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 10000)
    s2, ret = acl.rt.create_stream()
    R["create_after"] = ret
    ok(acl.rt.destroy_stream(s2))


if __name__ == "__main__":
    main()
