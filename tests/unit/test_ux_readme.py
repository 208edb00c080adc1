"""The README stays true to the code: its environment-variable table is exactly
``shared.config.VARIABLES``, its command table names every ``npuemu`` subcommand, and the
commands its examples run exist with the options they use."""

from __future__ import annotations

import argparse
import pathlib
import re
import shlex

import pytest

from npuemu.host.models import atc as model_atc
from npuemu.shared import config
from npuemu.tools import cli

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_environment_table_is_config_variables():
    rows = [ln for ln in _section("Environment variables").splitlines() if ln.startswith("| `")]
    documented = set()
    for row in rows:
        documented.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1]))
    assert documented == set(config.VARIABLES), (sorted(documented - set(config.VARIABLES)),
                                                 sorted(set(config.VARIABLES) - documented))


def test_command_table_names_every_subcommand():
    table = _section("Command line")
    sub = next(a for a in cli.build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    missing = [name for name in sub.choices if f"`npuemu {name}" not in table]
    assert not missing, missing


def _readme_atc_commands() -> list[list[str]]:
    text = README.replace("\\\n", " ")
    return [shlex.split(line.split("#")[0])[2:] for line in text.splitlines()
            if line.startswith("npuemu atc --model")]


def test_readme_has_atc_examples():
    assert len(_readme_atc_commands()) >= 2


@pytest.mark.parametrize("argv", _readme_atc_commands())
def test_readme_atc_examples_parse_and_name_a_soc(argv):
    args = model_atc.parser().parse_args(argv)
    assert args.soc_version and args.framework == 5 and args.output
