"""A picture of a run: ``plot(run, "timeline.png")`` draws one lane per stream and per engine
of each card (milliseconds from the first task), with matplotlib (Agg backend: no display
needed). Each kernel (by name) has a colour of its own and its name written on its bars
where they are wide enough; copies, event waits (shaded) and other tasks have one colour
each. The legend lists only what the run has: its kernels (the ``MAX_KERNELS`` with the most
time; the rest share one "other kernels" entry), and copies, waits or other tasks only if
there were any. The file is created 0600 whatever the umask (``shared/private.py``)."""

from __future__ import annotations

import os
from typing import Any

from npuemu.host.prof.model import COMPUTE, COPIES, Run, Task
from npuemu.shared import private

COLOURS = {"copy": "#4C78A8", "wait": "#E45756", "other": "#54A24B", "kernel": "#9D755D"}
"""Colours of the task kinds that are not kernels ("kernel": the other kernels' one)."""
KERNEL_COLOURS = ("#F58518", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC",
                  "#88D27A", "#D67195", "#43989A", "#F2CF5B", "#6A3D9A")
"""One colour per kernel name, in order of total time (at most ``MAX_KERNELS``)."""
MAX_KERNELS = len(KERNEL_COLOURS)
LABEL_SHARE = 0.06
"""A bar gets its kernel's name written on it when it spans this share of the time axis."""
LEGEND = {"copy": "copy / memset", "wait": "event wait (blocked)",
          "other": "record / callback / other", "kernel": "other kernels"}


def kernel_colours(tasks: list[Task]) -> dict[str, str]:
    """A colour for each of the ``MAX_KERNELS`` kernel names with the most time."""
    total: dict[str, int] = {}
    for t in tasks:
        if t.kind in COMPUTE:
            total[t.name] = total.get(t.name, 0) + t.dur_ns
    ranked = sorted(total, key=lambda name: (-total[name], name))[:MAX_KERNELS]
    return dict(zip(ranked, KERNEL_COLOURS, strict=False))


def category(t: Task) -> str:
    if t.kind in COPIES:
        return "copy"
    if t.kind in COMPUTE:
        return "kernel"
    return "wait" if t.kind == "EVENT_WAIT" else "other"


def lanes(run: Run) -> list[tuple[str, list[Task]]]:
    """``(label, tasks)`` per lane, top to bottom: each card's streams, then its engines."""
    out = []
    for dev, device in sorted(run.devices.items()):
        for sid in sorted({t.stream for t in device.tasks}):
            out.append((f"dev {dev} stream {sid}", [t for t in device.tasks if t.stream == sid]))
        for engine in sorted({t.engine for t in device.tasks} - {"scheduler"}):
            out.append((f"dev {dev} {engine}", [t for t in device.tasks if t.engine == engine]))
    return out


def plot(run: Run, path: str) -> str:
    """Draw ``run`` into ``path`` (PNG, SVG or PDF by its extension); returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = lanes(run)
    tasks = run.all_tasks()
    origin = min((t.start_ns for t in tasks), default=0)
    span_ms = (max((t.end_ns for t in tasks), default=origin) - origin) / 1e6 or 1.0
    kernels = kernel_colours(tasks)
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.45 * max(len(rows), 1)))
    for i, (_label, lane) in enumerate(rows):
        _draw_lane(ax, len(rows) - 1 - i, lane, origin, span_ms, kernels)
    ax.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)])
    ax.set_xlabel("ms since the first task")
    ax.set_title(f"npuemu timeline: {len(tasks)} tasks"
                 + (f", {run.dropped} records dropped" if run.dropped else ""))
    handles = legend_handles(tasks, kernels)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fmt = os.path.splitext(path)[1][1:].lower() or "png"
    with private.open_file(path, "wb") as f:
        fig.savefig(f, format=fmt, dpi=110)
    plt.close(fig)
    return path


def colour(t: Task, kernels: dict[str, str]) -> str:
    kind = category(t)
    return kernels.get(t.name, COLOURS["kernel"]) if kind == "kernel" else COLOURS[kind]


def _draw_lane(ax: Any, y: int, lane: list[Task], origin: int, span_ms: float,
               kernels: dict[str, str]) -> None:
    for t in lane:
        start, width = (t.start_ns - origin) / 1e6, max(t.dur_ns / 1e6, 1e-4)
        face = colour(t, kernels)
        if t.kind == "EVENT_WAIT":
            ax.broken_barh([(start, width)], (y - 0.4, 0.8), facecolors=face,
                           alpha=0.3, hatch="//", edgecolor=face, linewidth=0)
            continue
        ax.broken_barh([(start, width)], (y - 0.35, 0.7), facecolors=face)
        if t.kind in COMPUTE and width >= LABEL_SHARE * span_ms:
            ax.text(start + width / 2, y, t.name, ha="center", va="center",
                    fontsize="x-small", clip_on=True)


def legend_handles(tasks: list[Task], kernels: dict[str, str]) -> list[Any]:
    """The legend's entries: the run's kernels by name, then the other kinds it has."""
    from matplotlib.patches import Patch

    present = {category(t) for t in tasks}
    handles = [Patch(color=c, label=name) for name, c in kernels.items()]
    others = {t.name for t in tasks if t.kind in COMPUTE} - set(kernels)
    kinds = [k for k in ("kernel", "copy", "wait", "other") if k in present
             and (k != "kernel" or others)]
    handles += [Patch(color=COLOURS[k], alpha=0.3 if k == "wait" else 1.0, label=LEGEND[k])
                for k in kinds]
    return handles
