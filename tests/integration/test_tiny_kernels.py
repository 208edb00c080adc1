"""Tiny kernels run inline in the worker's scheduler (``device/scheduler.py``, "Tiny
kernels"): a launch repeating one measured as tiny skips the engine thread. These tests pin
what must not change with that shortcut: stream order and cross-stream events, a failure of
an inline kernel (engine code at synchronize, the exception callback, the stream goes on),
and a kernel that turns slow going back to its engine, where the execution timeout applies.

Each test runs one pyACL program in a fresh interpreter (``run_py``); assertions are here.
"""

from __future__ import annotations

import pytest
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
AICORE_EXCEPTION = 507015
AICPU_TIMEOUT = 507017

KERNELS = '''
import time
from npuemu.shared.kernel import kernel

@kernel("aicore")
def bump(ctx, ptr):
    a = ctx.tensor(ptr, "int64", 2)
    if a[1]:
        raise RuntimeError("flag set: fail on purpose")
    a[0] += 1

@kernel("aicpu")
def nap(ctx, ptr):
    seconds = float(ctx.tensor(ptr, "float64", 1)[0])
    if seconds:
        time.sleep(seconds)
'''

PRELUDE = CHILD_HELPERS + f"""
ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
b, ret = acl.rt.binary_load_from_data({KERNELS!r})
ok(ret, "load")
F = {{}}
for name in ("bump", "nap"):
    F[name], ret = acl.rt.binary_get_function(b, name)
    ok(ret, name)

def put(p, values, dtype):
    data = np.asarray(values, dtype).tobytes()
    h2d(p, data)

def get(p, dtype, n):
    return np.frombuffer(d2h(p, n * np.dtype(dtype).itemsize), dtype, n).tolist()
"""


def scenario(run_py, body: str, timeout: float = 60) -> dict:
    return run_scenario(run_py, PRELUDE, body, ENV, timeout)


def test_repeated_tiny_launches_keep_stream_order_and_events(run_py) -> None:
    r = scenario(run_py, """
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
    """)
    assert r["sync"] == [0, 0]
    assert r["p"] == [400, 0]
    assert r["q"] == [300, 0]
    assert r["sync2"] == 0 and r["q2"] == [306, 0]


def test_inline_kernel_failure_reaches_sync_and_the_exception_callback(run_py) -> None:
    r = scenario(run_py, """
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
    """)
    assert r["fail"] == AICORE_EXCEPTION
    assert r["again"] == 0
    assert [code for code, _sid in r["seen"]] == [AICORE_EXCEPTION]
    assert r["after"] == 0 and r["p"] == [60, 0]


def test_a_tiny_kernel_that_turns_slow_goes_back_to_its_engine_and_times_out(run_py) -> None:
    r = scenario(run_py, """
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
    """)
    assert r["slow"] == 0
    assert r["timeout"] == AICPU_TIMEOUT
    assert r["after"] == 0
