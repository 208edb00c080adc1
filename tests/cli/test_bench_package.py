"""The bench as a package (no figure is run here; tests/cli/test_bench.py runs two, end to end):
its public names, the order of its figure families, the optional extra figure modules, and
the one size formatter that the tools share."""

from __future__ import annotations

import sys

import pytest

from npuemu.tools import bench, status
from npuemu.tools.bench import Context, Record, Target, figure
from npuemu.tools.sizes import GiB, KiB, MiB, format_size


def test_public_names_and_table_order():
    assert {"figure", "Context", "Record", "Target"} <= set(bench.__all__)
    assert (figure.__module__, Context.__module__) == ("npuemu.tools.bench.registry",) * 2
    assert (Record.__module__, Target.__module__) == ("npuemu.tools.bench.records",) * 2
    assert [f.key for f in bench.FIGURES][:10] == [
        "sync-round-trip", "idle-cpu", "node-start-up", "copy-bandwidth", "malloc-free",
        "execution", "card", "card-sharing", "stream-create-destroy", "capture"]


EXTRA = '''
from npuemu.tools.bench import Context, Record, Target, figure


@figure("extra-demo", devices=1)
def fig_extra(ctx: Context) -> list[Record]:
    return [Record("extra", 1.0, "s", "limit", 2.0, Target("<= 1x", "ratio", "<=", 1.0))]
'''


def test_an_extra_figure_module_is_imported_when_it_exists(tmp_path, monkeypatch):
    (tmp_path / "npuemu_extra_figs.py").write_text(EXTRA)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(bench, "EXTRA_FIGURE_MODULES", ("npuemu_extra_nowhere",
                                                        "npuemu_extra_figs"))
    before = list(bench.FIGURES)
    try:
        bench._import_figures()  # the families are imported already: nothing twice
        added = bench.FIGURES[len(before):]
        assert [(f.key, f.devices) for f in added] == [("extra-demo", 1)]
        (rec,) = added[0].func(None)
        assert rec.ratio == 0.5 and rec.target.met(rec)
    finally:
        bench.FIGURES[:] = before
        sys.modules.pop("npuemu_extra_figs", None)


@pytest.mark.parametrize(("n", "digits", "text"), [
    (None, 1, "-"), (0, 1, "0 B"), (1023, 1, "1023 B"), (KiB, 1, "1.0 KiB"),
    (3 * MiB // 2, 1, "1.5 MiB"), (64 * GiB, 1, "64.0 GiB"), (4 * KiB, 0, "4 KiB"),
    (256 * MiB, 0, "256 MiB")])
def test_one_size_formatter_for_every_tool(n, digits, text):
    assert format_size(n, digits) == text
    if digits == 1:
        assert status.fmt_bytes(n) == text
