"""The waits report: who waits on whom, and two diagnoses, found from a run.

Per stream of each card, over the card's window (first task start to last task end):
``busy`` (union of its tasks other than event waits), ``waiting`` (union of its event waits:
the time it was blocked), ``idle`` (the rest), and the streams whose event records it waited
for longest. Per card: the copy/compute overlap achieved (time copies and kernels ran at once,
over the shorter of the two) and each engine's busy share.

Diagnoses:

1. **Bottleneck stream**: the stream that made others wait longest (summed blocked time of
   the waits its records released), if that is at least ``BOTTLENECK_SHARE`` of the window.
   If it mixes copies and compute while an engine it uses idles, the advice is to move the
   copies to their own stream; if it is all compute (or all copies), to split the work
   across streams, unless the engine its tasks run on is already busy at least
   ``ENGINE_SATURATED_SHARE`` of the window: then the engine is the bottleneck (more streams
   cannot run more of its work at once) and the advice says so.
2. **Shared stream**: a stream that received tasks from several host threads during the run
   (the host notes each turn: a task submitted by another thread than the previous one):
   their submissions serialise on it; give each thread its own stream, within the per-card
   limit of active streams (``stream_limit``: the emulated one, ``NPUEMU_MAX_STREAMS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from npuemu.host.prof.model import COMPUTE, COPIES, Run, Task
from npuemu.shared.config import WorkerSettings

BOTTLENECK_SHARE = 0.05
ENGINE_IDLE_SHARE = 0.3
ENGINE_SATURATED_SHARE = 0.9


def stream_limit() -> int:
    """Streams per card the emulated cards allow (``NPUEMU_MAX_STREAMS`` as this process
    reads it, default 1024): what the shared-stream advice may promise."""
    return WorkerSettings.from_env().max_streams


@dataclass
class StreamStats:
    dev: int
    stream: int
    window_ns: int
    busy_ns: int = 0
    waiting_ns: int = 0
    copies_ns: int = 0
    compute_ns: int = 0
    tasks: int = 0
    waited_on: dict[int, int] = field(default_factory=dict)  # producer stream -> ns
    caused_ns: int = 0  # time other streams spent blocked on this one's records
    threads: dict[str, int] = field(default_factory=dict)  # host thread -> turns it took
    engines: set[str] = field(default_factory=set)  # engines its copies and kernels ran on

    @property
    def idle_ns(self) -> int:
        return max(self.window_ns - self.busy_ns - self.waiting_ns, 0)

    def share(self, ns: int) -> float:
        return ns / self.window_ns if self.window_ns else 0.0


@dataclass
class DeviceStats:
    dev: int
    window_ns: int
    copy_ns: int
    compute_ns: int
    overlap_ns: int
    engine_busy: dict[str, float]  # engine -> busy share of the window
    dropped: int

    @property
    def overlap(self) -> float:
        shorter = min(self.copy_ns, self.compute_ns)
        return self.overlap_ns / shorter if shorter else 0.0


@dataclass
class Report:
    streams: list[StreamStats]
    devices: list[DeviceStats]
    diagnoses: list[str]
    bottleneck: tuple[int, int] | None = None  # (device, stream)
    shared_streams: list[tuple[int, int]] = field(default_factory=list)


def analyze(run: Run) -> Report:
    streams: list[StreamStats] = []
    devices: list[DeviceStats] = []
    for dev, device in sorted(run.devices.items()):
        tasks = device.tasks
        if not tasks:
            continue
        begin = min(t.start_ns for t in tasks)
        end = max(t.end_ns for t in tasks)
        window = max(end - begin, 1)
        per: dict[int, StreamStats] = {}
        for sid in sorted({t.stream for t in tasks}):
            mine = [t for t in tasks if t.stream == sid]
            s = StreamStats(dev, sid, window, tasks=len(mine))
            s.busy_ns = _union([t for t in mine if t.kind != "EVENT_WAIT"])
            s.waiting_ns = _union([t for t in mine if t.kind == "EVENT_WAIT"])
            s.copies_ns = _union([t for t in mine if t.kind in COPIES])
            s.compute_ns = _union([t for t in mine if t.kind in COMPUTE])
            s.engines = {t.engine for t in mine if t.kind in COPIES or t.kind in COMPUTE}
            per[sid] = s
        for t in tasks:
            if t.kind == "EVENT_WAIT" and t.released_by is not None:
                producer = t.released_by.stream
                if producer != t.stream:
                    waiter = per[t.stream]
                    waiter.waited_on[producer] = waiter.waited_on.get(producer, 0) + t.dur_ns
                    per[producer].caused_ns += t.dur_ns
        slot_sid = {t.slot: t.stream for t in tasks}
        for slot, tid, count in device.info.get("submitters", []):
            if slot in slot_sid:
                threads = per[slot_sid[slot]].threads
                threads[tid] = threads.get(tid, 0) + count
        copies = [t for t in tasks if t.kind in COPIES]
        compute = [t for t in tasks if t.kind in COMPUTE]
        engines = {}
        for engine in sorted({t.engine for t in tasks if t.engine != "scheduler"}):
            engines[engine] = _union([t for t in tasks if t.engine == engine]) / window
        devices.append(DeviceStats(dev, window, _union(copies), _union(compute),
                                   _overlap(copies, compute), engines,
                                   int(device.info.get("dropped", 0))))
        streams += per.values()
    report = Report(streams, devices, [])
    _diagnose(report)
    return report


def _diagnose(report: Report) -> None:
    engine_busy = {d.dev: d.engine_busy for d in report.devices}
    culprits = [s for s in report.streams if s.share(s.caused_ns) >= BOTTLENECK_SHARE]
    if culprits:
        s = max(culprits, key=lambda s: s.caused_ns)
        report.bottleneck = (s.dev, s.stream)
        waiters = sorted((w for w in report.streams
                          if w.dev == s.dev and s.stream in w.waited_on),
                         key=lambda w: -w.waited_on[s.stream])
        who = ", ".join(f"stream {w.stream} ({w.waited_on[s.stream] / 1e6:.2f} ms)"
                        for w in waiters)
        text = (f"device {s.dev} stream {s.stream} is the bottleneck: {who} waited on its "
                f"events ({s.share(s.caused_ns):.0%} of the run).")
        if s.copies_ns and s.compute_ns:
            idle = {e: 1 - b for e, b in engine_busy.get(s.dev, {}).items()
                    if 1 - b >= ENGINE_IDLE_SHARE}
            idle_text = ", ".join(f"{e} idles {share:.0%}" for e, share in sorted(idle.items()))
            text += (f" It mixes copies ({s.share(s.copies_ns):.0%} of the run) and compute "
                     f"({s.share(s.compute_ns):.0%}) in order"
                     + (f" while {idle_text}" if idle_text else "")
                     + ": move its copies to a stream of their own.")
        elif s.compute_ns or s.copies_ns:
            text += _split_advice(s, engine_busy.get(s.dev, {}))
        report.diagnoses.append(text)
    for s in report.streams:
        if len(s.threads) > 1:
            report.shared_streams.append((s.dev, s.stream))
            names = ", ".join(sorted(s.threads))
            turns = sum(s.threads.values())
            report.diagnoses.append(
                f"device {s.dev} stream {s.stream} receives tasks from {len(s.threads)} host "
                f"threads ({names}; {turns} turns): their submissions serialise on one "
                f"stream; give each "
                f"thread its own stream (at most {stream_limit()} streams per card).")


def _split_advice(s: StreamStats, engine_busy: dict[str, float]) -> str:
    """The advice for a bottleneck stream of one kind of work (all compute or all copies)."""
    what = "compute" if s.compute_ns else "copies"
    busy = {e: engine_busy.get(e, 0.0) for e in s.engines}
    engine = max(busy, key=lambda e: busy[e], default=None)
    if engine is not None and busy[engine] >= ENGINE_SATURATED_SHARE:
        return (f" It is all {what} on the {engine} engine, which is busy {busy[engine]:.0%} "
                f"of the run: the engine is the bottleneck, and more streams cannot run more "
                f"of its work at once; make that work smaller or cheaper, or move some of it "
                f"to another engine or card.")
    return f" It is all {what}: split its work across several streams."


def format_report(report: Report) -> str:
    lines = ["Waits report (npuemu msprof --analyze)", ""]
    for d in report.devices:
        lines.append(f"device {d.dev}: window {d.window_ns / 1e6:.3f} ms, copy/compute overlap "
                     f"{d.overlap:.0%} (copies {d.copy_ns / 1e6:.3f} ms, compute "
                     f"{d.compute_ns / 1e6:.3f} ms, together {d.overlap_ns / 1e6:.3f} ms)"
                     + (f", {d.dropped} records DROPPED" if d.dropped else ""))
        lines.append("  engines busy: " + (", ".join(
            f"{e} {b:.0%}" for e, b in d.engine_busy.items()) or "none"))
        lines.append("  stream   tasks   busy  waiting   idle  waited on most")
        for s in (s for s in report.streams if s.dev == d.dev):
            most = sorted(s.waited_on.items(), key=lambda kv: -kv[1])[:3]
            most_text = ", ".join(f"stream {p} {ns / 1e6:.2f} ms" for p, ns in most) or "-"
            lines.append(f"  {s.stream:>6} {s.tasks:>7} {s.share(s.busy_ns):>6.0%} "
                         f"{s.share(s.waiting_ns):>8.0%} {s.share(s.idle_ns):>6.0%}  "
                         f"{most_text}")
        lines.append("")
    lines.append("Diagnoses:")
    lines += [f"- {text}" for text in report.diagnoses] or ["- none: no stream waited long on "
                                                            "another, no stream is shared"]
    return "\n".join(lines) + "\n"


def _intervals(tasks: list[Task]) -> list[tuple[int, int]]:
    spans = sorted((t.start_ns, t.end_ns) for t in tasks if t.end_ns > t.start_ns)
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _union(tasks: list[Task]) -> int:
    return sum(b - a for a, b in _intervals(tasks))


def _overlap(xs: list[Task], ys: list[Task]) -> int:
    a, b = _intervals(xs), _intervals(ys)
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
