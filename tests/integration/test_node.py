"""Node life: shared nodes with several hosts, ``npuemu run``, embedded-node teardown, and
device loss (a worker or a host killed with SIGKILL).

Every host program (a scenario of ``tests/progs/node_life.py``) runs in a child interpreter
with a timeout, so a call that hangs on a lost device fails the test instead of hanging the
suite.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from npuemu.shared import shm
from tests.conftest import PROGS

pytestmark = pytest.mark.integration

MiB = 1 << 20
LOST_HEARTBEAT = 507010
EMBEDDED = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "64M"}

PROG = "node_life.py"
"""The host programs (``tests/progs/node_life.py``), one scenario each."""


def result_of(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line in:\n{stdout}"
    return json.loads(lines[-1][len("RESULT "):])


def wait_for_file(path, proc=None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"child exited ({proc.returncode}) before {path}:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.01)


def wait_until(predicate, timeout: float, what: str):
    """Poll ``predicate()`` until it returns a truthy value; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s", pytrace=False)
        time.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")  # zombie: exited
    except FileNotFoundError:
        return True


# ------------------------------------------------------------------------------ shared node
def test_two_hosts_share_a_device_and_see_only_their_own_data(module_node, spawn_prog, status,
                                                               tmp_path):
    name = module_node(devices=4)
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path)}
    a = spawn_prog(PROG, "share_a_card", env={**env, "ROLE": "a", "OTHER": "b"})
    b = spawn_prog(PROG, "share_a_card", env={**env, "ROLE": "b", "OTHER": "a"})
    wait_for_file(tmp_path / "a.ptr", a)
    wait_for_file(tmp_path / "b.ptr", b)

    dev0 = status(name)["devices"][0]
    hosts = {h["pid"]: h for h in dev0["hosts"]}
    assert {a.pid, b.pid} <= set(hosts), dev0
    for pid in (a.pid, b.pid):
        assert hosts[pid]["allocs"] == 1 and hosts[pid]["used"] >= MiB, hosts[pid]
    assert dev0["hbm_used"] >= 2 * MiB

    (tmp_path / "go").touch()
    results = {}
    for role, proc in (("a", a), ("b", b)):
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, f"host {role}: {out}\n{err}"
        results[role] = result_of(out)
    for role in "ab":
        assert results[role] == {
            "count": 4, "distinct": True, "mine_ok": True, "read_theirs": 107000,
            "write_theirs": 107000, "d2d_theirs": 107000, "free_theirs": 107000,
            "untouched": True, "still_mine": True}, role

    def released():
        dev = status(name)["devices"][0]
        return dev["hbm_used"] == 0 and not {a.pid, b.pid} & {h["pid"] for h in dev["hosts"]}

    wait_until(released, 5, "both hosts detached from device 0")


def test_killed_host_memory_is_reclaimed_on_a_shared_node(module_node, spawn_prog, status,
                                                        tmp_path):
    name = module_node(devices=4)
    proc = spawn_prog(PROG, "hold_memory",
                      env={"NPUEMU_NODE": name, "READY": str(tmp_path / "ready")})
    wait_for_file(tmp_path / "ready", proc)

    dev1 = status(name)["devices"][1]
    assert proc.pid in {h["pid"] for h in dev1["hosts"]}, dev1
    assert dev1["hbm_used"] >= 128 * MiB
    assert any(e.startswith(f"{shm.PREFIX}{name}.p{proc.pid}.") for e in shm.leftovers(name))

    proc.kill()
    proc.wait(10)
    t0 = time.monotonic()

    def reclaimed():
        dev = status(name)["devices"][1]
        return (dev["hbm_used"] == 0 and dev["live_allocs"] == 0
                and proc.pid not in {h["pid"] for h in dev["hosts"]})

    wait_until(reclaimed, 5, f"memory of killed host {proc.pid} reclaimed")
    assert time.monotonic() - t0 < 5
    def host_names():
        return [e for e in shm.leftovers(name)
                if f".p{proc.pid}." in e or re.search(r"\.d1\.c\d+", e)]

    wait_until(lambda: not host_names(), 5,
               f"pinned and client segments of the killed host unlinked: {host_names()}")
    dev1 = status(name)["devices"][1]
    assert dev1["state"] == "READY" and dev1["starts"] == 1  # the worker itself lived on


