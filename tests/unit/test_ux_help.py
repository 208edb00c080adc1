"""``--help`` of every command the README documents describes every option it takes."""

from __future__ import annotations

import argparse

import pytest

from npuemu.host.models import atc as model_atc
from npuemu.tools import atc, cli, hccl_test, inject, memory, msnpureport, msprof, smi

_SELF = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def _parsers(parser: argparse.ArgumentParser, path: str):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


PARSERS = {
    "npuemu": cli.build_parser,
    "npuemu atc (model mode)": model_atc.parser,
    "npuemu atc --singleop": atc.single_op_parser,
    "npuemu hccl-test": hccl_test.build_parser,
    "npuemu inject": inject._parser,
    "npuemu memory": memory._parser,
    "npuemu msnpureport": msnpureport._old_parser,
    "npuemu msnpureport (subcommands)": msnpureport._new_parser,
    "npuemu msprof": msprof.build_parser,
    "npuemu smi": smi._parser,
}


@pytest.mark.parametrize("command", PARSERS)
def test_every_option_has_help(command):
    missing = []
    for path, parser in _parsers(PARSERS[command](), command):
        for action in parser._actions:
            if not isinstance(action, _SELF) and not (action.help or "").strip():
                missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing
