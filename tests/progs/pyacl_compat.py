"""Child program of ``tests/integration/test_pyacl_compat.py``: pyACL behaviour that real
programs written for hardware rely on (thread ids and report subscriptions, memcpy
directions, calls without parameters, data buffers, app logs, type sizes, persistent
streams, bad arguments, peer access across a reset, callback tables under concurrency).

``python pyacl_compat.py SCENARIO`` initializes pyACL, sets device 0, runs one scenario and
prints ``R`` (see ``childlib``); the assertions are the test's. The scenarios that start
before ``aclInit`` are ``pyacl_lifecycle.py``'s.
"""

import threading
import time

from childlib import R, acl, d2h, ints, main, malloc, ok, scenario, stream


@scenario
def thread_ids():
    s = stream()
    got = []
    done = threading.Event()

    def serve():  # start_thread(fn, None) calls fn(), as pyACL's does
        acl.rt.set_context(ctx)
        while not done.is_set():
            if acl.rt.process_report(200) == 107012:  # not subscribed (yet, or any more)
                time.sleep(0.01)
    ctx, ret = acl.rt.get_context()
    tid, ret = acl.util.start_thread(serve, None)
    R["start"] = ret
    R["tid_is_ident"] = any(t.ident == tid for t in threading.enumerate())
    R["subscribe"] = acl.rt.subscribe_report(tid, s)
    R["subscribe_again"] = acl.rt.subscribe_report(tid, s)
    R["bogus_tid"] = acl.rt.subscribe_report(12345, stream())
    R["none_tid"] = acl.rt.subscribe_report(None, s)
    ok(acl.rt.launch_callback(lambda a: got.append((a, threading.get_ident())), 7, 1, s))
    ok(acl.rt.synchronize_stream(s), "sync")
    R["got"] = [got[0][0], got[0][1] == tid] if got else []
    # a thread blocked in process_report(-1) wakes when its only stream is destroyed
    s2 = stream()
    out = {}
    subscribed = threading.Event()

    def wait_forever():
        subscribed.wait(10)
        out["ret"] = acl.rt.process_report(-1)
    waiter = threading.Thread(target=wait_forever, daemon=True)
    waiter.start()
    ok(acl.rt.subscribe_report(waiter.ident, s2), "subscribe waiter")
    subscribed.set()
    time.sleep(0.2)  # let it block in process_report (the test holds either way)
    ok(acl.rt.destroy_stream(s2), "destroy s2")
    waiter.join(10)
    R["waiter_alive"] = waiter.is_alive()
    R["waiter_ret"] = out.get("ret")
    done.set()
    ok(acl.rt.unsubscribe_report(tid, s), "unsubscribe")
    R["stop"] = acl.util.stop_thread(tid)


@scenario
def memcpy_direction():
    n = 4096
    d = malloc(n)
    src = bytes(range(256)) * 16
    # kind says D2H, the addresses say H2D: the copy follows the addresses
    R["wrong_kind"] = acl.rt.memcpy(d, n, acl.util.bytes_to_ptr(src), n, 2)
    R["back"] = d2h(d, n) == src
    R["kind_list"] = acl.rt.memcpy(d, n, acl.util.bytes_to_ptr(src), n, [1])
    R["kind_99"] = acl.rt.memcpy(d, n, acl.util.bytes_to_ptr(src), n, 99)
    hp, ret = acl.rt.malloc_host(n)
    ok(ret, "malloc_host")
    s = stream()
    R["memset_pinned"] = acl.rt.memset_async(hp, n, 0x5A, n, s)
    ok(acl.rt.synchronize_stream(s), "sync")
    R["pinned_bytes"] = acl.util.ptr_to_bytes(hp, n) == b"\x5a" * n
    heap = bytearray(n)
    R["memset_pageable"] = acl.rt.memset_async(acl.util.bytes_to_ptr(heap), n, 1, n, s)
    ok(acl.rt.free_host(hp), "free_host")


@scenario
def no_parameters():
    R["soc"] = acl.get_soc_name("x", 1) == acl.get_soc_name()
    R["version"] = list(acl.get_version(None))
    R["run_mode"] = [type(v).__name__ for v in acl.rt.get_run_mode(0)]
    R["run_mode_value"] = acl.rt.get_run_mode()[0]
    R["rt_soc"] = acl.rt.get_soc_name(1) == acl.get_soc_name()
    R["device"] = list(acl.rt.get_device("ignored"))
    R["status_type"] = type(acl.rt.query_device_status(0)[0]).__name__
    d = malloc(64)
    buf = acl.create_data_buffer(d, 64)
    R["addr"] = acl.get_data_buffer_addr(buf) == d
    R["size"] = [acl.get_data_buffer_size(buf), acl.get_data_buffer_size_v2(buf)]
    R["update"] = acl.update_data_buffer(buf, d + 32, 32)
    R["after"] = [acl.get_data_buffer_addr(buf) - d, acl.get_data_buffer_size_v2(buf)]
    R["empty"] = acl.get_data_buffer_size_v2(acl.create_data_buffer(0, 0))
    R["destroy"] = acl.destroy_data_buffer(buf)
    R["destroy_again"] = acl.destroy_data_buffer(buf)
    R["gone"] = [acl.get_data_buffer_addr(buf), acl.get_data_buffer_size(buf)]
    R["sizes"] = [acl.data_type_size(t) for t in (0, 1, 2, 3, 9, 11, 12, 13, 27, -1, 999)]
    acl.app_log(3, "app says hello")
    acl.app_log(0, "debug is filtered at the default level")
    R["bad_level"] = acl.app_log(42, "ignored")


