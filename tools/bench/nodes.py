"""Figure family: nodes: idle CPU of a node's workers and node start-up."""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret
from npuemu.tools.bench.track import SCRUBBED, stop_node, supervisor_of


def _cpu_ns(procs: list[psutil.Process]) -> int:
    """CPU time used so far by ``procs`` (all threads), ns."""
    total = 0
    for p in procs:
        try:
            for tid in os.listdir(f"/proc/{p.pid}/task"):
                with open(f"/proc/{p.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += int((t.user + t.system) * 1e9)
    return total


@figure("idle-cpu", devices=8)
def fig_idle_cpu(ctx: Context) -> list[Record]:
    """CPU of an idle 8-device node (supervisor + workers) vs the 1 % target."""
    from npuemu.device.worker import RECENT_S
    from npuemu.host import acl
    from npuemu.host.core import runtime
    from npuemu.host.driver.node import Node

    for dev in range(8):
        check_ret(acl.rt.set_device(dev), f"set_device({dev})")
    node = runtime.get().node
    assert isinstance(node, Node) and node.proc is not None
    sup = psutil.Process(node.proc.pid)
    procs = [sup, *sup.children(recursive=True)]
    if len(procs) != 9:
        raise RuntimeError(f"expected a supervisor and 8 workers, found {len(procs)} processes")
    time.sleep(RECENT_S + 0.2)  # past the workers' "recently busy" mode
    window = 2.0
    c0, t0 = _cpu_ns(procs), time.perf_counter()
    time.sleep(window)
    c1, t1 = _cpu_ns(procs), time.perf_counter()
    percent = (c1 - c0) / 1e9 / (t1 - t0) * 100
    return [Record("idle CPU, 8 devices", percent, "% core", "fixed target", 1.0,
                   Target("≤ 1 %", "value", "<=", 1.0))]


# node start-up -------------------------------------------------------------------------
def npuemu_command() -> list[str]:
    """The ``npuemu`` console script of this interpreter (a pyenv shim would add ~0.1 s)."""
    script = os.path.join(os.path.dirname(sys.executable), "npuemu")
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "npuemu.tools"]


def _wait_all(procs: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            if p.wait(max(0.1, deadline - time.monotonic())) != 0:
                raise RuntimeError(f"{p.args!r} exited {p.returncode}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _start_node(cli: list[str], env: dict[str, str], name: str, ctx: Context,
                ) -> tuple[float, int, float] | str:
    """``npuemu start --devices 8 --name NAME``: (seconds, supervisor pid, ctime), or why it
    failed (its error and the last line of the node's log)."""
    ctx.track.node(name)  # tracked before its supervisor exists: cleaned up by name
    t0 = time.perf_counter()
    res = subprocess.run([*cli, "start", "--devices", "8", "--name", name], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    pid, ctime = supervisor_of(name)
    if pid:
        ctx.track.node(name, pid)
    if res.returncode == 0:
        return elapsed, pid, ctime
    why = [re.sub(r" \(log: [^)]*\)", "", line)  # the log is in a temporary directory
           for line in (res.stderr.strip() or res.stdout.strip()).splitlines()[-1:] or ["?"]]
    with contextlib.suppress(OSError), open(os.path.join(env["TMPDIR"],
                                                         f"npuemu-{name}.log")) as f:
        log = [line.strip() for line in f if line.strip()]
        if log:
            why.append(f"log: {log[-1]}")
    return f"rc {res.returncode}: " + " | ".join(why)


@figure("node-start-up", timeout=180.0)
def fig_node_start_up(ctx: Context) -> list[Record]:
    """``npuemu start --devices 8`` vs 8 bare interpreters started in parallel."""
    reps, tries = (1, 3) if ctx.quick else (5, 3)
    cli = npuemu_command()
    base = f"bench-{os.getpid()}"
    values, limits, failures, attempts = [], [], [], 0
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env["TMPDIR"] = tmp  # `npuemu start` writes its log there
        bare = [sys.executable, "-c", "import npuemu.shared.ring"]
        for _ in range(reps):
            t0 = time.perf_counter()
            _wait_all([subprocess.Popen(bare, env=env, stdin=subprocess.DEVNULL)
                       for _ in range(8)], 60)
            limits.append(time.perf_counter() - t0)
            for _ in range(tries):  # a failed start is retried under a fresh name
                name = base if attempts == 0 else f"{base}-{attempts}"
                attempts += 1
                got = _start_node(cli, env, name, ctx)
                if not isinstance(got, str):
                    break
                failures.append(got)
                stop_node(name, 0, 0.0)  # let the failed node finish tearing down
            else:
                raise RuntimeError(f"npuemu start failed {tries} times: {failures[-tries:]}")
            elapsed, pid, ctime = got
            values.append(elapsed)
            stop = subprocess.run([*cli, "stop", "--name", name], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=60)
            if stop.returncode != 0:
                raise RuntimeError(f"npuemu stop failed ({stop.returncode}): "
                                   f"{stop.stdout}{stop.stderr}")
            forced = stop_node(name, pid, ctime)
            if forced:
                raise RuntimeError(f"npuemu stop left node {name} behind: {forced}")
    if failures:
        ctx.note(f"npuemu start failed {len(failures)} of {attempts} times (retried; "
                 f"not timed): " + "; ".join(sorted(set(failures))))
    return [Record("node start-up, 8 devices", statistics.median(values), "s",
                   "8 bare interpreters", statistics.median(limits),
                   Target("≤ 1.5 s", "value", "<=", 1.5))]

