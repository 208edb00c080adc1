"""Fixtures of the C ABI tests: one SDK tree per test run, C/C++ programs compiled against it.

``sdk_root`` builds the tree once per run (``npuemu.host.capi.sdk.ensure``; under xdist the
workers share one folder of the run and its lock, so it is built once). ``compile_c(name,
*flags)`` compiles ``tests/cabi/progs/<name>`` (C with gcc, ``.cpp`` with g++) against it the
way the samples' own builds do (``-I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64
-lascendcl``); ``run_c(exe, *args)`` runs the program as a child with the SDK's
environment, its own embedded node, and the suite's leak checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import _run

PROGS = Path(__file__).parent / "progs"

if shutil.which("gcc") is None or shutil.which("g++") is None:
    pytest.skip("the C ABI tests need gcc and g++", allow_module_level=True)


@pytest.fixture(scope="session")
def sdk_root(tmp_path_factory) -> Path:
    from npuemu.host.capi import sdk

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # one tree for every worker of the run
    return sdk.ensure(base / "npuemu-sdk")


def sdk_env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """What ``source set_env.sh`` gives a program (on top of the suite's child environment)."""
    from npuemu.host.capi import sdk

    keys = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "LD_LIBRARY_PATH", "PATH")
    env = sdk.environment(root)
    return {**{k: env[k] for k in keys}, **(extra or {})}


@pytest.fixture
def compile_c(sdk_root: Path, tmp_path: Path) -> Callable[..., Path]:
    def build(name: str, *flags: str, libs: tuple[str, ...] = ("ascendcl",)) -> Path:
        src = PROGS / name
        cpp = src.suffix == ".cpp"
        exe = tmp_path / src.stem
        cmd = ["g++" if cpp else "gcc", *(["-std=c++11"] if cpp else ["-std=c99"]), "-Wall",
               "-Werror", *flags, str(src), f"-I{sdk_root}/include", f"-I{PROGS}",
               f"-L{sdk_root}/lib64", *(f"-l{lib}" for lib in libs), "-lpthread",
               "-o", str(exe)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stdout}{res.stderr}"
        return exe

    return build


@pytest.fixture
def run_c(sdk_root: Path) -> Callable[..., subprocess.CompletedProcess]:
    def run(exe: Path, *args: str, env: dict[str, str] | None = None,
            timeout: float = 90, cwd: str | None = None) -> subprocess.CompletedProcess:
        return _run([str(exe), *args], sdk_env(sdk_root, env), timeout, cwd)

    return run
