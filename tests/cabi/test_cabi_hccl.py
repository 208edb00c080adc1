"""HCCL from C: two processes on one node all-reduce (and broadcast, all-gather, send/recv)
through libhccl.so; a Python program loads libhccl.so and libascendcl.so with ctypes, as
serving engines' HCCL wrappers do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cabi.conftest import sdk_env
from tests.conftest import _OUR_PIDS, _run, child_env

pytestmark = pytest.mark.integration
PROG = Path(__file__).parent.parent / "progs" / "cabi_ctypes_hccl.py"


def test_two_process_all_reduce(compile_c, sdk_root, shared_node, tmp_path):
    name = shared_node(devices=2, hbm="256M", ddr="16M")
    exe = compile_c("hccl_allreduce.c", libs=("hccl", "ascendcl"))
    env = child_env(sdk_env(sdk_root, {"NPUEMU_NODE": name}))
    procs = [subprocess.Popen([str(exe), str(rank), str(tmp_path)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for rank in (0, 1)]
    _OUR_PIDS.update(p.pid for p in procs)
    outs = []
    for proc in procs:
        try:
            outs.append(proc.communicate(timeout=120)[0])
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            pytest.fail("an HCCL rank did not finish in time")
    for rank, (proc, out) in enumerate(zip(procs, outs, strict=True)):
        assert proc.returncode == 0, out
        assert f"rank {rank} all_reduce ok" in out and f"rank {rank} done" in out


HCCL_EXAMPLE_FLAGS = ("-std=c++14", "-fstack-protector-strong", "-fPIE", "-pie", "-O2", "-s",
                      "-Wl,-z,relro", "-Wl,-z,now", "-Wl,-z,noexecstack",
                      "-Wl,--copy-dt-needed-entries")


def test_one_process_n_threads_as_the_hccl_examples(compile_c, run_c):
    exe = compile_c("hccl_threads.cpp", *HCCL_EXAMPLE_FLAGS, libs=("hccl", "ascendcl"))
    res = run_c(exe, env={"NPUEMU_DEVICES": "4", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"},
                timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "4 ranks from 4 threads: all ok" in res.stdout


def test_ctypes_bindings_load_both_libraries(sdk_root):
    env = sdk_env(sdk_root, {"NPUEMU_SDK_LIB": str(sdk_root / "lib64")})
    res = _run([sys.executable, str(PROG)], env, 120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every symbol resolved" in res.stdout
    assert "all_reduce over 2 ranks ok" in res.stdout
