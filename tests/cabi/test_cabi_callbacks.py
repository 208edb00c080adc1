"""Callbacks from C: a C report thread serving aclrtLaunchCallback, aclrtLaunchHostFunc on the
runtime's thread, and the exception callback of a failing kernel with its getters."""

from __future__ import annotations

import pytest

from tests.cabi.conftest import PROGS

pytestmark = pytest.mark.integration


def test_callback_program_with_a_c_report_thread(compile_c, run_c):
    res = run_c(compile_c("callback.c"), str(PROGS / "boom_kernels.py"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "callbacks served on the subscribed C thread" in res.stdout
    assert "exception info: code 507015 device 0" in res.stdout
    assert "callback program done" in res.stdout