def test_unknown_node_name_is_an_error_not_a_hang(run_prog):
    res = run_prog(PROG, "unknown_node", env={"NPUEMU_NODE": "pt-no-such-node"}, timeout=30)
    assert res.returncode == 0, res.stderr
    r = result_of(res.stdout)
    assert r["set"] == 207004, r  # ACL_ERROR_RT_NO_DEVICE
    assert "pt-no-such-node" in r["msg"]


# ---------------------------------------------------------------------------- npuemu run
def test_npuemu_run_executes_a_pyacl_program(npuemu_cli, tmp_path):
    script = os.path.join(PROGS, "run_sample.py")
    res = npuemu_cli("run", script, "--flag", "x", env=EMBEDDED, cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines() == [
        "devices 2", "device 1", f"sum {3 * 1023 * 1024 // 2} equal True", "soc Ascend910B1",
        "args ['--flag', 'x']", "name __main__"], res.stdout + res.stderr


def test_npuemu_run_passes_the_exit_status_through(npuemu_cli, tmp_path):
    res = npuemu_cli("run", os.path.join(PROGS, "run_sample.py"), "3", env=EMBEDDED)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "sum 1571328 equal True" in res.stdout
    res = npuemu_cli("run", os.path.join(PROGS, "run_raises.py"), env=EMBEDDED)
    assert res.returncode == 1
    assert "KeyError: 'boom'" in res.stderr


# ---------------------------------------------------------------- embedded-node teardown
@pytest.mark.parametrize("mode", ["exit", "exception", "sigterm", "sigkill"])
def test_embedded_node_is_torn_down(mode, spawn_prog, tmp_path):
    info_path = tmp_path / "info.json"
    proc = spawn_prog(PROG, "teardown", env={**EMBEDDED, "MODE": mode, "INFO": str(info_path)})
    wait_for_file(info_path, proc)
    info = json.loads(info_path.read_text())
    assert len(info["workers"]) == 2 and all(info["workers"]), info
    assert shm.leftovers(info["node"]), "the node should be alive now"
    if mode == "sigterm":
        proc.send_signal(signal.SIGTERM)
    elif mode == "sigkill":
        proc.kill()
    out, err = proc.communicate(timeout=20)
    expected_rc = {"exit": 0, "exception": 1, "sigterm": 128 + signal.SIGTERM,
                   "sigkill": -signal.SIGKILL}[mode]
    assert proc.returncode == expected_rc, f"{out}\n{err}"
    if mode == "exception":
        assert "RuntimeError: uncaught on purpose" in err
    # exit/exception/SIGTERM run the atexit teardown, which waits for the supervisor
    bound = 5.0 if mode == "sigkill" else 0.5
    wait_until(lambda: not shm.leftovers(info["node"]), bound,
               f"/dev/shm names of node {info['node']} gone after {mode}")
    for pid in [info["supervisor"], *info["workers"]]:
        wait_until(lambda pid=pid: gone(pid), bound, f"process {pid} gone after {mode}")


# ------------------------------------------------------------------------------ device lost
def test_worker_killed_during_a_large_d2d_copy(run_prog):
    res = run_prog(PROG, "worker_killed_in_copy", env=EMBEDDED, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    r = result_of(res.stdout)
    assert r["failed_with"] == LOST_HEARTBEAT, r
    assert r["fail_s"] < 5.0, r  # liveness bound: a lost device never hangs a call
    assert r["later"] == {
        "malloc": [0, LOST_HEARTBEAT], "h2d": LOST_HEARTBEAT, "d2h": LOST_HEARTBEAT,
        "d2d": LOST_HEARTBEAT, "memset": LOST_HEARTBEAT, "mem_info": [0, 0, LOST_HEARTBEAT],
        "sync": LOST_HEARTBEAT, "status": [1, 0]}, r
    assert r["later_s"] < 5.0
    assert r["card1_ok"] is True and r["card1_status"] == [0, 0]
    assert r["registry"] == ["LOST", -signal.SIGKILL], r
    assert r["dead_card_names"] == [], r
    assert r["reset_lost"] == 0, r
