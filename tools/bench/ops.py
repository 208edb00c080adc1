"""``npuemu bench`` figures of the single-op runtime (``host/ops``), each beside a limit
measured in the same run.

The figure ``ops`` runs its measurements in a child (``python -m npuemu.tools.bench
--child-of npuemu.tools.bench.ops --child OUT``, i.e. ``child_main``) with a fresh one-card
embedded node, and a second child for the disk-cache scenario. Records:

* ``op hit: execute_v2 Add 1 KiB (async)``: cache-hit ``acl.op.execute_v2`` calls per second
  from one thread, queued on one stream [the project's own async ``launch_kernel`` of an
  empty kernel]; target ≥ 100k/s.
* ``ops: tiny op launch+sync`` and ``ops: empty kernel launch+sync``: one call plus
  ``synchronize_stream``, median µs [a bare ring round trip, ``bench.RawRing``, sampled in
  rounds interleaved with it, as the ``card`` figure does]; target ≤ 3x.
* per family (Add, MatMul, ReduceSum, SoftmaxV2, Transpose): ``compile`` (a miss: a build
  into HBM), ``re-tile`` (a miss differing along a linear dim) — both µs [the host cost of a
  hit for the same op].
* scenarios (hit rate % after warm-up): batch cycling {16, 32, 64} (target ≥ 99 %); batch
  growing 1..512 with and without incremental compile (hits + re-tiles count as served
  without compiling; the counts are in the notes); capacity 8 with 16 shapes cycling (LRU
  thrash: miss rate and eviction count).
* ``2nd process first call``: latency of the first compile-and-execute of an Add (after a
  warm-up Sub) in a fresh process whose disk cache the first process filled [the same call
  in the first process]; the count of compiles in each process is noted.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import numpy as np

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.runner import child_env, run_module

_EMPTY = "from npuemu.shared.kernel import kernel\n\n@kernel('aicore')\ndef empty(ctx):\n    pass\n"


def _ok(ret: int, what: str) -> None:
    if ret != 0:
        raise RuntimeError(f"{what} returned {ret}")


class _Tensor:
    def __init__(self, acl, shape, dtype=0):
        n = int(np.prod(shape)) * 4
        self.ptr, ret = acl.rt.malloc(max(n, 1), 0)
        _ok(ret, "malloc")
        self.desc = acl.create_tensor_desc(dtype, list(shape), 2)
        self.buf = acl.create_data_buffer(self.ptr, n)


def _median_us(fn, n: int) -> float:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t0)
    return statistics.median(out) / 1e3


_FAMILIES = {  # op: (input shapes, attrs, linear re-tile shapes)
    "Add": ([(64, 32), (32,)], {}, [(128, 32), (32,)]),
    "MatMul": ([(64, 32), (32, 16)], {}, [(96, 32), (32, 16)]),
    "ReduceSum": ([(64, 32)], {"axes": [1]}, [(80, 32)]),
    "SoftmaxV2": ([(64, 32)], {}, [(72, 32)]),
    "Transpose": ([(64, 32)], {"perm": [1, 0]}, None),
}


def _child(quick: bool, out: str) -> int:
    from npuemu.host import acl
    from npuemu.host.api import op_cache_stats
    from npuemu.host.ops import cache, executor
    from npuemu.host.ops import desc as D
    from npuemu.tools.bench.ring import latency_beside_ring
    from npuemu.tools.bench.track import Tracker, cleanup

    _ok(acl.rt.set_device(0), "set_device")
    s, ret = acl.rt.create_stream()
    _ok(ret, "create_stream")
    records: list[dict] = []
    notes: list[str] = []

    def rec(name, value, unit, limit_name, limit, target=None):
        records.append({"name": name, "value": value, "unit": unit, "limit_name": limit_name,
                        "limit_value": limit, "target": target})

    # 1. cache-hit submission rate vs async launch_kernel
    x, z = _Tensor(acl, (256,)), _Tensor(acl, (256,))
    attr = acl.op.create_attr()
    _ok(acl.op.compile("Add", [x.desc, x.desc], [z.desc], attr, 0, 0, None), "compile")
    binary, ret = acl.rt.binary_load_from_data(_EMPTY)
    func, ret = acl.rt.binary_get_function(binary, "empty")
    n = 20000 if quick else 60000
    ex = acl.op.execute_v2

    def hits(k):
        for _ in range(k):
            ex("Add", [x.desc, x.desc], [x.buf, x.buf], [z.desc], [z.buf], attr, s)

    def launches(k):
        for _ in range(k):
            acl.rt.launch_kernel(func, 1, [], s)

    rates: dict[str, list[float]] = {"op": [], "kernel": []}
    for _ in range(3):
        for name, fn in (("op", hits), ("kernel", launches)):
            t0 = time.perf_counter()
            fn(n // 3)
            rates[name].append((n // 3) / (time.perf_counter() - t0))
            _ok(acl.rt.synchronize_stream(s), "sync")
    rec("op hit: execute_v2 Add 1 KiB (async)", statistics.median(rates["op"]), "ops/s",
        "async launch_kernel (empty)", statistics.median(rates["kernel"]),
        {"text": "≥ 100k/s", "on": "value", "op": ">=", "bound": 1e5})

    # 2. launch + sync latency vs the raw ring round trip, in rounds taking turns with it
    reps = 500 if quick else 2000

    def op_sync():
        ex("Add", [x.desc, x.desc], [x.buf, x.buf], [z.desc], [z.buf], attr, s)
        acl.rt.synchronize_stream(s)

    def kernel_sync():
        acl.rt.launch_kernel(func, 1, [], s)
        acl.rt.synchronize_stream(s)

    target3 = {"text": "≤ 3x", "on": "ratio", "op": "<=", "bound": 3.0}
    ctx = Context(quick, Tracker())
    try:
        for name, call in (("ops: tiny op launch+sync", op_sync),
                           ("ops: empty kernel launch+sync", kernel_sync)):
            ours, raw = latency_beside_ring(ctx, call, reps)
            rec(name, ours, "µs", "bare ring round trip", raw, target3)
    finally:
        ctx.close()
        cleanup(ctx.track)

    # 3. compile vs re-tile vs hit per family
    for op, (shapes, attrs, linear) in _FAMILIES.items():
        row = _family(acl, D, executor, s, op, shapes, attrs, linear)
        rec(f"{op}: compile (miss)", row["compile"], "µs", f"{op}: hit (host)", row["hit"])
        if row.get("retile") is not None:
            rec(f"{op}: re-tile", row["retile"], "µs", f"{op}: hit (host)", row["hit"])

    # 4. scenarios
    def run_rows(batches, incremental=True):
        executor.INCREMENTAL[0] = incremental
        before = op_cache_stats()
        for b in batches:
            _run(acl, s, b)
        after = op_cache_stats()
        executor.INCREMENTAL[0] = True
        d = {k: after[k] - before[k] for k in ("hits", "misses", "retiles", "compiles",
                                               "evictions")}
        calls = len(batches)
        return d, calls

    cycle = [16, 32, 64] * (30 if quick else 100)
    run_rows([16, 32, 64])  # warm-up
    d, calls = run_rows(cycle)
    rec("batch {16,32,64} cycling: hit rate", 100.0 * d["hits"] / calls, "%",
        "all calls", 100.0, {"text": "≥ 99 %", "on": "value", "op": ">=", "bound": 99.0})
    grow = list(range(1, 129 if quick else 513))
    for inc in (False, True):
        d, calls = run_rows([b + 1000 * inc for b in grow], incremental=inc)
        served = d["hits"] + d["retiles"]
        rec(f"batch 1..{grow[-1]} growing, incremental {'on' if inc else 'off'}: "
            "served without compiling", 100.0 * served / calls, "%", "all calls", 100.0)
        notes.append(f"batch 1..{grow[-1]} growing, incremental {'on' if inc else 'off'}:"
                     f" {d['compiles']} compiles, {d['retiles']} re-tiles, {d['hits']} hits")
    cache.set_capacity(8)
    executor.INCREMENTAL[0] = False
    shapes = [2000 + i for i in range(16)]
    run_rows(shapes, incremental=False)
    d, calls = run_rows(shapes * (3 if quick else 10), incremental=False)
    rec("capacity 8 < 16 shapes cycling: miss rate", 100.0 * d["misses"] / calls, "%",
        "all calls", 100.0)
    notes.append(f"capacity 8 < 16 shapes cycling: {d['hits']} hits in {calls} calls "
                 "(LRU thrash)")
    rec("capacity 8 < 16 shapes cycling: evictions", float(d["evictions"]), "evictions",
        "calls", float(calls))
    cache.set_capacity(cache.DEFAULT_MAX_OPQUEUE_NUM)
    with open(out, "w") as f:
        json.dump({"records": records, "notes": notes}, f)
    _ok(acl.rt.destroy_stream(s), "destroy_stream")
    _ok(acl.rt.reset_device(0), "reset_device")
    return 0


def _run(acl, s, batch: int, op: str = "Add") -> None:
    """compile_and_execute_v2 of ``op`` with a batch of ``batch`` rows, synchronised."""
    x = _Tensor(acl, (batch, 64))
    b = _Tensor(acl, (64,))
    _ok(acl.op.compile_and_execute_v2(op, [x.desc, b.desc], [x.buf, b.buf], [x.desc],
                                      [x.buf], 0, 0, 0, None, s), "compile_and_execute_v2")
    _ok(acl.rt.synchronize_stream(s), "sync")
    acl.rt.free(x.ptr)
    acl.rt.free(b.ptr)


def _family(acl, D, executor, s, op, shapes, attrs, linear) -> dict:
    from npuemu.host.ops import registry, signature

    attr = D.create_attr()
    for k, v in attrs.items():
        attr.set("list_int" if isinstance(v, list) else "int", k, v)

    def descs(shp):
        ins = [D.create_tensor_desc(0, list(x), 2) for x in shp]
        op_def = registry.lookup(op)
        specs = [signature.spec(d) for d in ins]
        outs = signature.outputs(op_def, specs, [], registry.attrs_of(op_def, attrs))
        return ins, [D.create_tensor_desc(0, list(o.shape), 2) for o in outs], outs

    from npuemu.host.core import runtime

    link = runtime.get().current_link()
    ins, outs, _specs = descs(shapes)
    t0 = time.perf_counter_ns()
    entry = executor.compile_request(executor.request(op, ins, outs, attr), link)
    row: dict[str, float | None] = {"compile": (time.perf_counter_ns() - t0) / 1e3}
    bufs = []
    for d in (*ins, *outs):
        p, _ = acl.rt.malloc(max(d.size(), 1), 0)
        bufs.append(D.create_data_buffer(p, d.size()).handle)
    nin = len(ins)

    def hit():
        executor.execute(op, [d.handle for d in ins], bufs[:nin], [d.handle for d in outs],
                         bufs[nin:], attr.handle, s)

    row["hit"] = _median_us(hit, 2000)
    acl.rt.synchronize_stream(s)
    if linear is not None:
        ins2, outs2, _ = descs(linear)
        t0 = time.perf_counter_ns()
        entry2 = executor.compile_request(executor.request(op, ins2, outs2, attr), link)
        row["retile"] = (time.perf_counter_ns() - t0) / 1e3
        if entry2.loaded is not entry.loaded:
            row["retile"] = None
    return row


def _disk_child(out: str) -> int:
    from npuemu.host import acl
    from npuemu.host.api import op_cache_stats

    _ok(acl.rt.set_device(0), "set_device")
    s, _ = acl.rt.create_stream()
    _run(acl, s, 4, "Sub")  # imports, first malloc and first launch, outside the timing
    t0 = time.perf_counter()
    _run(acl, s, 8)
    first = time.perf_counter() - t0
    with open(out, "w") as f:
        json.dump({"first_s": first, "compiles": op_cache_stats()["compiles"]}, f)
    acl.rt.destroy_stream(s)
    acl.rt.reset_device(0)
    return 0


@figure("ops")
def fig_ops(ctx: Context) -> list[Record]:
    """Single-op runtime figures (see the module docstring)."""
    env = child_env(1)
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-ops-") as tmp:
        out = os.path.join(tmp, "out.json")
        _spawn(ctx, env, "--child", out, *(["--quick"] if ctx.quick else []))
        with open(out) as f:
            got = json.load(f)
        records = [Record(**{**r, "target": Target(**r["target"]) if r["target"] else None})
                   for r in got["records"]]
        for text in got["notes"]:
            ctx.note(text)
        denv = {**env, "ASCEND_CACHE_PATH": os.path.join(tmp, "cache")}
        runs = []
        for i in range(2):
            path = os.path.join(tmp, f"disk{i}.json")
            _spawn(ctx, denv, "--disk-child", path)
            with open(path) as f:
                runs.append(json.load(f))
    records.append(Record("2nd process first call (disk cache)", runs[1]["first_s"] * 1e3, "ms",
                          "1st process first call", runs[0]["first_s"] * 1e3))
    ctx.note(f"compiles in the 1st process {runs[0]['compiles']}, "
             f"in the 2nd {runs[1]['compiles']} (its binaries came from the disk cache)")
    return records


def _spawn(ctx: Context, env: dict, *args: str) -> None:
    run_module(ctx, "npuemu.tools.bench.ops", env, list(args), 300)


def child_main(argv: list[str]) -> int:
    """The figure's children (``runner.run_module``): ``--child OUT [--quick]``,
    ``--disk-child OUT``."""
    if argv[0] == "--child":
        return _child("--quick" in argv, argv[1])
    return _disk_child(argv[1])
