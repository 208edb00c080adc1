"""IPC shareable handles between two host processes on one shared node: B reads what A
wrote only once A allowed B's pid; A freeing its handle and then dying while B still maps
the memory leaves B's view intact; when B closes it, nothing is left on the card."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

pytestmark = pytest.mark.integration

MiB = 1 << 20
PROG = "mem_ipc.py"
"""The two sides (``tests/progs/mem_ipc.py``: ``export`` and ``import_``)."""


def _wait_file(path, procs, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        for p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                pytest.fail(f"child exited ({p.returncode}) before {path}:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.01)


def test_ipc_permission_read_and_exporter_death(shared_node, spawn_prog, tmp_path, status):
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path)}
    a = spawn_prog(PROG, "export", env=env)
    b = spawn_prog(PROG, "import_", env=env)
    _wait_file(tmp_path / "freed", [a, b])
    os.kill(a.pid, signal.SIGKILL)
    a.communicate(timeout=30)
    (tmp_path / "dead").write_text("{}")
    out, err = b.communicate(timeout=60)
    assert b.returncode == 0, f"{out}\n{err}"
    r = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert r == {"refused": 107000, "bad_pid_key": 107000, "bad_type": 100000,
                 "unknown_key": 107000, "read_ok": True, "still_ok": True,
                 "closed_twice": 107000, "all_free": True}
    deadline = time.monotonic() + 10
    while status(name)["devices"][0]["hbm_used"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status(name)["devices"][0]["hbm_used"] == 0
