"""Figure children run through the bench package's own entry point (``python -m
npuemu.tools.bench --child-of MODULE``), never as ``python -m npuemu.tools.bench.<module>``:
the package imports its figure modules, so runpy would run the module a second time and
print a RuntimeWarning into every bench run."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import npuemu.tools.bench as bench
from npuemu.tools.bench import runner

BENCH_DIR = pathlib.Path(bench.__file__).parent


def test_no_figure_module_is_run_as_a_main_module():
    for path in BENCH_DIR.glob("*.py"):
        text = path.read_text()
        assert '"-m", "npuemu.tools.bench.' not in text, path.name
        if path.name != "__main__.py":
            assert 'if __name__ == "__main__"' not in text, path.name


def test_child_command_goes_through_the_package():
    cmd = runner.child_command("npuemu.tools.bench.ops", "--disk-child", "out.json")
    assert cmd == [sys.executable, "-m", "npuemu.tools.bench", "--child-of",
                   "npuemu.tools.bench.ops", "--disk-child", "out.json"]


def test_child_of_refuses_a_module_outside_the_package(run_py):
    res = run_py("""
        import sys
        from npuemu.tools.bench.runner import entry
        sys.exit(entry(["--child-of", "os"]))
    """)
    assert res.returncode == 2 and "--child-of needs a module of npuemu.tools.bench" in res.stderr


@pytest.mark.integration
def test_ops_child_runs_without_a_runpy_warning(run_py, tmp_path):
    """The ops figure's disk-cache child, as the bench starts it, with RuntimeWarning an
    error (a runpy warning would make it fail)."""
    out = tmp_path / "disk.json"
    args = runner.child_command("npuemu.tools.bench.ops", "--disk-child", str(out))[1:]
    res = run_py(f"""
        import subprocess, sys
        cmd = [sys.executable, "-W", "error::RuntimeWarning", *{args!r}]
        sys.exit(subprocess.run(cmd, timeout=240).returncode)
    """, env={"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M",
              "ASCEND_CACHE_PATH": str(tmp_path / "cache")}, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "RuntimeWarning" not in res.stderr
    assert json.loads(out.read_text())["compiles"] >= 1
