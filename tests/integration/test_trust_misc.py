"""Reliability odds and ends, each through real workers and real host processes:

- one IPC share key imported twice by one process: the imports are counted, so closing one
  leaves the other readable, and only the second close releases the memory (the exporter
  had freed its handle, so the key is gone too);
- a rank process killed and not reaped by its parent (a zombie): the surviving rank's
  collective fails by liveness (507057, HCCL_E_REMOTE) well before HCCL_EXEC_TIMEOUT;
- host logs, msnpureport exports and profiles (raw, exported, plotted) are private (files
  0600, directories 0700) even when the writer's umask is 0.

The child programs are ``tests/progs/ipc_double_import.py``, ``hccl_zombie_rank.py`` and
``private_files.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import psutil
import pytest

pytestmark = pytest.mark.integration


def result(proc, timeout: float = 120) -> dict:
    """The child's RESULT dict once it exits 0 (killed past ``timeout``)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{out}\n{err}"
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert lines, out + err
    return json.loads(lines[-1][len("RESULT "):])


def test_one_key_imported_twice_needs_two_closes(shared_node, spawn_prog, tmp_path) -> None:
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path)}
    exporter = spawn_prog("ipc_double_import.py", "exporter", env=env)
    importer = spawn_prog("ipc_double_import.py", "importer", env=env)
    r = result(importer)
    assert result(exporter) == {}
    assert r == {"imports": [0, 0], "distinct": True,
                 "read_after_one_close": True, "held_after_one_close": True,
                 "card_empty_after_both": True,
                 "close_again": 107000, "import_again": 107000}, r


EXEC_TIMEOUT_S = 20


def test_a_zombie_rank_fails_its_peers_collective_by_liveness(shared_node, spawn_prog,
                                                              tmp_path) -> None:
    """Rank 1 is killed and left unreaped (its parent, this test, does not wait for it):
    its pid still exists, as a zombie. Rank 0's next all_reduce must fail with 507057
    (HCCL_E_REMOTE: its peer's host is gone) within a few seconds; a timeout would be
    107019 after HCCL_EXEC_TIMEOUT."""
    name = shared_node(devices=2, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path), "HCCL_EXEC_TIMEOUT": str(EXEC_TIMEOUT_S)}
    ranks = [spawn_prog("hccl_zombie_rank.py", env={**env, "RANK": str(r)})
             for r in (0, 1)]
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready1").exists():
        bad = [p.returncode for p in ranks if p.poll() is not None]
        assert not bad and time.monotonic() < deadline, [p.communicate() for p in ranks]
        time.sleep(0.02)
    os.kill(ranks[1].pid, signal.SIGKILL)  # and never waited for until rank 0 is done
    deadline = time.monotonic() + 10
    while psutil.Process(ranks[1].pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the killed rank never became a zombie"
        time.sleep(0.01)
    (tmp_path / "killed").write_text("{}")
    r = result(ranks[0], timeout=EXEC_TIMEOUT_S + 60)
    assert psutil.Process(ranks[1].pid).status() == psutil.STATUS_ZOMBIE  # still unreaped
    assert r["sync"] == 507057 and r["async"] == 21, r  # HCCL_E_REMOTE, not a timeout
    assert r["seconds"] < EXEC_TIMEOUT_S / 4, r
    assert r["destroy"] == 0
    ranks[1].wait(timeout=10)


def test_logs_and_profiles_are_private_under_umask_0(shared_node, run_prog, tmp_path) -> None:
    """A host log, a profile (raw data, its export, a re-export and a plot) and an
    msnpureport export, all written by a child whose umask is 0: every directory they made
    is 0700 and every file 0600 (a plain ``open`` there gives 0666)."""
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    root = tmp_path / "out"
    res = run_prog("private_files.py", str(root), env={"NPUEMU_NODE": name}, timeout=180)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    r = json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert r["bad_free"] == 107000 and r["codes"] == [0, 0, 0], r
    assert r["plain_open"] == "0o666"  # the umask really was 0 in the child
    modes = r["modes"]
    assert modes[r["plog"]] == "0o600" and modes["plog_root/"] == "0o700"
    kinds = {"plog": r"\.log$", "raw trace": r"task\.bin$", "timeline": r"msprof_\d+\.json$",
             "summary": r"op_summary_\d+\.csv$", "plot": r"timeline\.png$",
             "device log": r"logs/.*/device-0_\d+\.log$"}
    for kind, pattern in kinds.items():
        assert any(re.search(pattern, p) for p in modes), (kind, "\n".join(sorted(modes)))
    wrong = {p: m for p, m in modes.items() if m != ("0o700" if p.endswith("/") else "0o600")}
    assert not wrong, wrong
