"""The first hour of a new user, from the README: its snippets run as written and check what
they call (the pyACL one stops with the code and the reason, the HCCL one defines what it
uses), the pytest plugin's example file passes under a plain ``pytest`` run (``inject_fault``
takes the ``npu_card`` fixture's ``Device``), and ``NPUEMU_NODE`` naming a node that is not
running says why on stderr, once, and in the plog."""

from __future__ import annotations

import pathlib
import re

import pytest

pytestmark = pytest.mark.integration
README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
SMALL = {"NPUEMU_DEVICES": "4", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}


def snippet(after: str, lang: str = "python") -> str:
    """The first ``lang`` code block of the README after the text ``after``."""
    section = README[README.index(after):]
    start = section.index(f"```{lang}\n") + len(f"```{lang}\n")
    return section[start:section.index("```", start)]


def test_the_pyacl_snippet_checks_every_return_code():
    """Every call returning a code is checked: wrapped in ``check(...)`` or its ``ret`` checked
    on the next line; no call's result is thrown away."""
    lines = snippet("## The pyACL face").splitlines()
    for i, line in enumerate(lines):
        assert not line.startswith("acl."), f"unchecked call: {line}"
        if re.search(r"\bret = acl\.", line):
            assert lines[i + 1].startswith("check(ret, "), (line, lines[i + 1])
    assert sum(ln.startswith("check(acl.") for ln in lines) >= 3


def test_the_pyacl_snippet_says_why_it_stops(run_py):
    """With ``NPUEMU_NODE`` naming no running node the snippet stops at set_device with the
    code and the reason, and the runtime has said why on stderr once."""
    res = run_py(snippet("## The pyACL face"), env={"NPUEMU_NODE": "no-such-node-here"})
    assert res.returncode == 1
    assert "set_device failed: 207004" in res.stderr and "no-such-node-here" in res.stderr
    assert res.stderr.count("npuemu: NPUEMU_NODE=no-such-node-here") == 1, res.stderr


def test_the_missing_node_reason_reaches_the_plog(run_py, tmp_path):
    res = run_py("import acl\nprint(acl.rt.set_device(0), acl.rt.get_device_count()[1])",
                 env={"NPUEMU_NODE": "no-such-node-here",
                      "ASCEND_PROCESS_LOG_PATH": str(tmp_path)})
    assert res.returncode == 0 and res.stdout.split() == ["207004", "207004"], res.stdout
    assert res.stderr.count("no npuemu node named 'no-such-node-here'") == 1, res.stderr
    plog = "".join(p.read_text() for p in tmp_path.glob("debug/plog/plog-*.log"))
    assert "[ERROR]" in plog and "NPUEMU_NODE=no-such-node-here" in plog, plog


def test_the_hccl_snippet_runs_as_written(run_py):
    res = run_py(snippet("### Collective communication (HCCL)") + "\nprint('hccl ok')\n",
                 env=SMALL, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("hccl ok")


def test_the_pythonic_snippet_runs_as_written(run_py):
    res = run_py(snippet("## The Pythonic face"), env=SMALL, timeout=120)
    assert res.returncode == 0, res.stderr


def test_the_plugin_example_passes_under_pytest(run_pytest, tmp_path):
    (tmp_path / "test_npu.py").write_text(snippet("## Testing your own code (pytest plugin)"))
    res = run_pytest("-q", "test_npu.py", cwd=str(tmp_path), timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 passed" in res.stdout, res.stdout
