"""Stream capture and replay (``aclmdlRI*``) and models built by hand, against real device
workers: a replay equals the same tasks run eagerly (kernels, operators, copies, memsets,
two streams ordered by events), replay after replay with new input data; the calls a capture
forbids return CANN's codes; a failing step fails the replay with its code; abort
cancels a running replay; PERSISTENT streams keep their tasks for a model;
HOST_TO_BUF_TO_DEVICE stages its source at the call.

Each test runs one scenario of ``tests/progs/capture.py`` in a fresh interpreter and asserts
on the ``R`` it prints.
"""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "512M", "NPUEMU_DDR": "128M"}
PROG = "capture.py"

RT_PARAM_INVALID = 107000
STREAM_MODEL = 107005
CAPTURE_DEPENDENCY = 107024
STREAM_UNJOINED = 107025
STREAM_CAPTURED = 107027
EVENT_CAPTURED = 107028
STREAM_NOT_CAPTURED = 107029
CAPTURE_MODE_NOT_SUPPORT = 107030
CAPTURE_UNMATCHED = 107036
CAPTURE_WRONG_THREAD = 107038
CAPTURE_MODE_BLOCK_ASYNC = 107041
FEATURE_NOT_SUPPORT = 207000
AICORE_TIMEOUT = 507014
AICORE_EXCEPTION = 507015
CAPTURE_INVALIDATED = 507903
TASK_ABORT_STOP = 107035
ACTIVE, INVALIDATED, NONE = 1, 2, 0


def scenario(run_prog, name: str) -> dict:
    return run_program(run_prog, PROG, name, env=ENV, timeout=90)


def test_a_replay_equals_the_eager_chain_with_new_inputs_each_time(run_prog):
    r = scenario(run_prog, "one_stream")
    assert r["info"] == [ACTIVE, 0] and r["info_after"] == [NONE, 0, 0]
    assert r["untouched"] == [1.0, 1.0]  # capturing ran nothing
    assert r["sync"] == [0, 0, 0] and r["equal"] == [True, True, True]
    # third replay, element i: x = 3i; x = 2x + 1; y = i + 2 (pinned); y = x + y; y += 0.5
    assert r["value"] == [3.5, 10.5]
    assert r["destroy"] == 0


def test_a_captured_operator_replays_on_the_inputs_of_the_replay(run_prog):
    r = scenario(run_prog, "op_capture")
    assert r["sync"] == 0
    assert r["c"] == [11.0] * 3 and r["a"] == [12.0] * 3  # 10 + 1, then (10 + 1) + 1


def test_a_capture_across_two_streams_replays_in_the_order_of_its_events(run_prog):
    r = scenario(run_prog, "two_streams")
    assert r["joined"] == [ACTIVE, 0]
    assert r["query_captured_event"] == EVENT_CAPTURED
    assert r["end_on_joined"] == CAPTURE_UNMATCHED
    assert r["after"] == [NONE, NONE] and r["streams"] == 2
    assert r["json"] == [["KERNEL", "EVENT_RECORD", "EVENT_WAIT", "KERNEL"],
                         ["EVENT_WAIT", "KERNEL", "MEMCPY", "KERNEL", "EVENT_RECORD"]]
    assert r["json_bad_flag"] == RT_PARAM_INVALID
    assert r["sync"] == 0
    assert r["y"] == [3.0, 5.0, 7.0]   # 2x + 3, after the origin's x = 2x
    assert r["x"] == [3.0, 7.0, 11.0]  # 2x + (2x + 3): after the joined stream's work
    assert r["e2_status"] == [1, 0]    # recorded again by the replay: complete


def test_what_a_capture_forbids_returns_the_reference_codes(run_prog):
    r = scenario(run_prog, "forbidden")
    assert r["begin_again"] == STREAM_CAPTURED
    assert r["sync"] == r["query"] == r["destroy"] == STREAM_CAPTURED
    assert r["event_sync"] == r["event_query"] == EVENT_CAPTURED
    assert r["memcpy"] == r["memset"] == CAPTURE_MODE_NOT_SUPPORT
    assert r["pageable_async"] == RT_PARAM_INVALID
    assert r["pageable_other"] == CAPTURE_MODE_BLOCK_ASYNC
    assert r["exchange"] == [0, 0] and r["memcpy_relaxed"] == 0
    assert r["status"] == ACTIVE  # none of these invalidated the capture
    assert r["end_other_thread"] == CAPTURE_WRONG_THREAD
    assert r["end_after"] == r["not_capturing"] == STREAM_NOT_CAPTURED
    assert r["bad_mode"] == RT_PARAM_INVALID


def test_capture_modes_forbid_the_threads_the_reference_names(run_prog):
    r = scenario(run_prog, "thread_modes")
    # [calling thread, another thread], each in the default GLOBAL exchange mode
    assert r["global"] == [CAPTURE_MODE_NOT_SUPPORT, CAPTURE_MODE_NOT_SUPPORT]
    assert r["thread_local"] == [CAPTURE_MODE_NOT_SUPPORT, 0]
    assert r["relaxed"] == [0, 0]


