"""pyACL kernels and async copies against real device workers: the ready kernel library,
loading binaries, launch errors, kernel failures (engine codes, last error), async copies
with pinned and pageable host memory, and the device utilization rate.

Each test runs one scenario of a pyACL program (``tests/progs/kernels.py``, one function per
scenario) in a fresh interpreter; the child records what it saw in a dict ``R`` printed as
JSON and the assertions are made here.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

INVALID_PARAM = 100000
RT_PARAM_INVALID = 107000
STREAM_CONTEXT = 107003
FEATURE_NOT_SUPPORT = 207000
AICORE_EXCEPTION = 507015
AICPU_EXCEPTION = 507018
VECTOR_CORE_EXCEPTION = 507035
DEVICE_MEM_ERROR = 507053

PROG = "kernels.py"
PROGS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "progs")


def scenario(run_prog, name: str, *args: str, env: dict[str, str] | None = None,
             timeout: float = 30) -> dict:
    """Run the scenario ``name`` of the program with ``args`` in a child with ENV (+ ``env``);
    returns its ``R``."""
    return run_program(run_prog, PROG, name, *args, env={**ENV, **(env or {})},
                       timeout=timeout)


# ------------------------------------------------------------------------------ library
LIBRARY_KERNELS = ("add", "mul", "relu", "fill", "cast", "softmax", "reduce_sum", "matmul")
BLOCKS = (1, 3, 16)


def test_library_kernels_match_numpy_for_several_block_counts(run_prog):
    r = scenario(run_prog, "library", json.dumps(LIBRARY_KERNELS), json.dumps(BLOCKS))
    for nb in BLOCKS:
        got = r[str(nb)]
        assert got.pop("rets") == [0] * 9, (nb, got)
        assert got.pop("sync") == 0, (nb, got)
        assert got == {name: True for name in got}, (nb, got)
        assert set(got) >= {*LIBRARY_KERNELS, "add_int32"}


# ---------------------------------------------------------------------------- binaries

def test_binary_load_lookup_and_launch_errors(run_prog, tmp_path):
    path = tmp_path / "my_kernels.py"
    shutil.copy(os.path.join(PROGS, "kernels_scale.py"), path)
    r = scenario(run_prog, "binary_errors", str(path))
    assert r["load"] == 0 and r["get"] == 0 and r["launch"] == 0 and r["sync"] == 0
    assert r["scaled"]
    assert r["missing_fn"] == [0, RT_PARAM_INVALID]
    assert r["not_a_kernel"] == RT_PARAM_INVALID
    assert r["zero_blocks"] == INVALID_PARAM
    assert r["negative_blocks"] == INVALID_PARAM
    assert r["bad_arg"] == INVALID_PARAM
    assert r["broken_source"] == [0, RT_PARAM_INVALID]
    assert r["raising_source"] == RT_PARAM_INVALID
    assert r["missing_file"] != 0
    assert r["bad_stream"] == RT_PARAM_INVALID
    assert r["other_device"] == STREAM_CONTEXT
    assert r["foreign_stream"] == STREAM_CONTEXT
    assert r["unload"] == 0
    assert r["after_unload"] == [RT_PARAM_INVALID] * 3
    assert r["stream_ok"] == 0
    assert r["reload"] == [0, 0, 0, True]


def test_binary_unload_keeps_already_queued_launches(run_prog):
    r = scenario(run_prog, "unload_queued")
    assert r["unload"] == 0
    assert r["sync"] == 0
    assert r["data"] == [3.0] * 16


# ---------------------------------------------------------------------------- failures

def test_kernel_failures_report_engine_codes_once_and_the_worker_survives(run_prog):
    r = scenario(run_prog, "failures")
    codes = [AICORE_EXCEPTION, VECTOR_CORE_EXCEPTION, AICPU_EXCEPTION, DEVICE_MEM_ERROR,
             DEVICE_MEM_ERROR, DEVICE_MEM_ERROR, 0]
    assert r["runs"] == [[0, code, 0] for code in codes]
    assert r["touched"]
    assert r["fail"] == AICORE_EXCEPTION
    assert r["last"] == [AICORE_EXCEPTION, AICORE_EXCEPTION, AICORE_EXCEPTION, 0, 0]
    assert r["other_thread"] == [0]
    assert r["other_stream"] == 0
    assert r["alive"] == [True, 0, [0, 0]]


# --------------------------------------------------------------------------- async copies
def test_async_copies_with_pinned_and_pageable_host_memory(run_prog):
    r = scenario(run_prog, "async_copies")
    for n in ("100", str((1 << 20) + 100)):
        got = r[n]
        assert got["rets"] == [0] * 10, (n, got)
        assert got == {**got, "before": True, "pinned": True, "pageable": True,
                       "released": True, "mixed": True}, (n, got)
    assert r["errors"] == [FEATURE_NOT_SUPPORT, RT_PARAM_INVALID, INVALID_PARAM,
                           RT_PARAM_INVALID, 0]
    assert r["after_errors"] == 0


# ---------------------------------------------------------------------------- utilization

def test_device_utilization_rate_after_a_long_vector_kernel(run_prog):
    r = scenario(run_prog, "utilization")
    keys = {"cube_utilization", "vector_utilization", "aicpu_utilization"}
    for rates, ret in [r["first"], *r["polls"]]:  # pyACL's keys; memory reserved (-1)
        assert ret == 0
        assert set(rates) == keys | {"memory_utilization", "utilization_extend"}, rates
        assert all(type(rates[k]) is int and 0 <= rates[k] <= 100 for k in keys), rates
        assert rates["memory_utilization"] == -1 and rates["utilization_extend"] == 0, rates
    assert r["polls"][-1][0]["vector_utilization"] > 0, r["polls"]
    assert r["bad_device"] != 0


def test_overflow_and_nan_are_silent_as_on_a_card(run_prog):
    """A kernel that overflows to inf or makes NaN says nothing: numpy's floating-point
    warnings in the worker would land on the user's terminal."""
    proc = run_prog("overflow_silent.py", env={**ENV, "NPUEMU_DEVICES": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[inf, inf, 2.0]"
    assert "Warning" not in proc.stderr, proc.stderr
