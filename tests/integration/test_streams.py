"""pyACL streams and events against real device workers: ordering, concurrency, event
dependencies and timing, timeouts and queries, failure modes, limits, destroy, cross-device.

Each test runs one scenario of a pyACL program (``tests/progs/streams.py``, one function per
scenario) in a fresh interpreter; the child records what it saw in a dict ``R`` printed as
JSON and the assertions are made here, so a failure shows every value at once. A stream is
"held" by a host function (``launch_host_func``) that blocks on a ``threading.Event`` until
the program releases it (with a 20 s safety release, so a broken product cannot hang the
child past its timeout). Timing checks are causal (a sleep inside a kernel, a timeout asked
for) or relative to host wall time measured around the same work; the only fixed bound is a
5 s liveness bound on calls that must return.
"""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

# error codes (shared/errors.py)
INVALID_PARAM = 100000
RT_PARAM_INVALID = 107000
STREAM_CONTEXT = 107003
TIMESTAMP_INVALID = 107006
TIMESTAMP_REVERSAL = 107007
NO_STREAM_RESOURCE = 207008
EVENT_NOT_COMPLETE = 507006
AICORE_EXCEPTION = 507015
STREAM_SYNC_TIMEOUT = 507046
EVENT_SYNC_TIMEOUT = 507047
# statuses
STREAM_COMPLETE, STREAM_NOT_READY = 0, 1
EVENT_COMPLETE, EVENT_NOT_READY = 0, 1  # query_event / query_event_wait_status
RECORDED_NOT_READY, RECORDED_COMPLETE = 0, 1  # query_event_status
LIVENESS_S = 5.0

PROG = "streams.py"


def scenario(run_prog, name: str, env: dict[str, str] | None = None,
             timeout: float = 30) -> dict:
    """Run the scenario ``name`` of the program in a child with ENV (+ ``env``); returns its
    ``R``."""
    return run_program(run_prog, PROG, name, env={**ENV, **(env or {})}, timeout=timeout)


# ------------------------------------------------------------------------------- ordering
def test_tasks_of_one_stream_run_in_submission_order(run_prog):
    r = scenario(run_prog, "order")
    assert r["sync"] == 0 and r["sync2"] == 0 and r["sync3"] == 0, r
    assert r["chain"], r["chain_head"]
    assert r["overlap"] == [0x44] * 8 + [0x33] * 2
    assert r["last"] == [200, 0]


# ---------------------------------------------------------------- concurrency and events
def test_a_blocked_stream_blocks_only_itself_and_event_dependencies(run_prog):
    r = scenario(run_prog, "blocked_stream")
    assert r["sync_c"] == 0 and r["sync_c_s"] < 5.0, r
    assert r["c_data"] == [True, True]
    assert r["while_held"] == {"a": [STREAM_NOT_READY, 0], "b": [STREAM_NOT_READY, 0],
                               "c": [STREAM_COMPLETE, 0], "e": [EVENT_NOT_READY, 0],
                               "pa": True}
    assert r["sync_a"] == 0 and r["pa_after"] and r["sync_b"] == 0
    assert r["sync_dep"] == 0 and r["sync_a2"] == 0
    assert r["y"], r["y_head"]


def test_event_timing_elapsed_time_and_timestamps(run_prog):
    r = scenario(run_prog, "event_timing")
    ms, ret = r["elapsed"]
    assert ret == 0
    assert 0 <= ms <= r["wall_ms"], r
    assert ms >= 50 * 0.95, r  # the kernel between the records slept 50 ms
    assert r["reversed"] == TIMESTAMP_REVERSAL
    ts = [t for t, ret in r["ts"]]
    assert [ret for t, ret in r["ts"]] == [0, 0, 0, 0]
    assert ts[0] <= ts[1] <= ts[2] <= ts[3], ts
    assert ts[2] - ts[0] >= 20_000 * 0.95, ts  # two 10 ms naps, in microseconds
    ms23, ret = r["ms23"]
    assert ret == 0 and abs((ts[2] - ts[1]) / 1000 - ms23) < 0.01, (ts, ms23)
    assert r["no_timeline"] == [TIMESTAMP_INVALID] * 3
    assert r["timeline_flag"] == 0
    assert r["unrecorded"] == [RT_PARAM_INVALID] * 3
    assert r["pending"] == EVENT_NOT_COMPLETE


# ---------------------------------------------------------------------- timeouts, queries
def test_synchronize_timeouts_and_status_queries(run_prog):
    r = scenario(run_prog, "timeouts")
    assert r["held"] == {"stream": [STREAM_NOT_READY, 0], "event": [EVENT_NOT_READY, 0],
                         "status": [RECORDED_NOT_READY, 0], "wait": [EVENT_NOT_READY, 0],
                         "other": [STREAM_COMPLETE, 0]}
    assert r["stream_timeout"] == STREAM_SYNC_TIMEOUT
    assert 0.19 <= r["stream_timeout_s"] < LIVENESS_S, r
    assert r["event_timeout"] == EVENT_SYNC_TIMEOUT
    assert 0.19 <= r["event_timeout_s"] < LIVENESS_S, r
    assert r["device_timeout"] == STREAM_SYNC_TIMEOUT
    assert 0.19 <= r["device_timeout_s"] < LIVENESS_S, r
    assert r["bad_timeouts"] == [RT_PARAM_INVALID] * 4
    assert r["other_sync"] == 0
    assert r["sync_forever"] == 0
    assert r["done"] == {"stream": [STREAM_COMPLETE, 0], "event": [EVENT_COMPLETE, 0],
                         "status": [RECORDED_COMPLETE, 0], "wait": [EVENT_COMPLETE, 0]}
    assert r["event_sync"] == [0, 0]
    assert r["never"] == [[EVENT_COMPLETE, 0], 0]