def test_an_outside_dependency_or_an_unjoined_stream_invalidates_the_capture(run_prog):
    r = scenario(run_prog, "invalidated")
    assert r["wait_outside"] == CAPTURE_DEPENDENCY and r["status"] == INVALIDATED
    assert r["later_task"] == CAPTURE_INVALIDATED
    assert r["end"] == [0, CAPTURE_INVALIDATED] and r["after"] == NONE
    assert r["stream_ok"] == 0
    assert r["unjoined"] == STREAM_UNJOINED and r["s2_free"] == 0
    assert r["memcpy_after_reset"] == 0  # a reset dropped the capture under way


def test_captured_host_callbacks_run_at_each_replay_in_order_with_the_steps(run_prog):
    r = scenario(run_prog, "captured_callbacks")
    assert [r["block"], r["host_func"], r["no_block"]] == [0, 0, 0]
    assert r["at_capture"] == []
    assert r["types"] == ["KERNEL", "HOST_CALLBACK", "KERNEL", "HOST_CALLBACK", "HOST_CALLBACK"]
    assert r["replays"] == [0, 0]
    block = [item for item in r["seen"] if item[0] == "block"]
    assert block == [["block", 1.0, True], ["block", 12.0, True]]  # x: 0 -> 1 -> 11 -> 12
    order = [item[0] for item in r["seen"]]
    assert order == ["block", "host", "no_block"] * 2
    assert r["x"] == 22.0 and r["destroy"] == 0


def test_an_event_recorded_in_a_capture_completes_at_its_place_in_the_replay(run_prog):
    r = scenario(run_prog, "events_in_place")
    not_ready = 1  # ACL_STREAM_STATUS_NOT_READY
    assert r["rounds"] == [[[0, 0], not_ready, 1.0, 0, 11.0], [[0, 0], not_ready, 12.0, 0, 22.0]]
    assert r["failed"][0] == r["failed"][1] == AICORE_EXCEPTION
    assert r["destroy"] == 0


def test_aborting_an_instance_stops_its_replays_and_it_replays_again(run_prog):
    r = scenario(run_prog, "abort_instance")
    assert r["while_capturing"] == RT_PARAM_INVALID and r["abort"] == 0
    assert r["stopped"][0] in (TASK_ABORT_STOP, RT_PARAM_INVALID)  # running one, queued one
    assert r["stopped"][1:] == [True, 0.0]  # its event did not hang; the kernel never ran
    assert r["again"] == [0, 0, 1.0] and r["destroy"] == 0


def test_a_failing_step_fails_the_replay_and_abort_or_timeout_cancel_one(run_prog):
    r = scenario(run_prog, "failing_step")
    assert r["sync"] == r["again"] == AICORE_EXCEPTION
    assert r["x"] == [1.0, 1.0]  # the step after the failing one did not run
    assert r["eager_after"] == 0 and r["x_after"] == [7.0]
    assert r["abort"] == 0 and r["after_abort"] == 0
    assert r["x_after_abort"] == [0.0]  # cancelled before its last step
    assert r["timeout"] == AICORE_TIMEOUT and r["x_after_timeout"] == [0.0]
    assert r["destroy_long"] == 0


def test_persistent_streams_keep_their_tasks_for_a_model_built_by_hand(run_prog):
    r = scenario(run_prog, "persistent")
    # PERSISTENT, CPU_SCHEDULE, DEVICE_USE_ONLY: synchronize 0, COMPLETE, and the kernel
    # queued behind the 300 ms one never ran (x still 0)
    assert r["kept"] == [[0, [0, 0], 0.0]] * 3
    assert r["bind_plain"] == RT_PARAM_INVALID and r["bind_again"] == STREAM_MODEL
    assert r["build_end_early"] == RT_PARAM_INVALID
    assert r["not_run_yet"] == 0.0
    assert r["execute"] == [0, 3.0, 0, 12.0]  # (0 + 1) * 3, then (3 + 1) * 3
    assert r["execute_zero"] == RT_PARAM_INVALID
    assert r["unbind_again"] == STREAM_MODEL


def test_host_to_buf_to_device_stages_the_source_at_the_call(run_prog):
    r = scenario(run_prog, "buf_to_device")
    assert r["buf"] == 1  # the source as it was at the call
    assert r["h2d"] == 2  # pinned H2D reads the source when the copy runs


def test_the_pythonic_graph_records_in_its_with_block_and_replays(run_prog):
    r = scenario(run_prog, "pythonic")
    assert r["not_run"] and r["tasks"] == ["MEMCPY"]
    assert r["replayed"] == [7, 9]
    assert r["propagated"] and r["capturing_after"] == NONE
