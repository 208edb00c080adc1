"""Runs the figures (each in a fresh interpreter with its own embedded node, or in the
bench process), prints the table and writes the JSON."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from npuemu.tools.bench.records import Record, format_table
from npuemu.tools.bench.registry import FIGURES, Context, Figure
from npuemu.tools.bench.ring import ring_pong, sem_pong
from npuemu.tools.bench.track import SCRUBBED, Tracker, cleanup, left_behind

NODE_ENV = {"NPUEMU_HBM": "4G", "NPUEMU_DDR": "1G"}
CHILD_OF = "--child-of"
"""``python -m npuemu.tools.bench --child-of MODULE ARGS``: a figure module's own child."""
"""Arena sizes of the benchmark's embedded nodes (sparse; only what is copied is touched)."""


# ---------------------------------------------------------------------------- the runner
def child_command(module: str, *args: str) -> list[str]:
    """The command that runs ``module.child_main(args)`` (a module of this package) in a
    fresh interpreter, through the package's own entry point: ``python -m
    npuemu.tools.bench --child-of MODULE ARGS`` (``python -m MODULE`` would run the module a
    second time beside the copy the package imported, and runpy warns about it)."""
    return [sys.executable, "-m", "npuemu.tools.bench", CHILD_OF, module, *args]


def run_module(ctx: Context, module: str, env: dict[str, str], args: list[str],
               timeout: float) -> None:
    """Run ``module.child_main(args)`` in a child (``child_command``) as one of the figure's
    helper processes (tracked, so the bench cleans up after it); RuntimeError if it fails or
    outlives ``timeout``."""
    proc = subprocess.Popen(child_command(module, *args), env=env, stdin=subprocess.DEVNULL)
    ctx.track.proc(proc.pid)
    try:
        rc = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if rc:
        raise RuntimeError(f"{module} {args[0]} exited {rc}")


def child_env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(NODE_ENV, NPUEMU_DEVICES=str(devices))
    return env


def _run_figure(fig: Figure, quick: bool) -> tuple[list[Record], Tracker, list[str]]:
    """Run one figure (in a fresh child if it needs a node); always clean up after it.
    Returns its records, what it started (already cleaned up) and its notes."""
    if fig.devices is None:
        track = Tracker()
        ctx = Context(quick, track)
        try:
            return fig.func(ctx), track, ctx.notes
        finally:
            ctx.close()
            _report_forced(fig, cleanup(track))
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-") as tmp:
        out, track_path = os.path.join(tmp, "out.json"), os.path.join(tmp, "track")
        cmd = [sys.executable, "-m", "npuemu.tools.bench", "--figure", fig.key,
               "--out", out, "--track", track_path] + (["--quick"] if quick else [])
        proc = subprocess.Popen(cmd, env=child_env(fig.devices), stdin=subprocess.DEVNULL)
        try:
            try:
                rc = proc.wait(fig.timeout)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"did not finish within {fig.timeout:.0f} s") from None
        finally:
            if proc.poll() is None:  # timeout or Ctrl-C: let it tear down, then insist
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            track = Tracker.load(track_path)
            track.raw_node(f"bench-raw{proc.pid}")
            _report_forced(fig, cleanup(track))
        if rc != 0:
            raise RuntimeError(f"figure process exited {rc}")
        with open(out) as f:
            result = json.load(f)
        return [Record.load(d) for d in result["records"]], track, result["notes"]


def _report_forced(fig: Figure, forced: list[str]) -> None:
    if forced:
        print(f"\n  cleanup after {fig.key} had to: {'; '.join(forced)}", file=sys.stderr)


def _child_figure(key: str, quick: bool, out: str, track_path: str) -> int:
    """``--figure KEY``: run one figure on a fresh embedded node, write its records."""
    from npuemu.host.core import runtime
    from npuemu.host.driver.node import Node

    fig = next(f for f in FIGURES if f.key == key)
    ctx = Context(quick, Tracker(track_path))
    rt = runtime.get()
    try:
        node = rt.ensure_node()
        proc = node.proc if isinstance(node, Node) else None  # a supervisor's process
        ctx.track.node(node.name, proc.pid if proc else 0)
        records = fig.func(ctx)
    finally:
        ctx.close()
        rt.shutdown()
    with open(out, "w") as f:
        json.dump({"records": [dataclasses.asdict(r) for r in records], "notes": ctx.notes}, f)
    return 0