def test_other_python_threads_run_while_the_main_thread_synchronizes(run_prog):
    r = scenario(run_prog, "threads_run")
    for name in ("stream", "event", "device"):
        assert r[name]["ret"] == 0, r
        assert r[name]["released"], r
        assert r[name]["count"] > 1000, r
        assert r[name]["s"] >= 0.2 * 0.95, r


def test_concurrent_pyacl_calls_from_several_threads(run_prog):
    r = scenario(run_prog, "concurrent_calls")
    assert r["errors"] == []


# ------------------------------------------------------------------------------ failures
def test_continue_and_stop_on_failure_modes(run_prog):
    r = scenario(run_prog, "failure_modes")
    assert r["modes"] == [0, 0, INVALID_PARAM]
    assert r["sync"] == [AICORE_EXCEPTION, AICORE_EXCEPTION]
    assert r["data"] == [True, True], "continue mode ran the memset, stop mode did not"
    assert r["waiter"] == AICORE_EXCEPTION
    assert r["waiter_again"] == 0
    assert r["recorder"] == AICORE_EXCEPTION
    assert r["event"] == AICORE_EXCEPTION
    assert r["alive"] == [True, [0, 0]]
    assert r["cont_later"] == [0, 9]


def test_event_recorded_after_a_failure_in_stop_mode_fails_the_waiter(run_prog):
    r = scenario(run_prog, "stop_mode_waiter")
    assert r["recorder"] == AICORE_EXCEPTION
    assert r["event"] == AICORE_EXCEPTION
    assert r["waiter"] == AICORE_EXCEPTION


def test_event_re_recorded_on_another_stream_completes(run_prog):
    r = scenario(run_prog, "re_recorded")
    assert r["before"] == [EVENT_COMPLETE, 0]
    assert r["after"] == [EVENT_COMPLETE, 0]
    assert r["sync"] == 0


# ------------------------------------------------------------------ limits and lifecycle
def test_stream_limit_counts_the_default_stream(run_prog):
    r = scenario(run_prog, "stream_limit", env={"NPUEMU_MAX_STREAMS": "4"})
    assert r["fifth"] == [0, NO_STREAM_RESOURCE]
    assert r["fifth_config"] == [0, NO_STREAM_RESOURCE]
    assert r["after_destroy"] == 0
    assert r["dev1"] == [0, 0, 0, NO_STREAM_RESOURCE]
    assert r["default_works"] == [0, 3]


def test_destroy_stream_waits_force_does_not_and_destroy_event_while_pending(run_prog):
    r = scenario(run_prog, "destroy")
    assert r["destroy"] == 0
    assert r["released_first"], "destroy_stream returned before the pending work ran"
    assert r["destroy_s"] >= 0.2 * 0.95, r
    assert r["data"]
    assert r["reuse"] == [RT_PARAM_INVALID] * 3
    assert r["force"] == 0
    assert r["force_before_release"] and r["force_s"] < LIVENESS_S, r
    assert r["destroy_event"] == 0
    assert r["destroyed_query"] == RT_PARAM_INVALID
    assert r["g_sync"] == 0
    assert r["fresh"] == [0, 0, 0]
    assert r["q_untouched"], "destroy_stream_force ran a task that was still queued"
    assert r["later"] == [0, 0x33]


# ---------------------------------------------------------------------------- devices
def test_cross_device_rules(run_prog):
    r = scenario(run_prog, "cross_device")
    assert r["record_foreign_event"] != 0
    assert r["wait_foreign_event"] != 0
    assert r["memcpy_foreign_stream"] == STREAM_CONTEXT
    assert r["memset_foreign_stream"] == STREAM_CONTEXT
    assert r["query_foreign_pending"] == [EVENT_NOT_READY, 0]
    assert r["sync_foreign_event"] == 0
    assert r["query_foreign_done"] == [EVENT_COMPLETE, 0]
    assert r["status_foreign_done"] == [RECORDED_COMPLETE, 0]
    assert r["own"] == [0, 0]


def test_synchronize_device_covers_every_stream_of_the_device(run_prog):
    r = scenario(run_prog, "sync_device")
    assert r["sync"] == 0 and r["sync_s"] < LIVENESS_S, r
    assert r["data"] == [True] * 4
    assert r["queries"] == [[STREAM_COMPLETE, 0]] * 4
    assert r["fail"] == [AICORE_EXCEPTION, 0, 0]
    assert r["dev1"] == 0


# ------------------------------------------------------------------------------- flags
def test_stream_flags_change_synchronize_as_documented(run_prog):
    r = scenario(run_prog, "flags")
    assert r["persistent_sync"] == 0 and r["persistent_fast"]
    assert r["persistent_query"] == [0, 0]  # COMPLETE: its tasks are kept for a model
    assert r["fast_sync"] == 0 and r["fast_data"]
