"""pyACL host callbacks and exception callbacks against real device workers.

Each test runs one pyACL program in a fresh interpreter (``run_py``); the child records what it
saw in a dict ``R`` printed as JSON and the assertions are made here. Callbacks that read device
memory set the program's context on their thread first (``set_context``), as a pyACL program
must. Like every program of this suite, the child serializes ``DeviceLink.alive`` (a test-side
workaround for the product bug shown by
test_streams.py::test_concurrent_pyacl_calls_from_several_threads).
"""

from __future__ import annotations

import pytest
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

INVALID_PARAM = 100000
REPEAT_SUBSCRIBE = 100033
RT_PARAM_INVALID = 107000
THREAD_SUBSCRIBE = 107012
STREAM_NO_CB_REG = 107015
REPORT_TIMEOUT = 507012
AICORE_EXCEPTION = 507015
AICPU_EXCEPTION = 507018
STREAM_SYNC_TIMEOUT = 507046
INVALID_INFO = 0xFFFFFFFF
LIVENESS_S = 5.0

PRELUDE = CHILD_HELPERS + """
def wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.005)
    return predicate()

FAILING = '''
from npuemu.shared.kernel import kernel

@kernel("aicore")
def boom_core(ctx):
    raise RuntimeError("aicore fails on purpose")

@kernel("aicpu")
def boom_cpu(ctx):
    raise RuntimeError("aicpu fails on purpose")
'''

def failing():
    b, ret = acl.rt.binary_load_from_data(FAILING)
    ok(ret, "binary_load_from_data")
    out = {}
    for name in ("boom_core", "boom_cpu"):
        out[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, name)
    return out

ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
CTX, ret = acl.rt.get_context()
ok(ret, "get_context")
"""

def scenario(run_py, body: str, env: dict[str, str] | None = None, timeout: float = 30) -> dict:
    """Run ``body`` after PRELUDE in a child with ENV (+ ``env``); returns its ``R``."""
    return run_scenario(run_py, PRELUDE, body, {**ENV, **(env or {})}, timeout)


# ---------------------------------------------------------------- aclrtLaunchCallback
def test_launch_callback_served_by_a_subscribed_thread(run_py):
    r = scenario(run_py, """
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
    """)
    assert r["subscribe"] == [0, 0]
    assert r["resubscribe"] == [REPEAT_SUBSCRIBE, REPEAT_SUBSCRIBE]
    assert r["order_done"] and r["sync"] == [0, 0]
    # stream order within s; the callback of s3 may come anywhere in between
    assert [c for c in r["calls"] if c != ["s3"]] == [[i, f"arg{i}"] for i in range(6)]
    assert r["calls"].count(["s3"]) == 1
    assert r["block"] == [0, [0], 0x5A]
    assert r["held"] == [STREAM_SYNC_TIMEOUT, [1, 0]]
    assert 0.19 <= r["held_s"] < LIVENESS_S
    assert r["released"] == 0
    assert r["no_block"] == [0, False, 0x21]
    assert r["bad_block_type"] == INVALID_PARAM
    assert r["unsubscribe"] == [0, STREAM_NO_CB_REG, True, 0]
    assert r["stop_thread"] == 0
    assert r["unexpected"] == []


# ---------------------------------------------------------------- aclrtLaunchHostFunc
def test_launch_host_func_runs_in_stream_order(run_py):
    r = scenario(run_py, """
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
    """)
    assert r["all_ran"] and r["sync"] == 0
    assert r["seen"] == [[i, i + 1] for i in range(6)]
    assert r["final"] == 0x70
    assert r["not_callable"] != 0
    assert r["foreign_stream"] == 107003  # ACL_ERROR_RT_STREAM_CONTEXT


def test_a_blocking_host_func_does_not_stall_other_streams_host_funcs(run_py):
    r = scenario(run_py, """
        B, C = stream(), stream()
        gate = hold(B)
        ran = []
        ok(acl.rt.launch_host_func(C, lambda _: ran.append("C"), None))
        R["c"] = [acl.rt.synchronize_stream_with_timeout(C, 2000), list(ran)]
        gate.set()
        ok(acl.rt.synchronize_stream(B))
        ok(acl.rt.synchronize_stream(C))
    """)
    assert r["c"] == [0, ["C"]]


# ---------------------------------------------------------------- exception callbacks
def test_exception_callbacks_get_task_stream_device_and_code(run_py):
    r = scenario(run_py, """
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
    """)
    assert r["set"] == 0 and r["register"] == 0
    assert r["register_none"] == RT_PARAM_INVALID
    assert r["sync0"] == AICORE_EXCEPTION and r["sync1"] == AICPU_EXCEPTION
    assert r["delivered"], r
    sid0, sid1 = r["sids"]
    for box in (r["legacy"], r["registered"]):
        by_device = {e["device"]: e for e in box}
        assert sorted(by_device) == [0, 1], box
        assert len(box) == 2, box
        assert (by_device[0]["stream"], by_device[0]["code"]) == (sid0, AICORE_EXCEPTION)
        assert (by_device[1]["stream"], by_device[1]["code"]) == (sid1, AICPU_EXCEPTION)
        for e in box:
            assert e["task"] != INVALID_INFO and e["thread"] != INVALID_INFO, e
    assert r["stale"] == [INVALID_INFO, INVALID_INFO]
    assert r["unregister"] == [0, RT_PARAM_INVALID, 0, 0]
    assert r["sync_late"] == AICORE_EXCEPTION and r["late_delivered"]
    assert [(e["device"], e["stream"], e["code"]) for e in r["late"]] == [
        (0, sid0, AICORE_EXCEPTION)]
    first = next(e for e in r["legacy"] if e["device"] == 0)
    assert r["late"][0]["task"] > first["task"], "task ids of one stream must grow"
    assert r["counts"] == [2, 2], "a cleared or unregistered callback was still called"