@scenario
def persistent_stream():
    persistent = 0x4
    s, ret = acl.rt.create_stream_with_config(0, persistent)
    ok(ret, "create persistent")
    sid = acl.rt.stream_get_id(s)[0]
    d = malloc(4096)
    ok(acl.rt.memset_async(d, 4096, 1, 4096, s), "memset_async")
    ok(acl.rt.synchronize_stream(s), "sync persistent")
    ok(acl.rt.destroy_stream(s), "destroy persistent")
    s2 = stream()
    R["reused_id"] = acl.rt.stream_get_id(s2)[0] == sid
    ok(acl.rt.memset_async(d, 4096, 7, 4096, s2), "memset_async on reused")
    R["sync"] = acl.rt.synchronize_stream(s2)
    R["bytes"] = d2h(d, 4096) == b"\x07" * 4096
    R["query"] = ints(acl.rt.stream_query(s2))
    ok(acl.rt.destroy_stream(s2), "destroy reused")
    s3 = stream()  # a plain stream is destroyed for real: the next gets a new id
    ok(acl.rt.destroy_stream(s3), "destroy plain")
    s4 = stream()
    R["fresh_id"] = acl.rt.stream_get_id(s4)[0] not in (sid, acl.rt.stream_get_id(s3)[0])


@scenario
def bad_arguments():
    R["free_host_str"] = acl.rt.free_host("abc")
    R["malloc_host_huge"] = ints(acl.rt.malloc_host(2**63))
    R["attrs_none"] = acl.rt.pointer_get_attributes(None)[-1]
    bad = []
    for ptr, size in ((1, 16), (0x10, 1), (2**47 - 4096, 16), (0xdead0000, 8)):
        try:
            acl.util.ptr_to_bytes(ptr, size)
        except ValueError:
            bad.append("ValueError")
    R["ptr_to_bytes"] = bad
    R["empty_ok"] = acl.util.ptr_to_bytes(acl.util.bytes_to_ptr(b"ab"), 0) == b""
    R["still_alive"] = ints(acl.rt.get_mem_info(1))[-1]


@scenario
def peer_access_reset():
    ok(acl.rt.device_enable_peer_access(1, 0), "enable")
    R["before"] = ints(acl.rt.device_peer_access_status(0, 1))
    ok(acl.rt.reset_device(0), "reset")
    ok(acl.rt.set_device(0), "set again")
    R["after"] = ints(acl.rt.device_peer_access_status(0, 1))
    R["enable_again"] = acl.rt.device_enable_peer_access(1, 0)


@scenario
def callback_tables():
    """Four threads subscribe, launch, serve, unsubscribe and destroy while a fifth
    registers and unregisters exception callbacks."""
    ctx, _ret = acl.rt.get_context()
    codes, served = [], []
    lock = threading.Lock()

    def note(ret):
        if ret:
            with lock:
                codes.append(ret)

    def worker(k):
        acl.rt.set_context(ctx)
        me = threading.get_ident()
        for i in range(25):
            s = stream()
            note(acl.rt.subscribe_report(me, s))
            note(acl.rt.launch_callback(lambda a: served.append(a), (k, i), 1, s))
            note(acl.rt.process_report(10000))
            note(acl.rt.synchronize_stream_with_timeout(s, 10000))
            if i % 2:
                note(acl.rt.unsubscribe_report(me, s))
            note(acl.rt.destroy_stream(s))

    def churn():
        def fn(info):
            return None
        for _ in range(200):
            note(acl.rt.exception_info_callback_register(fn))
            note(acl.rt.exception_info_callback_unregister(fn))
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    threads.append(threading.Thread(target=churn))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    R["hung"] = sum(t.is_alive() for t in threads)
    R["codes"] = sorted(set(codes))
    R["served"] = len(served)
    reporters = [t for t in threading.enumerate() if t.name.startswith("npuemu-reports")]
    R["reporter_alive"] = bool(reporters) and all(t.is_alive() for t in reporters)


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    main()
