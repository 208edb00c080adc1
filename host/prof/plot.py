"""A picture of a run: ``plot(run, "timeline.png")`` draws one lane per stream and per engine
of each card (milliseconds from the first task), copies, kernels and other tasks in their own
colours and event waits shaded, with matplotlib (Agg backend: no display needed). The file
is created 0600 whatever the umask (``shared/private.py``)."""

from __future__ import annotations

import os

from npuemu.host.prof.model import COMPUTE, COPIES, Run, Task
from npuemu.shared import private

COLOURS = {"copy": "#4C78A8", "compute": "#F58518", "wait": "#E45756", "other": "#54A24B"}


def _colour(t: Task) -> str:
    if t.kind in COPIES:
        return COLOURS["copy"]
    if t.kind in COMPUTE:
        return COLOURS["compute"]
    return COLOURS["wait"] if t.kind == "EVENT_WAIT" else COLOURS["other"]


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
    from matplotlib.patches import Patch

    rows = lanes(run)
    tasks = run.all_tasks()
    origin = min((t.start_ns for t in tasks), default=0)
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.45 * max(len(rows), 1)))
    for i, (_label, lane) in enumerate(rows):
        y = len(rows) - 1 - i
        for t in lane:
            start, width = (t.start_ns - origin) / 1e6, max(t.dur_ns / 1e6, 1e-4)
            if t.kind == "EVENT_WAIT":
                ax.broken_barh([(start, width)], (y - 0.4, 0.8), facecolors=_colour(t),
                               alpha=0.3, hatch="//", edgecolor=_colour(t), linewidth=0)
            else:
                ax.broken_barh([(start, width)], (y - 0.35, 0.7), facecolors=_colour(t))
    ax.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)])
    ax.set_xlabel("ms since the first task")
    ax.set_title(f"npuemu timeline: {len(tasks)} tasks"
                 + (f", {run.dropped} records dropped" if run.dropped else ""))
    ax.legend(handles=[Patch(color=COLOURS["copy"], label="copy / memset"),
                       Patch(color=COLOURS["compute"], label="kernel"),
                       Patch(color=COLOURS["wait"], alpha=0.3, label="event wait (blocked)"),
                       Patch(color=COLOURS["other"], label="record / callback / other")],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fmt = os.path.splitext(path)[1][1:].lower() or "png"
    with private.open_file(path, "wb") as f:
        fig.savefig(f, format=fmt, dpi=110)
    plt.close(fig)
    return path
