"""C programs as processes: the SDK's environment (set_env.sh, `npuemu run ./a.out`,
`npuemu sdk`), many C threads, fork, and exit without aclFinalize (the suite's leak check
then finds no process and no /dev/shm name left)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.cabi.conftest import PROGS
from tests.conftest import _run

pytestmark = pytest.mark.integration


def test_set_env_then_the_samples_build_line(sdk_root, tmp_path):
    """`source set_env.sh` under `set -euo pipefail`, then the samples' g++ line and run."""
    script = (f"set -euo pipefail\nunset LD_LIBRARY_PATH\nsource {sdk_root}/set_env.sh\n"
              f"source {sdk_root}/bin/setenv.bash\n"
              f"g++ -std=c++11 -x c++ {PROGS}/memory.c -I{PROGS} "
              "-I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64 -lascendcl -o a.out\n"
              "./a.out\necho \"home=$ASCEND_TOOLKIT_HOME\"\n")
    res = _run(["bash", "-c", script], None, 120, str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "memory program done" in res.stdout
    assert f"home={sdk_root}" in res.stdout
    for path in ("bin/setenv.bash", "include/acl/acl.h", "lib64/libacl_rt.so", "bin/atc",
                 "runtime/lib64/stub/libascendcl.so", "compiler/include/acl/acl_op_compiler.h",
                 "lib64/libmsprofiler.so", "lib64/libprofapi.so"):
        assert (sdk_root / path).exists(), path


def test_the_samples_cmake_build(sdk_root, tmp_path):
    """A CMakeLists in the samples' shape (DDK_PATH, NPU_HOST_LIB, runtime/include, no
    rpath): configure, build and run after `source set_env.sh`."""
    if shutil.which("cmake") is None or shutil.which("make") is None:
        pytest.skip("needs cmake and make")
    script = (f"set -euo pipefail\nsource {sdk_root}/set_env.sh\n"
              f"cmake -S {PROGS}/cmake_sample -B build -DCMAKE_SKIP_RPATH=TRUE >/dev/null\n"
              "make -C build >/dev/null\n./build/main\n")
    res = _run(["bash", "-c", script], {"DDK_PATH": "", "NPU_HOST_LIB": ""}, 180,
               str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "memory program done" in res.stdout


def test_npuemu_run_a_compiled_program(compile_c, sdk_root, tmp_path):
    exe = compile_c("memory.c")
    res = _run([sys.executable, "-m", "npuemu.tools.cli", "run", str(exe)],
               {"NPUEMU_SDK_HOME": str(sdk_root)}, 120, str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "memory program done" in res.stdout


def test_npuemu_sdk_is_idempotent(sdk_root):
    res = _run([sys.executable, "-m", "npuemu.tools.cli", "sdk", "--prefix", str(sdk_root)],
               None, 120)
    assert res.returncode == 0, res.stderr
    assert "up to date" in res.stdout and f"source {sdk_root}/set_env.sh" in res.stdout


def test_many_c_threads(compile_c, run_c):
    res = run_c(compile_c("threads.c"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "6 threads x 40 rounds ok" in res.stdout


def test_fork_then_exit_without_finalize(compile_c, run_c):
    res = run_c(compile_c("fork_exit.c"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "child malloc -> 207000" in res.stdout
    assert "parent goes on after the fork" in res.stdout


def test_libraries_name_themselves(sdk_root):
    for lib in ("libascendcl.so", "libacl_op_compiler.so", "libacl_rt.so"):
        out = subprocess.run(["readelf", "-d", str(sdk_root / "lib64" / lib)],
                             capture_output=True, text=True, check=True).stdout
        assert f"Library soname: [{lib}]" in out


def test_node_starts_with_the_sdk_python_whatever_is_on_path(compile_c, run_c):
    """The embedded interpreter would name the first ``python3`` on PATH as its executable
    (here the system one, which has no npuemu): the node must start with the Python that
    built the SDK instead."""
    res = run_c(compile_c("memory.c"), env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "memory program done" in res.stdout
