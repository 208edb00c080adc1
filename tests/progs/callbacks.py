"""Child program of ``tests/integration/test_callbacks.py``: host callbacks
(``aclrtSubscribeReport``/``aclrtProcessReport``/``aclrtLaunchCallback``,
``aclrtLaunchHostFunc``) and exception callbacks (``aclrtSetExceptionInfoCallback``,
``aclrtExceptionInfoCallbackRegister`` and the ``aclrtGet*FromExceptionInfo`` getters).

``python callbacks.py SCENARIO`` initializes pyACL, sets device 0, keeps its context in
``CTX`` (callbacks that read device memory set it on their thread first, as a pyACL program
must), runs one scenario and prints ``R`` (see ``childlib``); the assertions are the test's.
The failing kernels are ``kernels_failing.py``'s.
"""

import threading
import time

from childlib import R, acl, d2h, hold, ints, main, ok, scenario, source, stream, zeroed


def wait_for(predicate, seconds=5.0):
    """Poll ``predicate()`` up to ``seconds``; its last value."""
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.005)
    return predicate()


def failing():
    """The AI Core and AI CPU kernels of ``kernels_failing.py`` that raise, by name."""
    b, ret = acl.rt.binary_load_from_data(source("kernels_failing.py"))
    ok(ret, "binary_load_from_data")
    out = {}
    for name in ("boom_core", "boom_cpu"):
        out[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, name)
    return out


@scenario
def launch_callback():
    stop, subscribed = threading.Event(), threading.Event()
    unexpected = []

    def serve():
        ok(acl.rt.set_context(CTX), "set_context in the report thread")
        subscribed.wait(5)
        while not stop.is_set():
            ret = acl.rt.process_report(50)
            if ret not in (0, 507012):
                unexpected.append(ret)

    tid, ret = acl.util.start_thread(serve, None)
    ok(ret, "start_thread")
    s, s3 = stream(), stream()
    R["subscribe"] = [acl.rt.subscribe_report(tid, s), acl.rt.subscribe_report(tid, s3)]
    R["resubscribe"] = [acl.rt.subscribe_report(tid, s),
                        acl.rt.subscribe_report(threading.get_ident(), s)]
    subscribed.set()

    # callbacks run in stream order with their args, blocking or not
    calls = []
    p = zeroed(64)
    for i in range(6):
        ok(acl.rt.memset_async(p, 64, i + 1, 1, s))
        ok(acl.rt.launch_callback(lambda args: calls.append(args), [i, f"arg{i}"],
                                  i % 2, s), "launch_callback")
    ok(acl.rt.launch_callback(lambda args: calls.append(args), ["s3"], 0, s3))
    R["order_done"] = wait_for(lambda: len(calls) == 7)
    R["sync"] = [acl.rt.synchronize_stream(s), acl.rt.synchronize_stream(s3)]
    R["calls"] = calls

    # ACL_CALLBACK_BLOCK: the memset queued after it waits for the callback to return
    q = zeroed(64)
    observed, seen = [], threading.Event()

    def observe(args):
        time.sleep(0.1)
        observed.append(d2h(q, 1)[0])
        seen.set()

    ok(acl.rt.launch_callback(observe, None, 1, s))
    ok(acl.rt.memset_async(q, 64, 0x5A, 64, s))
    seen.wait(5)
    R["block"] = [acl.rt.synchronize_stream(s), observed, d2h(q, 1)[0]]

    # BLOCK holds the stream; NO_BLOCK does not
    gate = threading.Event()
    ok(acl.rt.launch_callback(lambda _: gate.wait(10), None, 1, s))
    t = time.monotonic()
    R["held"] = [acl.rt.synchronize_stream_with_timeout(s, 200),
                 ints(acl.rt.stream_query(s))]
    R["held_s"] = time.monotonic() - t
    gate.set()
    R["released"] = acl.rt.synchronize_stream(s)
    gate2 = threading.Event()
    w = zeroed(64)
    ok(acl.rt.launch_callback(lambda _: gate2.wait(10), None, 0, s))
    ok(acl.rt.memset_async(w, 64, 0x21, 64, s))
    R["no_block"] = [acl.rt.synchronize_stream_with_timeout(s, 3000), gate2.is_set(),
                     d2h(w, 1)[0]]
    gate2.set()

    R["bad_block_type"] = acl.rt.launch_callback(lambda _: None, None, 2, s)
    stop.set()
    R["stop_thread"] = acl.util.stop_thread(tid)
    R["unexpected"] = unexpected
    R["unsubscribe"] = [acl.rt.unsubscribe_report(tid, s),
                        acl.rt.launch_callback(lambda _: None, None, 0, s),
                        acl.rt.unsubscribe_report(tid, s) != 0,
                        acl.rt.unsubscribe_report(tid, s3)]


