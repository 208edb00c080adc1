"""A user's first hour: the version three ways, help on every option, host logs that stay
out of $HOME, and `npuemu inject` refusing faults that could never fire."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

import npuemu
from npuemu.tools import cli, inject, msnpureport, smi
from npuemu.tools.bench import runner

VERSION = importlib.metadata.version("npuemu")


def test_version_three_ways(npuemu_cli):
    assert npuemu.__version__ == VERSION
    assert npuemu_cli("--version").stdout == f"npuemu {VERSION}\n"
    for cmd in ([sys.executable, "-m", "npuemu", "--version"],
                [str(Path(sys.executable).with_name("npuemu")), "--version"]):
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        assert (res.returncode, res.stdout) == (0, f"npuemu {VERSION}\n"), (cmd, res.stderr)


def test_python_m_npuemu_is_the_command():
    res = subprocess.run([sys.executable, "-m", "npuemu", "inject", "-h"], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0 and res.stdout.startswith("usage: npuemu inject")


def _parsers() -> list[argparse.ArgumentParser]:
    out, todo = [], [cli.build_parser(), inject._parser(), smi._parser(),
                     msnpureport._new_parser(), msnpureport._old_parser(), runner._parser()]
    while todo:
        parser = todo.pop()
        out.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return out


def test_every_option_of_every_command_has_help():
    missing = [f"{p.prog} {'/'.join(a.option_strings)}" for p in _parsers()
               for a in p._actions if a.option_strings and not a.help]
    assert not missing
    assert len(_parsers()) >= 15  # npuemu, its subcommands, and the tools' own parsers


def test_host_logs_go_to_the_process_log_path_not_home(run_py, tmp_path):
    """conftest gives every test (and its children) its own ASCEND_PROCESS_LOG_PATH."""


    home = tmp_path / "home"
    home.mkdir()
    res = run_py("""
        from npuemu.host import acl
        print(acl.rt.malloc(64, 0)[1])   # fails before any node: no context (107002)
    """, env={"HOME": str(home)})
    assert res.returncode == 0 and res.stdout.split() == ["107002"], res.stderr
    plogs = list(Path(os.environ["ASCEND_PROCESS_LOG_PATH"]).glob("debug/plog/plog-*.log"))
    assert len(plogs) == 1 and "107002" in plogs[0].read_text()
    assert not list(home.iterdir())


@pytest.mark.parametrize(("args", "text"), [
    (["aicore", "kernel=relu"], "kernel 'relu' runs on aivector, not aicore"),
    (["aicpu", "kernel=matmul", "nth=2"], "runs on aicore, not aicpu"),
    (["ecc_single"], "ecc_single needs ptr="),
    (["link"], "link needs peer="),
    (["link", "peer=x"], "link peer='x': must be an int"),
    (["hang", "count=0"], "must be >= 1"),
    (["lost", "now=1"], "lost takes no parameters"),
])
def test_inject_refuses_with_one_line_before_any_node(npuemu_cli, args, text):
    res = npuemu_cli("inject", "--name", "no-such-node", "-d", "0", *args)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines() == [res.stderr.strip()] and text in res.stderr, res.stderr


def test_inject_refuses_a_link_outside_the_hccs_group(npuemu_cli, node_name, status, tmp_path):
    res = npuemu_cli("start", "--name", node_name, "--devices", "3", "--hbm", "64M", "--ddr",
                     "64M", env={"NPUEMU_TOPOLOGY": "0-1,2", "TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    res = npuemu_cli("inject", "--name", node_name, "-d", "0", "link", "peer=2")
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("npuemu inject: peer 2 is outside device 0's HCCS group {0,1}: "
                          "no P2P copy uses that link\n")
    for peer in ("0", "3"):
        res = npuemu_cli("inject", "--name", node_name, "-d", "0", "link", f"peer={peer}")
        assert res.returncode == 2 and "must be another device" in res.stderr
    res = npuemu_cli("inject", "--name", node_name, "-d", "0", "link", "peer=1")
    assert res.returncode == 0, res.stderr
    assert status(node_name)["devices"][0]["health"] == "OK"


def test_smi_says_its_power_and_temperature_are_a_model(npuemu_cli):
    res = npuemu_cli("smi", "info", "-h")
    assert res.returncode == 0 and "not measured" in " ".join(res.stdout.split())
    assert (smi.power_w(0), smi.power_w(50), smi.power_w(100)) == (90.0, 220.0, 350.0)
    assert (smi.temp_c(0), smi.temp_c(50), smi.temp_c(100)) == (35, 52, 70)
