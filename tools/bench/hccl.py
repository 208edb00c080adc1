"""Figure family: collectives (host/hccl), measured as ``npuemu hccl-test`` measures them.

* "all_reduce 64 MiB busbw, N cards" for N = 2, 4, 8 of one node (8: the default topology, two
  HCCS groups joined through pinned host mirrors): bus bandwidth as nccl-tests computes it
  (algbw x 2(N-1)/N), event-timed on rank 0's stream [single-thread ``np.copyto`` of 64 MiB,
  same run]; target ≥ 0.5x (issue 14).
* "all_reduce 8 B, 8 cards": average time of one all_reduce [one ``launch_host_func`` +
  ``synchronize_stream`` on one card: the host round trip a rendezvous is built on].
* "all_reduce 64 MiB busbw, 2 nodes over MPI": ``mpiexec -n 2`` of this module's ``mpi-child``
  mode, each rank a process with its own embedded node [MPI's own ``Allreduce`` of the same
  64 MiB between the same two processes, host buffers]; target ≥ 0.8x. Skipped (noted) when
  mpi4py or mpiexec is missing.

HCCL_BUFFSIZE is set to 64 (MB) here to spare /dev/shm (8 cards x 2 buffers). ``--quick``
measures 16 MiB instead of 64 MiB (labelled so), one iteration each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.runner import child_command
from npuemu.tools.bench.sampling import sample_rates
from npuemu.tools.sizes import MiB

SIZE = 64 * MiB


def _busbw(cards: list[int], size: int, iters: int, warmup: int) -> tuple[float, float]:
    """(busbw GB/s, avg µs) of all_reduce fp32 sum on ``cards`` (one process)."""
    from npuemu.tools.hccl_test import Bench

    bench = Bench(cards, "all_reduce", 4, "sum", 0)
    try:
        row = bench.measure(size, iters, warmup, check=1)
        if row.check != "success":
            raise RuntimeError(f"all_reduce on {len(cards)} cards gave a wrong result")
        return row.busbw, row.avg_us
    finally:
        bench.close()


@figure("hccl-all-reduce", devices=8, timeout=400.0)
def fig_hccl(ctx: Context) -> list[Record]:
    import numpy as np

    from npuemu.host import acl

    os.environ["HCCL_BUFFSIZE"] = "64"
    iters, warmup = (1, 1) if ctx.quick else (5, 2)
    size = SIZE // 4 if ctx.quick else SIZE
    label = f"{size // MiB} MiB"
    host = [np.empty(size, np.uint8) for _ in range(2)]
    for h in host:
        h.fill(1)
    copy = sample_rates({"c": lambda: np.copyto(host[1], host[0])}, size / 1e9,
                        3 if ctx.quick else 5, 0.05)["c"]
    records = []
    for n in (2, 4, 8):
        bus, _ = _busbw(list(range(n)), size, iters, warmup)
        records.append(Record(f"all_reduce {label} busbw, {n} cards", bus, "GB/s",
                              f"np.copyto {label}", copy, Target("≥ 0.5x", "ratio", ">=", 0.5)))
    _, lat_us = _busbw(list(range(8)), 8, 10 if ctx.quick else 50, 2)
    acl.rt.set_device(0)
    s, _ret = acl.rt.create_stream()
    samples = []
    for _ in range(20):
        t0 = time.perf_counter()
        acl.rt.launch_host_func(s, lambda _: None, None)
        acl.rt.synchronize_stream(s)
        samples.append((time.perf_counter() - t0) * 1e6)
    acl.rt.destroy_stream(s)
    records.append(Record("all_reduce 8 B, 8 cards", lat_us, "us",
                          "host func launch+sync", sorted(samples)[len(samples) // 2]))
    records += _mpi_records(ctx, size, label)
    return records


def _mpi_records(ctx: Context, size: int, label: str) -> list[Record]:
    exe = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        ctx.note("hccl over MPI skipped: mpi4py is not installed (the 'mpi' extra)")
        return []
    if not os.path.exists(exe):
        ctx.note("hccl over MPI skipped: no mpiexec beside this Python")
        return []
    env = {k: v for k, v in os.environ.items() if k not in ("NPUEMU_NODE",)}
    env.update({"NPUEMU_DEVICES": "1", "HCCL_BUFFSIZE": "64"})
    iters = "2" if ctx.quick else "5"
    proc = subprocess.Popen([exe, "-n", "2", *child_command(__name__, "mpi-child", str(size),
                                                            iters)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL)
    ctx.track.proc(proc.pid)
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError("mpiexec -n 2 did not finish in 300 s") from None
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"mpiexec -n 2 failed ({proc.returncode}): {err[-500:]}")
    r = json.loads(lines[-1][7:])
    return [Record(f"all_reduce {label} busbw, 2 nodes over MPI", r["hccl"], "GB/s",
                   f"MPI Allreduce {label}", r["mpi"], Target("≥ 0.8x", "ratio", ">=", 0.8))]


def mpi_child(size: int, iters: int) -> None:
    """One MPI rank: hccl all_reduce busbw on its own node's card 0, then MPI's Allreduce of
    the same bytes on host buffers; rank 0 prints ``RESULT {"hccl":…, "mpi":…}``."""
    import numpy as np
    from mpi4py import MPI

    from npuemu.tools.hccl_test import Bench

    world = MPI.COMM_WORLD
    bench = Bench([0], "all_reduce", 4, "sum", 0, world=world)
    try:
        row = bench.measure(size, iters, 1, check=1)
    finally:
        bench.close()
    a, b = np.ones(size // 4, np.float32), np.empty(size // 4, np.float32)
    world.Allreduce(a, b)
    world.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iters):
        world.Allreduce(a, b)
    world.Barrier()
    avg_us = (MPI.Wtime() - t0) / iters * 1e6
    p = world.Get_size()
    mpi_bus = size / avg_us * 1e-3 * 2 * (p - 1) / p
    if world.Get_rank() == 0:
        ok = row.check == "success"
        print("RESULT " + json.dumps({"hccl": row.busbw if ok else 0.0, "mpi": mpi_bus}),
              flush=True)


def child_main(argv: list[str]) -> int:
    """``mpi-child SIZE ITERS`` (one rank under ``mpiexec``, via ``runner.child_command``)."""
    if len(argv) != 3 or argv[0] != "mpi-child":
        print("usage: mpi-child SIZE ITERS", file=sys.stderr)
        return 2
    mpi_child(int(argv[1]), int(argv[2]))
    return 0