def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(quick: bool = False, json_path: str | None = None,
         only: list[str] | None = None) -> int:
    """Run every figure (or those whose keys ``only`` names), print the table, write
    ``json_path``; 1 if a figure failed; 2 if ``only`` names an unknown figure.
    SIGTERM and Ctrl-C stop the bench after cleaning up what the running figure started."""
    previous = None
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(quick, json_path, only)
    except (KeyboardInterrupt, SystemExit) as stop:
        code = stop.code if isinstance(stop, SystemExit) else 130
        print(f"\nnpuemu bench: stopped ({'SIGTERM' if code == 143 else 'interrupted'}); "
              "what the running figure started was cleaned up", file=sys.stderr)
        return code if isinstance(code, int) else 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(quick: bool, json_path: str | None, only: list[str] | None = None) -> int:
    figures = list(FIGURES)
    if only:
        unknown = sorted(set(only) - {f.key for f in FIGURES})
        if unknown:
            print(f"npuemu bench: no figure {', '.join(unknown)} (figures: "
                  f"{', '.join(f.key for f in FIGURES)})", file=sys.stderr)
            return 2
        figures = [f for f in FIGURES if f.key in only]
    try:
        "µ≤≥".encode(getattr(sys.stdout, "encoding", None) or "ascii")
    except UnicodeEncodeError:
        with contextlib.suppress(AttributeError, ValueError):
            sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]
    t_start = time.perf_counter()
    mode = "quick" if quick else "full"
    print(f"npuemu bench ({mode}, {os.cpu_count()} CPUs): figures beside limits measured in "
          "this run; ratio = value / limit", flush=True)
    records: list[Record] = []
    tracks: list[Tracker] = []
    notes: list[str] = []
    failed: list[str] = []
    for i, fig in enumerate(figures, 1):
        t0 = time.perf_counter()
        print(f"[{i}/{len(figures)}] {fig.key} ...", end="", flush=True)
        try:
            recs, track, fig_notes = _run_figure(fig, quick)
            tracks.append(track)
            notes += [f"{fig.key}: {n}" for n in fig_notes]
        except Exception as err:  # report it and go on with the others
            failed.append(f"{fig.key}: {err}")
            print(f" FAILED: {err}", flush=True)
            continue
        records += recs
        print(f" {time.perf_counter() - t0:.1f} s", flush=True)
    print()
    if records:
        print(format_table(records))
    left = left_behind(tracks)
    nodes = len({n for t in tracks for n, _, _ in t.nodes})
    helpers = sum(len(t.procs) for t in tracks)
    print(f"\ncleanup: {nodes} nodes and {helpers} helper processes started, "
          + (f"LEFT BEHIND: {left}" if left else "nothing left behind"))
    if notes:
        print("\nNOTES:\n  " + "\n  ".join(notes))
    if failed:
        print("\nFAILED figures:\n  " + "\n  ".join(failed))
    print(f"\ntotal runtime {time.perf_counter() - t_start:.1f} s")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump([r.public() for r in records], f, indent=1, ensure_ascii=False)
            f.write("\n")
    return 1 if failed else 0


def _module_child(argv: list[str]) -> int:
    """``--child-of MODULE ARGS``: ``MODULE.child_main(ARGS)``, MODULE in this package."""
    if not argv or not argv[0].startswith(f"{__package__}."):
        print(f"{CHILD_OF} needs a module of {__package__}", file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(argv[0]).child_main(argv[1:])


def _parser() -> argparse.ArgumentParser:
    """The options of ``python -m npuemu.tools.bench``."""
    p = argparse.ArgumentParser(prog="python -m npuemu.tools.bench")
    p.add_argument("--figure", help="run one figure on a fresh embedded node (internal)")
    p.add_argument("--out", help="with --figure: where its records go (internal)")
    p.add_argument("--track", help="with --figure: where it logs what it starts (internal)")
    p.add_argument("--quick", action="store_true", help="fewer samples, no 256 MiB copies")
    p.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    p.add_argument("--only", metavar="KEYS", type=lambda v: v.split(","),
                   help="run only these figures (comma-separated keys, e.g. ops,models)")
    p.add_argument("--ring-pong", nargs=3, metavar=("SEG", "BELL", "WAKE"),
                   help="a bare ring peer (internal)")
    p.add_argument("--sem-pong", nargs=2, metavar=("PING", "PONG"),
                   help="a bare semaphore peer (internal)")
    return p


def entry(argv: list[str]) -> int:
    """``python -m npuemu.tools.bench``: the bench's own helper processes (and the bench)."""
    if argv[:1] == [CHILD_OF]:
        return _module_child(argv[1:])
    args = _parser().parse_args(argv)
    if args.ring_pong:
        return ring_pong(*args.ring_pong)
    if args.sem_pong:
        return sem_pong(*args.sem_pong)
    if args.figure:
        return _child_figure(args.figure, args.quick, args.out, args.track)
    return main(args.quick, args.json, args.only)
