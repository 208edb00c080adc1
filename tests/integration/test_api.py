"""Integration tests of the Pythonic host API (``npuemu.host.Device`` and friends).

Every scenario runs in a fresh interpreter (``tests/progs/api.py SCENARIO``, one function
per scenario) with a 2-device, 1 GiB HBM, 256 MiB DDR embedded node that belongs to that
child: the child's exit tears the node down. Each child ends with ``done(**result)``, which
prints one ``RESULT {json}`` line with its pid and its node's processes; ``run`` then checks
that nothing of that node is left in /dev/shm and that its supervisor and workers are gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from npuemu.shared import shm

pytestmark = pytest.mark.integration

ENV_SIZES = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}
GIB = 1 << 30
# Settings a developer's shell may have that would change what a child attaches to (other
# NPUEMU_* variables, e.g. a test-session tag, are passed on).
SCRUBBED = ("NPUEMU_NODE", "NPUEMU_DEVICES", "NPUEMU_HBM", "NPUEMU_DDR", "NPUEMU_SOC",
            "ASCEND_RT_VISIBLE_DEVICES")

PROGS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "progs")
PROG = os.path.join(PROGS, "api.py")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(ENV_SIZES)
    env.update(extra)
    return env


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def run(name: str, **env: str) -> dict:
    """Run the scenario ``name`` of the program in a child; returns its ``done()`` result
    after the leak check."""
    proc = subprocess.run([sys.executable, PROG, name],
                          env=_env(**env), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, f"no RESULT line:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(lines[0][len("RESULT "):])
    deadline = time.monotonic() + 10
    pids = result.get("_pids", [])
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.05)
    assert all(_gone(p) for p in pids), f"node processes left behind: {pids}"
    left = [e for e in shm.leftovers()
            if e.removeprefix("sem.").startswith(f"{shm.PREFIX}e{result['_pid']}-")]
    assert not left, f"left in /dev/shm: {left}"
    return result


# ------------------------------------------------------------------------------ import


def test_importing_the_package_is_cheap_and_starts_nothing() -> None:
    proc = subprocess.run([sys.executable, os.path.join(PROGS, "api_import.py")], env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["loaded"] == ["npuemu.host"]    # no numpy, no runtime, no acl
    assert result["count"] == [2, 0]
    assert result["node"] == "None"               # counting devices starts no node
    for name in ("Device", "DeviceArray", "DeviceBuffer", "device_count", "AclError",
                 "DeviceLostError", "OutOfMemoryError", "InvalidDeviceError"):
        assert name in result["all"]
    assert "acl" not in result["all"]
    assert not [e for e in shm.leftovers() if f"npuemu.e{result['pid']}-" in e]


def test_api_module_imports_before_and_after_acl_without_cycles() -> None:
    for first, second in (("npuemu.host.api", "npuemu.host.acl"),
                          ("npuemu.host.acl", "npuemu.host.api"),
                          ("npuemu.host.core.runtime", "npuemu.host.api")):
        code = f"import {first}, {second}; import npuemu.host; npuemu.host.Device"
        proc = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------------------ Device


def test_device_queries() -> None:
    result = run("device_queries")
    assert result["repr"] == "<npuemu.Device 0 Ascend910B1>"
    assert result["soc"] == "Ascend910B1"
    assert result["hbm"] == [GIB, GIB]
    assert result["ddr_total"] == 256 << 20
    assert (result["code"], result["name"]) == (107001, "ACL_ERROR_RT_INVALID_DEVICEID")
    assert result["current"] == "None"  # mem_info attached device 0 but bound no thread
    assert result["retained"] == [0]


def test_with_device_sets_resets_and_restores_the_previous_context() -> None:
    result = run("with_device")
    assert result["steps"] == [[0, 0], [1, 0], [0, 0], [1, 0], [0, 0], [-1, 107002]]
    assert result["restored"] == [1, 0]


def test_methods_make_their_device_current_only_for_the_call() -> None:
    result = run("methods_current")
    assert result["same"] == [0, 0]
    assert result["buf_dev"] == 1
    assert result["retained"] == [1]  # device 0 was reset by the with; device 1 kept
    assert result["seen"] == ["None", "03" * 16, "None"]


# ------------------------------------------------------------------------------ buffers


def test_buffer_copies_round_trip() -> None:
    result = run("buffer_copies")
    assert result["out1"] and result["out2"]
    assert result["out3"] == list(range(64))
    assert result["got"] == result["head"] == list(range(8))
    assert result["tail"] == "ab" * 256
    assert result["errors"] == ["ValueError"] * 7
    assert result["repr"].startswith("<npuemu.DeviceBuffer 256 bytes at 0x1")
    assert result["repr"].endswith(" on device 0>")


def test_buffer_free_is_idempotent_and_blocks_use_after_free() -> None:
    result = run("buffer_free")
    assert result["used"] >= 4 << 20
    assert result["after"] == result["total"] == result["end"]
    assert result["code"] == 107000
    assert result["repr"].endswith(" freed>")
    assert result["freed"] == [True, True]


def test_buffer_outlived_by_reset_never_touches_a_later_allocation() -> None:
    result = run("outlived_by_reset")
    assert result["data"] == "02" * 64


# ------------------------------------------------------------------------------ errors


def test_errors_carry_their_acl_codes() -> None:
    result = run("error_codes")
    codes = result["codes"]
    assert codes["malloc0"] == [100000, "ACL_ERROR_INVALID_PARAM"]
    assert codes["malloc-1"] == codes["mallocstr"] == codes["policy"] == codes["malloc0"]
    assert codes["oom"] == [207001, "ACL_ERROR_RT_MEMORY_ALLOCATION"]
    assert codes["oom_array"] == codes["oom"]
    assert codes["p2p"] == [107000, "ACL_ERROR_RT_PARAM_INVALID"]


def test_lost_device_raises_device_lost_and_free_stays_quiet() -> None:
    result = run("lost_device")
    assert result["status"] == 1
    assert result["code"] == 507010
    assert result["freed"] is True


# ------------------------------------------------------------------------------ arrays


def test_device_array_round_trips() -> None:
    result = run("array_round_trips")
    assert all(result["same"]), result["same"]
    assert result["a"] == [[5, 6], [7, 8]]
    assert result["bad"] == ["ValueError", "ValueError"]
    assert result["repr"].startswith("<npuemu.DeviceArray shape=(4, 4) dtype=uint16 device=1 ")
    assert " ptr=0x1" in result["repr"]
    assert result["has_array"] is False
    assert result["dev"] == [0, 1]
    assert result["buffer"] == [32, True]


def test_device_array_fill() -> None:
    result = run("array_fill")
    assert result["fills"] == [True] * 4


def test_device_array_default_device_and_implicit_attach() -> None:
    result = run("array_default_device")
    assert result["first"] == [0, [0], "None"]
    assert result["b"] == 1 and result["c"] == 1
    assert result["released"] is True
    assert result["again"] == [0, 1]
    assert result["a2"] == [0, 1, 2, 3]


def test_forked_child_leaves_the_parents_memory_alone() -> None:
    result = run("fork")
    assert result["child"] == 0
    assert result["data"] == "07" * 64
    assert result["freed"] is False
