"""``npuemu hccl-test OP [options]``: the hccl_test tools (all_reduce_test, ...) on emulated
cards (HCCL's ``hccl_test`` tool, its options and its output table).

OP is one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall (the
v-variants, scatter and alltoallvc are not provided). Same options and defaults as hccl_test:
``-b/--minbytes`` (64M), ``-e/--maxbytes`` (64M), ``-i/--stepbytes`` (default (e-b)/10; 0 =
one size), ``-f/--stepfactor`` (must be > 1; wins over -i), ``-o/--op`` sum|prod|max|min,
``-r/--root`` (0), ``-d/--datatype`` (fp32; hccl_test's names, ``bf16`` also names
``bfp16``; int128/hif8/fp8* are refused with HCCL_E_NOT_SUPPORT), ``-n/--iters`` (20),
``-w/--warmup_iters`` (10), ``-c/--check`` (0 off, 1 on, 2 also prints each rank's success),
``-p/--npus`` (ranks per node; default every card, or ``HCCL_TEST_USE_DEVS="4,5,6,7"``);
``-t``, ``-z``, ``-m``, ``-s`` are accepted without effect. The root prints the same first
line, header and rows (``data_size(Bytes)`` = bytes per card; ``aveg_time(us)`` =
event-timed total / iters; ``alg_bandwidth(GB/s)`` = bytes / time, times rank_size for
all_gather and reduce_scatter; ``check_result`` success|failed, or NULL when checking is off
or the expected integer sum/product overflows the dtype), plus one column hccl_test lacks:
``bus_bandwidth(GB/s)`` as nccl-tests computes it (algbw x 2(n-1)/n for all_reduce, (n-1)/n
for all_gather, reduce_scatter and alltoall, 1 for broadcast and reduce). Inputs are
rank_id + 1 on every rank (bfloat16 as its bits); the expected result is computed on the
host (bfloat16 folded through float32 in rank order, rounded at each step).

Modes: under an MPI launcher (``PMI_RANK``/``OMPI_COMM_WORLD_RANK`` set: ``mpiexec -n 8
npuemu hccl-test all_reduce ...``) each process is one rank on card ``rank % npus`` of its own
node, joined through MPI as hccl_test does (root info broadcast over MPI, then
``comm_init_root_info``; data through ``host/hccl/mpi.py``); every process times its own
stream and rank 0 prints. Without a launcher (the **convenience mode**) this process drives
every rank of one node (``comm_init_all``, arena to arena) and times rank 0's stream.
Blocks until done.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from npuemu.shared.bf16 import bf16_reduce, from_float32
from npuemu.shared.config import parse_size

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall")
DTYPES = {"int8": 0, "int16": 1, "int32": 2, "fp16": 3, "fp32": 4, "int64": 5, "uint64": 6,
          "uint8": 7, "uint16": 8, "uint32": 9, "fp64": 10, "bfp16": 11, "bf16": 11,
          "int128": 12, "hif8": 14, "fp8e4m3": 15, "fp8e5m2": 16, "fp8e8m0": 17}
"""hccl_test's ``-d`` names (HcclDataType values), plus ``bf16`` as another name for
``bfp16``. int128 and the 8-bit float types are accepted by name and refused with
HCCL_E_NOT_SUPPORT when the run starts (the emulated cards do not compute on them)."""
REDUCE = {"sum": 0, "prod": 1, "max": 2, "min": 3}
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
              "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0}
_NP_OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


@dataclass
class Row:
    size: int
    avg_us: float
    algbw: float
    busbw: float
    check: str


def sizes(lo: int, hi: int, step: int | None, factor: float | None) -> list[int]:
    """The data sizes hccl_test walks: by factor when given (>1), else by step."""
    if factor is not None and factor > 1:
        out: list[int] = []
        size: float = lo
        while size <= hi:
            out.append(int(size))
            size *= factor
        return out
    step = (hi - lo) // 10 if step is None else step
    if step <= 0 or lo == hi:
        return [lo]
    return list(range(lo, hi + 1, step))


class Bench:
    """The ranks, streams and buffers of one run (one process, every rank)."""

    def __init__(self, devices: list[int], op: str, dtype: int, reduce_op: str, root: int,
                 algo: str | None = None, world: Any = None) -> None:
        from npuemu.host import hccl
        from npuemu.host.core import device
        from npuemu.host.core import stream as streams
        from npuemu.host.hccl.types import is_bf16, numpy_dtype

        self.op, self.dtype, self.reduce_op, self.root, self.algo = op, dtype, reduce_op, root, algo
        self.verbose = False
        self.np_dtype = numpy_dtype(dtype)
        self.bf16 = is_bf16(self.np_dtype)
        self.devices, self.world = devices, world
        for d in devices:
            device.set_device(d)
        if world is None:  # convenience mode: every rank in this process
            self.p, self.ranks = len(devices), list(range(len(devices)))
            self.comms = hccl.comm_init_all(devices)
        else:  # one process per rank (MPI): root info broadcast over MPI, as hccl_test does
            self.p, self.ranks = world.Get_size(), [world.Get_rank()]
            info = hccl.get_root_info() if world.Get_rank() == 0 else None
            self.comms = [hccl.comm_init_root_info(self.p, world.bcast(info, root=0),
                                                   world.Get_rank())]
        self.streams: list[Any] = []
        self.buffers: list[Any] = []
        for i in range(len(devices)):
            self._set(i)
            self.streams.append(streams.create_stream())

    def _set(self, i: int) -> None:
        """Make local rank i's card current (``aclrtSetCurrentContext``, primary context)."""
        from npuemu.host.core import runtime

        rt = runtime.get()
        rt.local.ctx = rt.devices[self.devices[i]].primary

    def _input(self, rank: int, n: int) -> np.ndarray:
        """Rank's input: rank_id + 1 (alltoall: also 10 x the destination block); bfloat16
        as its bits."""
        send_n = n * self.p if self.op in ("reduce_scatter", "alltoall") else n
        if self.op == "alltoall":
            values = np.arange(send_n) // n * 10 + rank + 1
        else:
            values = np.full(send_n, rank + 1)
        if self.bf16:
            return from_float32(values.astype(np.float32)).view(self.np_dtype)
        return values.astype(self.np_dtype)

    def alloc(self, size: int) -> None:
        """Buffers for ``size`` bytes per card, inputs filled with rank_id + 1."""
        from npuemu.host.core import memory

        self.free()
        e = self.np_dtype.itemsize
        self.count = max(size // e, 1)
        n, p = self.count, self.p
        send_n = n * p if self.op in ("reduce_scatter", "alltoall") else n
        recv_n = n * p if self.op in ("all_gather", "alltoall") else n
        for i, rank in enumerate(self.ranks):
            self._set(i)
            data = self._input(rank, n)
            x, y = memory.malloc(send_n * e), memory.malloc(recv_n * e)
            memory.memcpy(x, send_n * e, data.ctypes.data, send_n * e, 1)
            self.buffers.append((x, y, recv_n))

    def free(self) -> None:
        from npuemu.host.core import memory

        for x, y, _ in self.buffers:
            memory.free(x)
            memory.free(y)
        self.buffers = []

    def issue(self) -> None:
        """One collective on every rank (async)."""
        from npuemu.host import hccl

        n, op = self.count, self.op
        red = REDUCE[self.reduce_op]
        for r, comm in enumerate(self.comms):
            self._set(r)
            x, y, _ = self.buffers[r]
            s = self.streams[r].handle
            if op == "all_reduce":
                hccl.all_reduce(x, y, n, self.dtype, red, comm, s, algo=self.algo)
            elif op == "all_gather":
                hccl.all_gather(x, y, n, self.dtype, comm, s, algo=self.algo)
            elif op == "reduce_scatter":
                hccl.reduce_scatter(x, y, n, self.dtype, red, comm, s, algo=self.algo)
            elif op == "broadcast":
                hccl.broadcast(x, n, self.dtype, self.root, comm, s, algo=self.algo)
            elif op == "reduce":
                hccl.reduce(x, y, n, self.dtype, red, self.root, comm, s)
            else:
                hccl.all_to_all(x, n, self.dtype, y, n, self.dtype, comm, s)

    def _fold(self, ins: list[np.ndarray]) -> np.ndarray:
        """The reduction of every rank's input, in rank order (bfloat16 through float32,
        rounded at each step as the cards do)."""
        if self.bf16:
            acc = ins[0].view(np.uint16).copy()
            for h in ins[1:]:
                bf16_reduce(self.reduce_op, acc, h.view(np.uint16))
            return acc.view(self.np_dtype)
        acc = ins[0].copy()
        for h in ins[1:]:
            _NP_OPS[self.reduce_op](acc, h, out=acc)
        return acc

    def overflows(self) -> bool:
        """The expected result does not fit the dtype (hccl_test prints NULL then): integer
        sums and products of rank_id + 1 over the ranks (alltoall and the gathers move data
        only)."""
        if self.op not in ("all_reduce", "reduce", "reduce_scatter"):
            return False
        if self.np_dtype.kind not in "iu" or self.reduce_op in ("max", "min"):
            return False
        top = 1
        for r in range(1, self.p + 1):
            top = top * r if self.reduce_op == "prod" else top + r
        top = top if self.reduce_op == "prod" else top - 1
        return top > np.iinfo(self.np_dtype).max

    def expected(self, rank: int) -> np.ndarray | None:
        n, p = self.count, self.p
        ins = [self._input(j, n) for j in range(p)]
        if self.op in ("all_reduce", "reduce", "reduce_scatter"):
            if self.op == "reduce" and rank != self.root:
                return None
            acc = self._fold(ins)
            return acc[rank * n:(rank + 1) * n] if self.op == "reduce_scatter" else acc
        if self.op == "all_gather":
            return np.concatenate(ins)
        if self.op == "broadcast":
            return ins[self.root]
        return np.concatenate([ins[j][rank * n:(rank + 1) * n] for j in range(p)])

    def check(self) -> bool:
        """Every rank's output against the host's expectation (all ranks agree over MPI)."""
        from npuemu.host.core import memory

        good = True
        for i, rank in enumerate(self.ranks):
            want = self.expected(rank)
            if want is None:
                continue
            x, y, _ = self.buffers[i]
            src = x if self.op == "broadcast" else y
            got = np.empty(want.size, self.np_dtype)
            self._set(i)
            memory.memcpy(got.ctypes.data, got.nbytes, src, got.nbytes, 2)
            if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
                print(f"local rank_id {rank}, check result failed", file=sys.stderr)
                good = False
            elif self.verbose:
                print(f"local rank_id {rank}, check result success", file=sys.stderr)
        return good if self.world is None else bool(self.world.allreduce(int(good), op=_min()))

    def timed(self, iters: int) -> float:
        """Average µs of ``iters`` collectives on the current buffers, timed by two events
        on rank 0's stream (as hccl_test does); waits for every stream."""
        from npuemu.host.core import stream as streams

        self._set(0)
        s0 = self.streams[0].handle
        start, end = streams.create_event(), streams.create_event()
        try:
            streams.record_event(start.handle, s0)
            for _ in range(iters):
                self.issue()
            self._set(0)
            streams.record_event(end.handle, s0)
            self.sync()
            self._set(0)
            return streams.event_elapsed_time(start.handle, end.handle) * 1000 / max(iters, 1)
        finally:
            streams.destroy_event(start.handle)
            streams.destroy_event(end.handle)

    def sync(self) -> None:
        """Wait for every local rank's stream."""
        from npuemu.host.core import stream as streams

        for r, s in enumerate(self.streams):
            self._set(r)
            streams.synchronize_stream(s.handle)

    def row(self, avg_us: float, check: int) -> Row:
        """hccl_test's row for the current buffers and a measured average time."""
        nbytes = self.count * self.np_dtype.itemsize
        moved = nbytes * self.p if self.op in ("all_gather", "reduce_scatter") else nbytes
        algbw = moved / avg_us * 1e-3 if avg_us > 0 else 0.0
        if not check or self.overflows():
            result = "NULL"
        else:
            result = "success" if self.check() else "failed"
        return Row(nbytes, avg_us, algbw, algbw * BUS_FACTOR[self.op](self.p), result)

    def measure(self, size: int, iters: int, warmup: int, check: int) -> Row:
        self.alloc(size)
        for _ in range(warmup):
            self.issue()
        self.sync()
        return self.row(self.timed(iters), check)

    def close(self) -> None:
        from npuemu.host import hccl
        from npuemu.host.core import stream as streams

        self.free()
        for r, s in enumerate(self.streams):
            self._set(r)
            streams.destroy_stream(s.handle)
        for c in self.comms:
            hccl.comm_destroy(c)


def _min() -> object:
    from mpi4py import MPI

    return MPI.MIN


HEADER = "%-15s | %-12s | %-18s | %-13s | %s"
ROW = "%-17d | %-14.2f | %-20.5f | %-13s | %.5f"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="npuemu hccl-test", description="hccl_test's collective benchmarks on emulated "
        "cards: one rank per process under mpiexec, else every rank of one node")
    p.add_argument("op", choices=OPS, help="the collective")
    p.add_argument("-b", "--minbytes", default="64M", help="first data size per card (64M)")
    p.add_argument("-e", "--maxbytes", default="64M", help="last data size per card (64M)")
    p.add_argument("-i", "--stepbytes", default=None,
                   help="size step (default (e-b)/10; 0: one size)")
    p.add_argument("-f", "--stepfactor", type=float, default=None,
                   help="size factor; > 1 wins over -i")
    p.add_argument("-o", "--op", dest="reduce_op", choices=tuple(REDUCE), default="sum",
                   help="reduce operation (sum)")
    p.add_argument("-r", "--root", type=int, default=0, help="root rank of broadcast, reduce")
    p.add_argument("-d", "--datatype", choices=tuple(DTYPES), default="fp32",
                   help="data type (fp32; bf16 and bfp16 name bfloat16)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations (20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=10, help="warm-up iterations (10)")
    p.add_argument("-c", "--check", type=int, choices=(0, 1, 2), default=1,
                   help="check the results: 0 off, 1 on (default), 2 a line per rank")
    p.add_argument("-p", "--npus", type=int, default=None,
                   help="ranks (default: every card, or $HCCL_TEST_USE_DEVS)")
    p.add_argument("-t", "--onlydevicetime", type=int, choices=(0, 1), default=0,
                   help="accepted; the time is always the device's (event-timed)")
    for short, long in (("-z", "--zero_copy"), ("-m", "--symmetric_memory"), ("-s", "--nslb")):
        p.add_argument(short, long, type=int, choices=(0, 1), default=0,
                       help="accepted; no effect on emulated cards")
    p.add_argument("--algo", choices=("mesh", "ring"), default=None,
                   help="npuemu: force the algorithm")
    return p


def _devices(npus: int | None) -> list[int]:
    from npuemu.host.core import device

    use = os.environ.get("HCCL_TEST_USE_DEVS", "").strip()
    devs = [int(d) for d in use.split(",") if d.strip()] if use else None
    if devs is None:
        devs = list(range(npus or device.get_device_count()))
    return devs[:npus] if npus else devs


def _walk(args: argparse.Namespace) -> tuple[int, int, int | None]:
    """-b, -e and -i in bytes, checked (ValueError with the reason)."""
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    step = parse_size(args.stepbytes) if args.stepbytes is not None else None
    if lo > hi:
        raise ValueError(f"minbytes {lo} is larger than maxbytes {hi}")
    if args.stepfactor is not None and args.stepfactor <= 1.0:
        raise ValueError(f"stepfactor {args.stepfactor} must be larger than 1.0")
    if args.iters < 1 or args.warmup_iters < 0 or (args.npus is not None and args.npus < 1):
        raise ValueError("iters must be >= 1, warmup_iters >= 0 and npus >= 1")
    return lo, hi, step


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    world = None
    if any(os.environ.get(v) for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK")):
        try:
            from mpi4py import MPI
        except ImportError:
            print("npuemu hccl-test: launched by MPI but mpi4py is missing (install the "
                  "'mpi' extra)", file=sys.stderr)
            return 2
        world = MPI.COMM_WORLD
    from npuemu.host.hccl.types import HcclError

    try:
        lo, hi, step = _walk(args)
    except ValueError as err:
        print(f"npuemu hccl-test: {err}", file=sys.stderr)
        return 2
    try:
        devices = _devices(args.npus)
        if world is not None:  # this process drives one rank: card (rank % npus)
            devices = [devices[world.Get_rank() % len(devices)]]
        bench = Bench(devices, args.op, DTYPES[args.datatype], args.reduce_op, args.root,
                      args.algo, world)
    except HcclError as err:
        print(f"npuemu hccl-test: {err}", file=sys.stderr)
        return 1
    bench.verbose = args.check == 2
    say = print if world is None or world.Get_rank() == 0 else (lambda *a, **k: None)
    say(f"the minbytes is {lo}, maxbytes is {hi}, iters is {args.iters}, "
          f"warmup_iters is {args.warmup_iters}")
    say(HEADER % ("data_size(Bytes):", "aveg_time(us):", "alg_bandwidth(GB/s):",
                    "check_result:", "bus_bandwidth(GB/s):"))
    failed = False
    try:
        for size in sizes(lo, hi, step, args.stepfactor):
            row = bench.measure(size, args.iters, args.warmup_iters, args.check)
            failed |= row.check == "failed"
            say(ROW % (row.size, row.avg_us, row.algbw, row.check, row.busbw), flush=True)
    except HcclError as err:
        print(f"npuemu hccl-test: {err}", file=sys.stderr)
        failed = True
    finally:
        bench.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
