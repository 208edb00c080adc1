"""Small checks of the CLI tools' argument handling, as the README documents it."""

from __future__ import annotations

import pytest

from npuemu.tools import inject


def test_inject_link_clear_accepts_1_as_the_readme_writes_it():
    params = inject.parse_params(["peer=1", "clear=1"])
    inject.check("link", params)
    assert params == {"peer": 1, "clear": True}
    params = inject.parse_params(["peer=1", "clear=0"])
    inject.check("link", params)
    assert params["clear"] is False
    with pytest.raises(ValueError, match="must be true or false"):
        inject.check("link", inject.parse_params(["peer=1", "clear=2"]))


def test_bench_models_is_skipped_with_a_note_without_onnxruntime(monkeypatch):
    """After the README's first command (no test extra) `npuemu bench` still runs: the
    models figure, whose limits are onnxruntime timings, says why it has no rows."""
    import importlib.util

    from npuemu.tools.bench import models
    from npuemu.tools.bench.registry import Context
    from npuemu.tools.bench.track import Tracker

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    ctx = Context(True, Tracker())
    assert models.fig_models(ctx) == []
    assert len(ctx.notes) == 1 and "onnxruntime" in ctx.notes[0]


def test_stop_refused_says_how_to_force(monkeypatch, capsys):
    """The supervisor refuses a stop while programs are attached; the user is told the
    exact command that goes on anyway and what their programs then get."""
    import argparse

    from npuemu.tools import cli

    class _Sock:
        def close(self):
            pass

    monkeypatch.setattr(cli.control, "connect", lambda name, timeout: _Sock())
    monkeypatch.setattr(cli.control, "call",
                        lambda sock, msg: [207006, "node 'n' is in use by pid 4242", [4242]])
    code = cli.cmd_stop(argparse.Namespace(name="n", force=False))
    err = capsys.readouterr().err
    assert code == 1
    assert err == ("npuemu stop: node 'n' is in use by pid 4242; `npuemu stop --force` ends "
                   "their sessions (their calls then fail with 507901)\n")


def test_msprof_without_a_mode_says_what_to_give(tmp_path, monkeypatch, capsys):
    """`npuemu msprof` alone is a usage error (2) naming the modes, whatever directory it
    runs in, not a search for PROF_* directories."""
    from npuemu.tools import msprof

    monkeypatch.chdir(tmp_path)
    assert msprof.main([]) == 2
    assert capsys.readouterr().err == (
        "[ERROR] give --application, --export=on, --analyze or --plot\n")
