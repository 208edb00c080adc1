"""``npuemu hccl-test`` (tools/hccl_test.py): hccl_test's header and rows, the sizes walked
by -b/-e/-f and -i, the check column (NULL on overflow), every operation in the convenience
mode, bfloat16 (``-d bf16``/``bfp16``), bad options, and one process per rank under
mpiexec."""

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


def _rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    assert lines[1].startswith("data_size(Bytes):")
    return [[c.strip() for c in ln.split("|")] for ln in lines[2:]]


@pytest.mark.integration
@pytest.mark.parametrize(("op", "extra", "factor"), [
    ("all_reduce", ["-o", "max", "-d", "int32"], 2 * 2 / 3),
    ("all_gather", ["-d", "fp16"], 2 / 3),
    ("reduce_scatter", ["-o", "min", "-d", "int64"], 2 / 3),
    ("broadcast", ["-r", "2", "-d", "int8"], 1.0),
    ("reduce", ["-r", "1", "-o", "prod", "-d", "fp32"], 1.0),
    ("alltoall", ["-d", "fp32"], 2 / 3),
])
def test_every_operation_in_the_convenience_mode(npuemu_cli, op, extra, factor) -> None:
    """Three ranks (an odd count) in one process: each operation checks its result."""
    res = npuemu_cli("hccl-test", op, "-b", "96", "-e", "192", "-f", "2", "-n", "2", "-w",
                     "1", "-p", "3", *extra, env=ENV, timeout=180)
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    assert [int(r[0]) for r in rows] == [96, 192]
    for _size, avg, alg, check, bus in rows:
        assert check == "success", op
        assert float(avg) > 0
        assert float(bus) == pytest.approx(float(alg) * factor, rel=1e-3, abs=2e-5)


@pytest.mark.integration
@pytest.mark.parametrize("name", ["bf16", "bfp16"])
def test_bfloat16(npuemu_cli, name: str) -> None:
    res = npuemu_cli("hccl-test", "all_reduce", "-b", "2K", "-e", "2K", "-n", "1", "-w", "0",
                     "-p", "3", "-d", name, "-c", "2", env=ENV, timeout=120)
    assert res.returncode == 0, res.stderr
    assert [r[3] for r in _rows(res.stdout)] == ["success"]
    assert res.stderr.count("check result success") == 3  # -c 2: every rank says so


@pytest.mark.integration
def test_overflowing_product_is_null(npuemu_cli) -> None:
    """int8 prod of rank_id + 1: 5 ranks give 120 (fits, checked), 6 give 720 (overflows:
    NULL, as hccl_test prints when the expected value does not fit)."""
    env = {**ENV, "NPUEMU_DEVICES": "6", "NPUEMU_HBM": "128M"}
    for p, want in (("5", "success"), ("6", "NULL")):
        res = npuemu_cli("hccl-test", "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w",
                         "0", "-p", p, "-o", "prod", "-d", "int8", env=env, timeout=180)
        assert res.returncode == 0, res.stderr
        assert _rows(res.stdout)[0][3] == want, p


@pytest.mark.parametrize("argv", [
    ["-b", "8K", "-e", "4K"], ["-f", "1"], ["-b", "lots"], ["-n", "0"],
])
def test_bad_options(npuemu_cli, argv) -> None:
    res = npuemu_cli("hccl-test", "all_reduce", *argv, env=ENV, timeout=60)
    assert res.returncode == 2
    assert "npuemu hccl-test:" in res.stderr


@pytest.mark.integration
def test_unsupported_dtype_is_refused(npuemu_cli) -> None:
    res = npuemu_cli("hccl-test", "all_reduce", "-b", "64", "-e", "64", "-n", "1", "-w", "0",
                     "-p", "2", "-d", "int128", env=ENV, timeout=120)
    assert res.returncode == 1
    assert "HCCL_E_NOT_SUPPORT" in res.stderr


@pytest.mark.integration
def test_no_check(npuemu_cli) -> None:
    res = npuemu_cli("hccl-test", "all_gather", "-b", "64", "-e", "64", "-n", "1", "-w", "0",
                     "-c", "0", "-p", "2", "-d", "int8", env=ENV, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[2].split("|")[3].strip() == "NULL"


@pytest.mark.integration
@pytest.mark.parametrize("data", [["-o", "max", "-d", "int32"], ["-o", "sum", "-d", "bf16"]])
def test_one_process_per_rank_under_mpiexec(data) -> None:
    """``mpiexec -n 2 npuemu hccl-test``: two processes, each with its own node, joined by
    MPI; rank 0 alone prints the rows (bfloat16 reduced by the MPI user op)."""
    import os
    import subprocess
    import sys

    from tests.conftest import child_env

    pytest.importorskip("mpi4py")
    exe = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(exe):
        pytest.skip("no mpiexec beside this Python (the 'mpi' extra)")
    cmd = [exe, "-n", "2", sys.executable, "-m", "npuemu.tools.cli", "hccl-test",
           "reduce_scatter", "-b", "4K", "-e", "8K", "-f", "2", "-n", "2", "-w", "1", *data]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                         env=child_env({**ENV, "NPUEMU_DEVICES": "1"}))
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert lines.count(lines[1]) == 1 and lines[1].startswith("data_size(Bytes):")
    rows = [[c.strip() for c in ln.split("|")] for ln in lines[2:]]
    assert [(r[0], r[3]) for r in rows] == [("4096", "success"), ("8192", "success")]
