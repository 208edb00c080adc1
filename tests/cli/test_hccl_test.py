"""``npuemu hccl-test`` (tools/hccl_test.py): hccl_test's header and rows, the sizes walked
by -b/-e/-f and -i, the check column, and a clear refusal under an MPI launcher."""

from __future__ import annotations

import pytest

from npuemu.tools.hccl_test import sizes

ENV = {"NPUEMU_DEVICES": "4", "NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M", "HCCL_BUFFSIZE": "1"}


def test_sizes_walk_like_hccl_test() -> None:
    assert sizes(8, 64, None, 2.0) == [8, 16, 32, 64]
    assert sizes(1024, 4096, 1024, None) == [1024, 2048, 3072, 4096]
    assert sizes(100, 200, None, None)[:3] == [100, 110, 120]
    assert sizes(64, 64, 0, None) == [64]


@pytest.mark.integration
def test_all_reduce_rows(npuemu_cli) -> None:
    res = npuemu_cli("hccl-test", "all_reduce", "-b", "1K", "-e", "4K", "-f", "2", "-n", "2",
                     "-w", "1", "-p", "4", env=ENV, timeout=180)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "the minbytes is 1024, maxbytes is 4096, iters is 2, warmup_iters is 1"
    assert [c.strip() for c in lines[1].split("|")] == [
        "data_size(Bytes):", "aveg_time(us):", "alg_bandwidth(GB/s):", "check_result:",
        "bus_bandwidth(GB/s):"]
    rows = [[c.strip() for c in ln.split("|")] for ln in lines[2:]]
    assert [int(r[0]) for r in rows] == [1024, 2048, 4096]
    for _size, avg, alg, check, bus in rows:
        assert check == "success"
        assert float(avg) > 0
        assert float(bus) == pytest.approx(float(alg) * 1.5, rel=1e-3, abs=2e-5)  # 2(n-1)/n


@pytest.mark.integration
def test_no_check(npuemu_cli) -> None:
    res = npuemu_cli("hccl-test", "all_gather", "-b", "64", "-e", "64", "-n", "1", "-w", "0",
                     "-c", "0", "-p", "2", "-d", "int8", env=ENV, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[2].split("|")[3].strip() == "NULL"


@pytest.mark.integration
def test_one_process_per_rank_under_mpiexec() -> None:
    """``mpiexec -n 2 npuemu hccl-test``: two processes, each with its own node, joined by
    MPI; rank 0 alone prints the rows."""
    import os
    import subprocess
    import sys

    from tests.conftest import child_env

    pytest.importorskip("mpi4py")
    exe = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(exe):
        pytest.skip("no mpiexec beside this Python (the 'mpi' extra)")
    cmd = [exe, "-n", "2", sys.executable, "-m", "npuemu.tools.cli", "hccl-test",
           "reduce_scatter", "-b", "4K", "-e", "8K", "-f", "2", "-n", "2", "-w", "1", "-o",
           "max", "-d", "int32"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                         env=child_env({**ENV, "NPUEMU_DEVICES": "1"}))
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert lines.count(lines[1]) == 1 and lines[1].startswith("data_size(Bytes):")
    rows = [[c.strip() for c in ln.split("|")] for ln in lines[2:]]
    assert [(r[0], r[3]) for r in rows] == [("4096", "success"), ("8192", "success")]
