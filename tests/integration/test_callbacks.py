"""pyACL host callbacks and exception callbacks against real device workers.

Each test runs one scenario of a pyACL program (``tests/progs/callbacks.py``) in a fresh
interpreter; the child records what it saw in a dict ``R`` printed as JSON and the
assertions are made here. Callbacks that read device memory set the program's context on
their thread first (``set_context``), as a pyACL program must.
"""

from __future__ import annotations

import pytest
from childprog import run_program

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

PROG = "callbacks.py"


def scenario(run_prog, name: str, env: dict[str, str] | None = None,
             timeout: float = 30) -> dict:
    """Run the scenario ``name`` of the program in a child with ENV (+ ``env``); returns its
    ``R``."""
    return run_program(run_prog, PROG, name, env={**ENV, **(env or {})}, timeout=timeout)


# ---------------------------------------------------------------- aclrtLaunchCallback
def test_launch_callback_served_by_a_subscribed_thread(run_prog):
    r = scenario(run_prog, "launch_callback")
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
def test_launch_host_func_runs_in_stream_order(run_prog):
    r = scenario(run_prog, "host_func_order")
    assert r["all_ran"] and r["sync"] == 0
    assert r["seen"] == [[i, i + 1] for i in range(6)]
    assert r["final"] == 0x70
    assert r["not_callable"] != 0
    assert r["foreign_stream"] == 107003  # ACL_ERROR_RT_STREAM_CONTEXT


def test_a_blocking_host_func_does_not_stall_other_streams_host_funcs(run_prog):
    r = scenario(run_prog, "blocking_host_func")
    assert r["c"] == [0, ["C"]]


# ---------------------------------------------------------------- exception callbacks
def test_exception_callbacks_get_task_stream_device_and_code(run_prog):
    r = scenario(run_prog, "exception_callbacks")
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
