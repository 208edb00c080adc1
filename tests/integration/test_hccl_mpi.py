"""Collectives across nodes joined by MPI (host/hccl/mpi.py): ``mpiexec -n N`` (the mpich
wheel's) starts N processes, each with its own embedded node (a separate emulated server);
root info travels over MPI and every collective x dtype (bfloat16 included) x reduce op is
checked against numpy in each rank (``hccl_mpi_rank.py``). Skipped cleanly when mpi4py or
mpiexec is not installed (the ``mpi`` extra) or MPI cannot initialise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import child_env

pytestmark = pytest.mark.integration
HERE = os.path.dirname(os.path.abspath(__file__))


def _mpiexec() -> str:
    pytest.importorskip("mpi4py")
    exe = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    exe = exe if os.path.exists(exe) else shutil.which("mpiexec")
    if not exe:
        pytest.skip("no mpiexec (install the 'mpi' extra: mpi4py and mpich)")
    probe = subprocess.run([exe, "-n", "1", sys.executable, "-c",
                            "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"],
                           capture_output=True, text=True, timeout=60, env=child_env())
    if probe.returncode != 0:
        pytest.skip(f"MPI cannot initialise here: {probe.stderr[-300:]}")
    return exe


@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_across_mpi_nodes(ranks: int) -> None:
    exe = _mpiexec()
    env = child_env({"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M",
                     "HCCL_BUFFSIZE": "1"})
    res = subprocess.run([exe, "-n", str(ranks), sys.executable,
                          os.path.join(HERE, "hccl_mpi_rank.py")], capture_output=True,
                         text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    per_rank = json.loads(line[7:])["ranks"]
    assert len(per_rank) == ranks
    for r in per_rank:
        assert r["failures"] == [] and r["async"] == 0, r
        assert r["cases"] >= 150  # every op x dtype x reduce op (hccl_mpi_rank.py)


TWO_SERVERS = {
    "status": "completed", "version": "1.0", "server_count": "2",
    "server_list": [
        {"server_id": "node_0", "device": [
            {"device_id": "1", "device_ip": "10.0.0.1", "rank_id": "0"}]},
        {"server_id": "node_1", "device": [
            {"device_id": "0", "device_ip": "10.0.1.1", "rank_id": "1"}]},
    ],
}


def test_rank_table_of_two_servers_over_mpi(tmp_path) -> None:
    """``HcclCommInitClusterInfo`` with two servers: one MPI process (and node) per server,
    each on the card the table names; collectives run across them."""
    exe = _mpiexec()
    path = tmp_path / "two_servers.json"
    path.write_text(json.dumps(TWO_SERVERS))
    env = child_env({"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M",
                     "HCCL_BUFFSIZE": "1"})
    res = subprocess.run([exe, "-n", "2", sys.executable,
                          os.path.join(HERE, "hccl_mpi_ranktable.py"), str(path)],
                         capture_output=True, text=True, timeout=300, env=env,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    ranks = json.loads(line[7:])
    assert [(r["rank"], r["size"], r["card"], r["server"]) for r in ranks] == [
        (0, 2, 1, "node_0"), (1, 2, 0, "node_1")]
    for r in ranks:
        assert r["f32"] and r["bf16"] and r["bcast"] and r["async"] == 0, r


def test_rank_table_of_two_servers_needs_mpi(run_prog, tmp_path) -> None:
    """Without MPI (one process), a table of several servers is HCCL_E_NOT_SUPPORT."""
    path = tmp_path / "two_servers.json"
    path.write_text(json.dumps(TWO_SERVERS))
    res = run_prog("hccl_two_servers.py", str(path),
                   env={"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "128M"}, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    rets = [int(ln.split()[1]) for ln in res.stdout.splitlines() if ln.startswith("RET ")]
    assert rets == [5, 1]  # HCCL_E_NOT_SUPPORT; a rank not in the table: HCCL_E_PARA
