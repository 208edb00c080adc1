"""Kernels that end their card are contained (``device/containment.py``).

A kernel that raises ``SystemExit`` (``sys.exit``), ``KeyboardInterrupt`` or
``GeneratorExit`` on any engine, or runs inline in the worker's loop thread when it does,
fails its task with its engine's exception code (sticky once, exception callback, device
log line), and the engine runs the next kernel at once, also one from another process; a
kernel file that exits at import fails its load with 107000; model tasks (engine thread and
helper thread) and a collective behind such a kernel behave alike. The node's worker
ignores SIGINT and still stops on ``npuemu stop``; a worker run by hand still stops on
SIGINT (the one KeyboardInterrupt that is not contained).

The host programs are ``tests/progs/containment_host.py`` (one scenario per mode, result as
``RESULT <json>``) with the kernel files beside it; "promptly" is asserted through
synchronizes with a 10 s timeout, far below the 1091 s execution timeout a dead engine
thread would make every later kernel wait for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npuemu.shared import errors, layout, shm

pytestmark = pytest.mark.integration

PROGS = Path(__file__).resolve().parent.parent / "progs"
HOST = PROGS / "containment_host.py"
ENGINES = ("aicore", "aivector", "aicpu")
KINDS = ("exit", "interrupt", "generator")
CODE = {"aicore": errors.ACL_ERROR_RT_AICORE_EXCEPTION,          # 507015
        "aivector": errors.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,   # 507035
        "aicpu": errors.ACL_ERROR_RT_AICPU_EXCEPTION}            # 507018
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "64M", "NPUEMU_DDR": "16M"}


def host(run_py, mode: str, env: dict[str, str], timeout: float = 90) -> dict:
    """Run ``containment_host.py mode`` in a child; its result dict."""
    code = (f"import runpy, sys; sys.argv = [{str(HOST)!r}, {mode!r}]; "
            f"runpy.run_path({str(HOST)!r}, run_name='__main__')")
    res = run_py(code, env=env, timeout=timeout)
    assert res.returncode == 0, f"{mode} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line:\n{res.stdout}\n{res.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


def test_kernels_that_exit_fail_their_task_and_the_card_goes_on(run_py, shared_node,
                                                                 status, npuemu_cli) -> None:
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name}
    worker = status(name)["devices"][0]["pid"]
    r = host(run_py, "kernels", env)
    # launch ok, the engine's code at the first synchronize, reported once, then the same
    # engine runs the next kernel on the same stream
    assert r["runs"] == {f"{e}/{k}": [0, CODE[e], 0, 0, 1] for e in ENGINES for k in KINDS}
    # a tiny kernel run inline in the loop thread that calls sys.exit: the same, and then
    # the AI Vector engine still runs a kernel
    assert r["inline"] == [0, CODE["aivector"], 0, 1]
    assert r["import_exit"] == errors.ACL_ERROR_RT_PARAM_INVALID and r["import_exit_msg"]
    assert r["reload"] == 0
    assert r["callbacks"] == sorted([CODE[e] for e in ENGINES for _ in KINDS]
                                    + [CODE["aivector"]])
    assert r["log_failed"] == sorted(str(c) for c in CODE.values())
    assert r["log_causes"] == ["GeneratorExit", "KeyboardInterrupt", "SystemExit"]
    assert r["status"] == [0, 0]

    # the node's worker ignores SIGINT (a Ctrl-C in its terminal is not a stop)...
    os.kill(worker, signal.SIGINT)
    # ...and every engine serves a kernel of another process at once
    assert host(run_py, "after", env) == {"sync": 0, "marks": [1, 1, 1]}
    assert status(name)["devices"][0]["pid"] == worker
    # a real stop still works: no worker, no name left
    res = npuemu_cli("stop", "--name", name, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    deadline = time.monotonic() + 10
    while shm.leftovers(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shm.leftovers(name) == []


def test_a_model_step_that_exits_fails_its_task_and_models_go_on(run_py) -> None:
    r = host(run_py, "model", ENV)
    assert r == {
        "lane0": [CODE["aicore"], 0],      # on the engine thread: its second step never ran
        "lane1": [CODE["aivector"], 1],    # on a helper thread (stream 1 of the model)
        "good": [0, 1],                    # the engine thread runs the next model
        "good2": [0, 1],                   # and so does the helper thread
    }


def test_a_collective_behind_a_kernel_that_exits_completes(run_py) -> None:
    r = host(run_py, "collective", {**ENV, "NPUEMU_DEVICES": "2", "HCCL_EXEC_TIMEOUT": "60"})
    # rank 0's stream reports its kernel's failure; both ranks' all_reduce ran, twice
    assert r == {"syncs": [CODE["aicore"], 0], "first": [3.0, 3.0], "second": [6.0, 6.0]}


def test_a_worker_run_by_hand_still_stops_on_sigint(node_name) -> None:
    """SIGINT of a hand-run worker is the worker's own stop: its handler's KeyboardInterrupt
    passes every containment, the worker shuts down and removes its names (the log ring
    stays until the node stops, as for a node's worker)."""
    cmd = [sys.executable, "-m", "npuemu.device", "--node", node_name, "--dev", "0",
           "--hbm", str(64 << 20), "--ddr", str(16 << 20), "--supervisor", str(os.getpid())]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_ready(node_name), proc.stderr
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGINT, err
    assert "KeyboardInterrupt" in err
    left = shm.leftovers(node_name)
    for entry in left:
        shm.unlink_segment("/" + entry)
    assert left == [f"{shm.PREFIX}{node_name}.d0.log"]


def _wait_ready(node: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            seg = shm.Segment(shm.name(node, "d0", "ctl"))
        except FileNotFoundError:
            time.sleep(0.05)
            continue
        ctl = seg.buf.cast("Q")
        try:
            if ctl[layout.DEVICE_CTL.STATE] == layout.DeviceState.READY:
                return True
        finally:
            ctl.release()
            seg.close()
        time.sleep(0.05)
    return False
