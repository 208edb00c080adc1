"""The pytest plugin (``npuemu.tools.pytest_plugin``, entry point ``pytest11``) as a user
meets it: a separate ``pytest`` run on a small example suite (plugin_suite/) that uses the
node and card fixtures, the ``npu`` marker and the fault context manager."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
from pathlib import Path

from npuemu.shared import shm

SUITE = Path(__file__).with_name("plugin_suite") / "test_example.py"


def test_the_plugin_is_registered_as_a_pytest_entry_point():
    points = importlib.metadata.entry_points(group="pytest11")
    assert [p.value for p in points if p.name == "npuemu"] == ["npuemu.tools.pytest_plugin"]


def test_a_users_suite_with_the_plugin(run_pytest, tmp_path):
    shutil.copy(SUITE, tmp_path / "test_example.py")
    res = run_pytest("-q", "-W", "error::pytest.PytestUnknownMarkWarning", "test_example.py",
                     cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"\b10 passed\b", res.stdout), res.stdout
    # the session's node is stopped at the end of the run
    assert not [e for e in shm.leftovers() if ".pytest-" in e]


def test_markers_are_listed_and_the_plugin_can_be_turned_off(run_pytest, tmp_path):
    res = run_pytest("--markers", cwd=str(tmp_path))
    assert "@pytest.mark.npu(cards=1)" in res.stdout
    (tmp_path / "test_off.py").write_text("def test_x(npu_card):\n    pass\n")
    res = run_pytest("-q", "-p", "no:npuemu", "test_off.py", cwd=str(tmp_path))
    assert res.returncode == 1 and "fixture 'npu_card' not found" in res.stdout


def test_a_node_given_by_npuemu_node_is_used_and_too_few_cards_skip(run_pytest, shared_node,
                                                                     tmp_path):
    name = shared_node(devices=1, hbm="64M", ddr="64M")
    (tmp_path / "test_given.py").write_text(
        "import pytest\n"
        "def test_given(npu_node, npu_card):\n"
        f"    assert (npu_node.name, npu_node.cards, npu_node.started) == ({name!r}, 1, False)\n"
        "@pytest.mark.npu(cards=2)\n"
        "def test_two():\n"
        "    pass\n")
    res = run_pytest("-q", "-rs", "test_given.py", cwd=str(tmp_path), env={"NPUEMU_NODE": name})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 passed, 1 skipped" in res.stdout and f"node '{name}' has 1" in res.stdout
