"""Ops are tiled for the SoC of the node they run on, not for the host process's
``NPUEMU_SOC``: a shared node (``npuemu start``) started with one SoC and a program whose
environment names another. The program (``tests/progs/soc_tiling.py``) compiles and runs an
AI Vector op (Add) and an AI Core op (MatMul), each large enough to use every core, and
reports the SoC ``aclrtGetSocName`` gives, the block_dim each kernel was compiled with and
the blocks the card really ran (its profiling task records). The on-disk compile cache
keeps the kernels of each SoC apart."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.integration
CORES = {"Ascend910B1": {"aicore": 24, "aivector": 48},
         "Ascend910B4": {"aicore": 20, "aivector": 40}}
"""Core counts of the two SoCs used here (their CANN platform files)."""


def run_on(run_prog, node: str, host_soc: str, arg: str,
           env: dict[str, str] | None = None) -> dict:
    """Run ``soc_tiling.py arg`` against ``node`` (an embedded node if "") with
    ``NPUEMU_SOC=host_soc`` and ``env``; its RESULT dict."""
    env = {**(env or {}), "NPUEMU_SOC": host_soc, **({"NPUEMU_NODE": node} if node else {})}
    res = run_prog("soc_tiling.py", arg, env=env, timeout=120)
    assert res.returncode == 0, f"program failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, res.stdout + res.stderr
    return json.loads(lines[-1][len("RESULT "):])


def check(r: dict, node_soc: str) -> None:
    cores = CORES[node_soc]
    assert r["soc"] == r["soc_before_set_device"] == node_soc
    assert r["cores"] == cores
    assert r["compiled"] == {"k_Add": cores["aivector"], "k_MatMul": cores["aicore"]}
    assert r["ran"] == r["compiled"]  # the card ran the blocks the host tiled for


def test_a_node_started_with_another_soc_tiles_for_its_own_cores(npuemu_cli, node_name,
                                                                   run_prog, tmp_path):
    res = npuemu_cli("start", "--name", node_name, "--devices", "1", "--hbm", "1G", "--ddr",
                     "256M", env={"NPUEMU_SOC": "Ascend910B4", "TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stdout + res.stderr
    check(run_on(run_prog, node_name, "Ascend910B1", str(tmp_path / "prof")), "Ascend910B4")


def test_a_host_saying_another_soc_still_tiles_for_the_nodes(module_node, run_prog, tmp_path):
    node = module_node(devices=1)  # started with the default SoC, Ascend910B1
    check(run_on(run_prog, node, "Ascend910B4", str(tmp_path / "prof")), "Ascend910B1")


def test_the_disk_cache_keeps_each_socs_tiling(run_prog, tmp_path):
    """A kernel cached on disk by a program on one SoC's node is not reused, with its tiling,
    by a program on another SoC's node (embedded nodes here, one cache directory)."""
    cache = {"ASCEND_CACHE_PATH": str(tmp_path / "cache"), "NPUEMU_DEVICES": "1",
             "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}
    hits = []
    for soc in ("Ascend910B1", "Ascend910B4", "Ascend910B1", "Ascend910B4"):
        r = run_on(run_prog, "", soc, str(tmp_path / "prof"), cache)
        check(r, soc)
        hits.append(r["disk_hits"])
    assert hits == [0, 0, 2, 2]  # each SoC's two kernels, compiled once and then read back


def test_soc_name_of_a_shared_node_that_is_not_running_is_null(run_prog):
    """``aclrtGetSocName`` on a shared node that cannot be reached: NULL (None), not the SoC
    this process's environment names."""
    r = run_on(run_prog, f"absent-{os.getpid()}", "Ascend910B4", "--soc-only")
    assert r == {"soc_before_set_device": None}
