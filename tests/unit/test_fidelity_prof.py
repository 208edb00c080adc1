"""msprof's analysis as a user reads it, on synthetic runs: the bottleneck advice when the
engine a stream uses is saturated, the plot's per-kernel colours, labels and a legend of
only what occurred, a re-export leaving one copy of each file, the aligned console summary
and a missing ``--application`` refused before any folder is made."""

from __future__ import annotations

import os

import pytest

from npuemu.host.prof import export, model, plot, waits
from npuemu.host.prof.model import Task
from npuemu.tools import msprof


def _task(stream, seq, kind, start, end, engine="scheduler", eslot=0, egen=0, name=None):
    return Task(0, stream, stream, seq, kind, name or kind, engine, start - 5, start, end,
                1 << 20, 0, eslot, egen, 0)


def _compute_bound_run(gap: int) -> model.Run:
    """Stream 1 runs kernels on the AI Core (``gap`` ns apart) and records after each; stream
    2 waits for each record."""
    tasks, t = [], 0
    for i in range(1, 9):
        tasks.append(_task(1, 2 * i - 1, "AI_CORE", t, t + 1000, "aicore", name="k_MatMul"))
        tasks.append(_task(1, 2 * i, "EVENT_RECORD", t + 1000, t + 1001, eslot=5, egen=i))
        tasks.append(_task(2, i, "EVENT_WAIT", t, t + 1002, eslot=5, egen=i))
        t += 1001 + gap
    run = model.Run("x", {"pid": 1, "wall_offset_ns": 0})
    run.devices[0] = model.Device(0, {"dropped": 0, "submitters": []}, tasks, [])
    model._link_waits(run)
    return run


def test_a_saturated_engine_is_named_the_bottleneck_not_the_stream_count():
    report = waits.analyze(_compute_bound_run(gap=0))
    text = waits.format_report(report)
    assert report.devices[0].engine_busy["aicore"] > 0.98
    assert "the engine is the bottleneck" in text and "aicore engine" in text
    assert "split its work across several streams" not in text


def test_an_engine_with_room_gets_the_split_advice():
    text = waits.format_report(waits.analyze(_compute_bound_run(gap=1500)))
    assert "split its work across several streams" in text
    assert "the engine is the bottleneck" not in text


def _kernels_run() -> model.Run:
    tasks = [_task(1, 1, "AI_CORE", 0, 5000, "aicore", name="k_MatMul"),
             _task(1, 2, "AI_VECTOR_CORE", 5000, 9000, "aivector", name="k_Add"),
             _task(1, 3, "AI_VECTOR_CORE", 9000, 9100, "aivector", name="k_Relu")]
    run = model.Run("x", {"pid": 1, "wall_offset_ns": 0})
    run.devices[0] = model.Device(0, {"dropped": 0, "submitters": []}, tasks, [])
    return run


def test_plot_colours_each_kernel_and_lists_only_what_occurred(tmp_path):
    run = _kernels_run()
    colours = plot.kernel_colours(run.all_tasks())
    assert list(colours) == ["k_MatMul", "k_Add", "k_Relu"]  # by time, one colour each
    assert len(set(colours.values())) == 3
    labels = [h.get_label() for h in plot.legend_handles(run.all_tasks(), colours)]
    assert labels == ["k_MatMul", "k_Add", "k_Relu"]  # no copies, waits or others here
    path = plot.plot(run, str(tmp_path / "t.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_legend_has_copies_only_when_there_were_copies():
    tasks = [*_kernels_run().all_tasks(), _task(1, 4, "MEMCPY_ASYNC", 9100, 9500, "dma")]
    labels = [h.get_label() for h in plot.legend_handles(tasks, plot.kernel_colours(tasks))]
    assert labels[-1] == "copy / memset" and "event wait (blocked)" not in labels


def test_a_second_export_leaves_one_copy_of_each_file(tmp_path, monkeypatch):
    run = _kernels_run()
    monkeypatch.setattr(export, "load", lambda _d: run)
    prof = tmp_path / "PROF_000001_20260101000000000_AAAAAAAA"
    prof.mkdir()
    out = prof / export.OUTPUT
    out.mkdir()
    (out / "msprof_20200101000000.json").write_text("[]")  # an earlier export's
    (out / "waits_20200101000000.txt").write_text("old")
    (out / "notes.txt").write_text("the user's")
    export.export(str(prof))
    export.export(str(prof))
    names = sorted(os.listdir(out))
    kinds = [n.rsplit("_", 1)[0] for n in names if export.EXPORTED.fullmatch(n)]
    assert sorted(kinds) == sorted(set(kinds)) and "msprof" in kinds and "waits" in kinds
    assert "msprof_20200101000000.json" not in names and "notes.txt" in names


def test_the_console_summary_is_aligned():
    text = msprof.table([["Job Info", "Device ID", "Dir Name", "Tasks"],
                         ["NA", "0", "PROF_000001_x", "12"], ["NA", "10", "PROF_000001_x", "7"]])
    lines = text.splitlines()
    assert lines[1].index("PROF_") == lines[2].index("PROF_") == lines[0].index("Dir Name")
    assert lines[1].endswith("12") and lines[2].endswith(" 7")  # numbers right-aligned


@pytest.mark.parametrize("application, what", [
    ("python no_such_script.py --x", "script 'no_such_script.py'"),
    ("python -m no_such_module_here", "module 'no_such_module_here'")])
def test_a_missing_application_is_refused_and_makes_no_folder(tmp_path, capsys, application,
                                                              what):
    output = tmp_path / "out"
    code = msprof.main([f"--application={application}", f"--output={output}"])
    assert code == 2 and not output.exists()
    err = capsys.readouterr().err
    assert what in err and ("does not exist" in err or "cannot be found" in err), err