@scenario
def host_func_order():
    s = stream()
    p = zeroed(64)
    seen, last = [], threading.Event()

    def look(i):
        ok(acl.rt.set_context(CTX), "set_context in the runtime's thread")
        time.sleep(0.01)  # a later memset must still wait for this host function
        seen.append([i, d2h(p, 1)[0]])
        if i == 5:
            last.set()

    for i in range(6):
        ok(acl.rt.memset_async(p, 64, i + 1, 1, s))
        ok(acl.rt.launch_host_func(s, look, i), "launch_host_func")
    ok(acl.rt.memset_async(p, 64, 0x70, 1, s))
    R["all_ran"] = last.wait(5)
    R["sync"] = acl.rt.synchronize_stream(s)
    R["seen"] = seen
    R["final"] = d2h(p, 1)[0]
    R["not_callable"] = acl.rt.launch_host_func(s, None, None)
    ok(acl.rt.set_device(1))
    R["foreign_stream"] = acl.rt.launch_host_func(s, lambda _: None, None)


@scenario
def blocking_host_func():
    B, C = stream(), stream()
    gate = hold(B)
    ran = []
    ok(acl.rt.launch_host_func(C, lambda _: ran.append("C"), None))
    R["c"] = [acl.rt.synchronize_stream_with_timeout(C, 2000), list(ran)]
    gate.set()
    ok(acl.rt.synchronize_stream(B))
    ok(acl.rt.synchronize_stream(C))


@scenario
def exception_callbacks():
    def recorder(box):
        def callback(info):
            box.append({
                "info": info,
                "task": acl.rt.get_task_id_from_exception_info(info),
                "stream": acl.rt.get_stream_id_from_exception_info(info),
                "thread": acl.rt.get_thread_id_from_exception_info(info),
                "device": acl.rt.get_device_id_from_exception_info(info),
                "code": acl.rt.get_error_code_from_exception_info(info)})
        return callback

    legacy, registered, late = [], [], []
    legacy_cb, registered_cb = recorder(legacy), recorder(registered)
    R["set"] = acl.rt.set_exception_info_callback(legacy_cb)
    R["register"] = acl.rt.exception_info_callback_register(registered_cb)
    R["register_none"] = acl.rt.exception_info_callback_register(None)

    K0 = failing()
    s0 = stream()
    p = zeroed(64)
    ok(acl.rt.memset_async(p, 64, 1, 64, s0))
    ok(acl.rt.launch_kernel(K0["boom_core"], 1, [], s0))
    R["sync0"] = acl.rt.synchronize_stream(s0)
    ok(acl.rt.set_device(1))
    K1 = failing()
    s1 = stream()
    ok(acl.rt.launch_kernel(K1["boom_cpu"], 2, [], s1))
    R["sync1"] = acl.rt.synchronize_stream(s1)
    R["delivered"] = wait_for(lambda: len(legacy) >= 2 and len(registered) >= 2)
    R["sids"] = [acl.rt.stream_get_id(s0)[0], acl.rt.stream_get_id(s1)[0]]
    R["legacy"], R["registered"] = legacy, registered
    # the info is valid only during the callback
    R["stale"] = [acl.rt.get_error_code_from_exception_info(legacy[0]["info"]),
                  acl.rt.get_task_id_from_exception_info(0)]

    # unregister / clear, then one more failure reaches only the remaining callback
    R["unregister"] = [acl.rt.exception_info_callback_unregister(registered_cb),
                       acl.rt.exception_info_callback_unregister(registered_cb),
                       acl.rt.set_exception_info_callback(None),
                       acl.rt.exception_info_callback_register(recorder(late))]
    ok(acl.rt.set_device(0))
    ok(acl.rt.launch_kernel(K0["boom_core"], 1, [], s0))
    R["sync_late"] = acl.rt.synchronize_stream(s0)
    R["late_delivered"] = wait_for(lambda: len(late) >= 1)
    time.sleep(0.05)
    R["late"] = late
    R["counts"] = [len(legacy), len(registered)]


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    CTX, _ret = acl.rt.get_context()
    ok(_ret, "get_context")
    main()
