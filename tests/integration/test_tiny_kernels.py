"""Tiny kernels run inline in the worker's scheduler (``device/scheduler.py``, "Tiny
kernels"): a launch repeating one measured as tiny skips the engine thread. These tests pin
what must not change with that shortcut: stream order and cross-stream events, a failure of
an inline kernel (engine code at synchronize, the exception callback, the stream goes on),
and a kernel that turns slow going back to its engine, where the execution timeout applies.

Each test runs one scenario of a pyACL program (``tests/progs/tiny_kernels.py``) in a fresh
interpreter; assertions are here.
"""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
AICORE_EXCEPTION = 507015
AICPU_TIMEOUT = 507017

PROG = "tiny_kernels.py"


def scenario(run_prog, name: str, timeout: float = 60) -> dict:
    """Run the scenario ``name`` of the program in a child with ENV; returns its ``R``."""
    return run_program(run_prog, PROG, name, env=ENV, timeout=timeout)


def test_repeated_tiny_launches_keep_stream_order_and_events(run_prog) -> None:
    r = scenario(run_prog, "order_and_events")
    assert r["sync"] == [0, 0]
    assert r["p"] == [400, 0]
    assert r["q"] == [300, 0]
    assert r["sync2"] == 0 and r["q2"] == [306, 0]


def test_inline_kernel_failure_reaches_sync_and_the_exception_callback(run_prog) -> None:
    r = scenario(run_prog, "inline_failure")
    assert r["fail"] == AICORE_EXCEPTION
    assert r["again"] == 0
    assert [code for code, _sid in r["seen"]] == [AICORE_EXCEPTION]
    assert r["after"] == 0 and r["p"] == [60, 0]


def test_a_tiny_kernel_that_turns_slow_goes_back_to_its_engine_and_times_out(run_prog) -> None:
    r = scenario(run_prog, "turns_slow")
    assert r["slow"] == 0
    assert r["timeout"] == AICPU_TIMEOUT
    assert r["after"] == 0


def test_a_kernel_launched_again_as_before_gets_the_cards_estimate_of_its_end(run_prog) -> None:
    r = scenario(run_prog, "estimated_end")
    assert r["estimated"] == [False, True, False]  # first run: none; other arguments: none
    assert 2 <= r["ahead_ms"][1] < 1000  # its start plus the first run's 2 ms


def test_a_repeated_op_kernel_sees_new_data_and_new_buffers(run_prog) -> None:
    r = scenario(run_prog, "op_on_changing_buffers")
    assert r["same"] == [True] * 20
    assert r["new_out"] == [True] * 5
    assert r["new_in"] == [True] * 5
