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
