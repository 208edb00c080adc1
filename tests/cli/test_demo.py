"""``npuemu demo``: runs the tour end to end and leaves nothing behind."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import psutil
import pytest

from npuemu.shared import shm

pytestmark = pytest.mark.integration

SCRUBBED = ("NPUEMU_NODE", "NPUEMU_DEVICES", "NPUEMU_HBM", "NPUEMU_DDR", "NPUEMU_SOC",
            "ASCEND_RT_VISIBLE_DEVICES")


def _demo(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    clean.update(env)
    exe = shutil.which("npuemu")
    cmd = [exe, "demo"] if exe else [sys.executable, "-m", "npuemu.tools", "demo"]
    return subprocess.run(cmd, env=clean, capture_output=True, text=True, timeout=120)


def _assert_node_gone(out: str) -> None:
    name = re.search(r"npuemu status --name (\S+)", out).group(1)
    pids = [int(re.search(r"supervisor pid (\d+)", out).group(1))]
    pids += [int(m) for m in re.findall(r"^\s+\d+\s+(\d+)\s+READY", out, re.M)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if psutil.pid_exists(p)
            and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"processes left behind: {left}"
    assert shm.leftovers(name) == []


def test_demo_runs_clean_on_two_devices_by_default() -> None:
    proc = _demo()
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "using 2 devices" in out
    assert "2 devices visible, SoC Ascend910B1" in out
    for key in ("acl.rt.set_device(0), set_device(1)      -> [0, 0] ok",
                "round trip equal ok",
                "ret 100000 ACL_ERROR_INVALID_PARAM ok",
                "DeviceArray.from_numpy(x) -> <npuemu.DeviceArray shape=(3, 4) dtype=float32",
                "OutOfMemoryError 207001 ACL_ERROR_RT_MEMORY_ALLOCATION ok",
                "HBM used / total"):
        assert key in out, f"{key!r} missing from:\n{out}"
    assert "FAILED" not in out
    assert re.search(r"^all \d+ checks passed$", out, re.M)
    assert len(out.splitlines()) <= 45
    _assert_node_gone(out)


def test_demo_honours_npuemu_devices() -> None:
    proc = _demo(NPUEMU_DEVICES="3", NPUEMU_HBM="1G", NPUEMU_DDR="256M")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "using 2 devices" not in out
    assert "3 devices visible" in out and "3 devices, READY" in out
    assert "/ 1.0 GiB" in out
    _assert_node_gone(out)
