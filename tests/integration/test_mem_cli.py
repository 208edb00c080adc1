"""``npuemu memory snapshot`` / ``pools`` and ``npuemu smi -t memory`` against a shared node
with a pyACL program holding memory in another process (``tests/progs/mem_holder.py``)."""

from __future__ import annotations

import json
import pickle

import pytest

pytestmark = pytest.mark.integration

MiB = 1 << 20
def test_memory_cli_snapshot_pools_and_smi(npuemu_cli, shared_node, spawn_prog, tmp_path):
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    go = tmp_path / "go"
    holder = spawn_prog("mem_holder.py", env={"NPUEMU_NODE": name, "GO": str(go)})
    try:
        ptrs = json.loads(holder.stdout.readline())["ptrs"]
        out = tmp_path / "snap.pickle"
        res = npuemu_cli("memory", "snapshot", "--name", name, "-o", str(out))
        assert res.returncode == 0, res.stderr
        assert "6 blocks" in res.stdout
        snap = pickle.loads(out.read_bytes())
        assert sorted(s["address"] for s in snap["segments"]) == sorted(ptrs)
        assert all(s["blocks"][0]["state"] == "active_allocated" for s in snap["segments"])
        res = npuemu_cli("memory", "pools", "--name", name, "--json")
        assert res.returncode == 0, res.stderr
        hbm = json.loads(res.stdout)["0"]["hbm"]
        normal, huge, _ = hbm
        assert normal["used"] >= 5 * 100_000 and normal["reserved"] == 2 * MiB
        assert huge["used"] == 4 * MiB  # 3 MiB + padding on 2 MiB pages
        assert sum(p["reserved"] for p in hbm) == 64 * MiB
        res = npuemu_cli("smi", "info", "-t", "memory", "-i", "0", "--name", name)
        assert res.returncode == 0, res.stderr
        assert "HBM Normal Page Pool(MB)" in res.stdout and "HBM Fragmentation(%)" in res.stdout
        res = npuemu_cli("status", "--name", name)
        assert "normal-page pool 2.0 MiB" in res.stdout or "normal-page pool 2 MiB" in res.stdout
    finally:
        go.touch()
        holder.communicate(timeout=30)
    res = npuemu_cli("memory", "pools", "--name", "no-such-node-here")
    assert res.returncode == 1 and res.stderr.startswith("npuemu memory:")
