"""Model task lists registered on the card (``device/exec/model.py``) through real workers:
bad ``MODEL_LOAD`` / ``MODEL_UNLOAD`` / ``MODEL_EXECUTE`` frames are refused with 107000 and
the worker keeps serving; a failing op fails the one model task (its code at synchronize,
the exception callback with the model task's id, later ops not run); abort stops a model
that is running; unload with executes still queued (they fail, memory is freed after);
a client that exits without unloading leaves nothing on the card.

Raw frames use the host's link and streams directly, with kernels of a test binary
(``acl.rt.binary_load_from_data``), so what each model step does is under the test's
control. Each scenario of the child program ``tests/progs/model_tasks.py`` runs in a fresh
interpreter; assertions are here.
"""

from __future__ import annotations

import pytest
from childprog import run_program

from tests.integration.test_models_mdl import convert
from tests.unit.test_models_omfile import small_cnn

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M"}
PARAM_INVALID = 107000
AICORE_EXCEPTION = 507015

PROG = "model_tasks.py"


def scenario(run_prog, name: str, *args, timeout: float = 90,
             env: dict[str, str] | None = None) -> dict:
    """Run the scenario ``name`` of the program with ``args`` in a child with ``env`` (ENV
    unless given); returns its ``R``."""
    return run_program(run_prog, PROG, name, *args, env=ENV if env is None else env,
                       timeout=timeout)


def test_bad_model_frames_are_refused_and_the_worker_keeps_serving(run_prog) -> None:
    r = scenario(run_prog, "bad_frames")
    assert r["load"] == [PARAM_INVALID] * 12
    assert r["bad_frames"] >= 9  # the malformed ones (a missing kernel or model is not)
    assert r["counts"] == PARAM_INVALID and r["unknown"] == PARAM_INVALID
    assert r["good"] == 0 and r["value"] == [2, 0]  # both steps ran, the empty one skipped
    assert r["unload"] == 0 and r["again"] == PARAM_INVALID and r["ping"] == 1


def test_failing_op_fails_the_model_task_and_abort_stops_a_running_model(run_prog) -> None:
    r = scenario(run_prog, "fail_and_abort")
    assert r["fail"] == AICORE_EXCEPTION
    assert r["callback"] == [[AICORE_EXCEPTION, r["seq"]]]
    assert r["after_fail"] == [0, 0]
    assert r["started"] == 1 and r["abort"] == 0 and r["sync"] == 0
    assert r["after_abort"] == [0, 0]
    assert r["rerun"] == 0 and r["after_rerun"] == [1, 0] and r["codes"] == 1


def test_unload_with_executes_queued_fails_them_and_frees_after(run_prog, tmp_path) -> None:
    om = convert(small_cnn(), tmp_path, "cnn")
    r = scenario(run_prog, "unload_with_queued", om)
    assert r["loaded_blocks"] == [2, True] and r["waiting"] and r["still_allocated"]
    assert r["unload"] == [0] and r["sync"] == PARAM_INVALID
    assert r["codes"] == [PARAM_INVALID, PARAM_INVALID]
    assert r["output"] == [7, 7, 7]
    assert r["freed"] and r["after"] == 145003


def test_a_client_that_exits_without_unloading_leaves_nothing(shared_node, run_prog,
                                                               tmp_path) -> None:
    om = convert(small_cnn(), tmp_path, "cnn")
    name = shared_node(devices=1, hbm="256M", ddr="64M")
    env = {"NPUEMU_NODE": name}
    first = scenario(run_prog, "exit_loaded", om, timeout=60, env=env)
    second = scenario(run_prog, "after_exit", om, first["blocks0"], first["card_id"],
                      timeout=60, env=env)
    assert first["loaded"] >= first["blocks0"] + 2  # weights, workspace, op binaries
    # only the second client's own kernel binary is left on the card
    assert second["blocks"] == first["blocks0"] and second["unknown"] == PARAM_INVALID


def test_execution_timeout_and_reset_cancel_a_running_model(run_prog) -> None:
    r = scenario(run_prog, "timeout_and_reset", timeout=120)
    assert r["timeout"] == 507014 and r["callback"] and r["after_timeout"] == [0, 0]
    assert r["reset"] == 0 and r["fresh"] == 0 and r["value"] == [1, 0]


def test_the_streams_of_a_model_run_at_once_in_event_order(run_prog) -> None:
    """Stream 0 naps until stream 1 sets its flag (a model run one stream after the other
    would never finish); then an event orders a third step after both."""
    r = scenario(run_prog, "streams_in_event_order")
    assert r["sync"] == 0 and r["p"] == [1, 1] and r["marker"] == [1, 0]
