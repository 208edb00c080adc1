"""Child program of ``tests/integration/test_hccl_bf16.py``: bfloat16 collectives of every
kind, both algorithms, for ``P`` ranks on one node (the Pythonic face), against a float32
reference with bf16 rounding. Run as ``python hccl_bf16.py P``; prints one JSON line
``RESULT {...}`` with the cases run and the failures."""

import json
import sys

import numpy as np

from npuemu.host.api import Device, DeviceArray, Stream, hccl
from npuemu.shared.bf16 import from_float32, to_float32

P = int(sys.argv[1])
FN = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
rng = np.random.default_rng(P)
devs = [Device(d) for d in range(P)]
comms = hccl.init_all(list(range(P)))
streams = [Stream(d) for d in devs]
failures, cases = [], 0


def inputs(n):
    if P == 2:
        vals = [rng.normal(0, 50, n).astype(np.float32) for _ in range(P)]
    else:
        vals = [rng.integers(-4, 5, n).astype(np.float32) for _ in range(P)]
    bits = [from_float32(v) for v in vals]
    return bits, [DeviceArray.from_numpy(b.view(hccl.bfloat16), d)
                  for b, d in zip(bits, devs, strict=True)]


def want(bits, op):
    acc = to_float32(bits[0])
    for b in bits[1:]:
        acc = to_float32(from_float32(FN[op](acc, to_float32(b))))
    return from_float32(acc)


def check(outs, expect, what):
    global cases
    cases += 1
    for s in streams:
        s.synchronize()
    for r, (o, e) in enumerate(zip(outs, expect, strict=True)):
        if e is None:
            continue
        got = o.to_numpy().view(np.uint16)
        if not np.array_equal(got, e):
            bad = np.flatnonzero(got != e)[:4]
            failures.append(f"{what} rank {r}: at {bad.tolist()} {got[bad]} != {e[bad]}")

for n in (5, 300_001):
    for algo in ("mesh", "ring"):
        for op in FN:
            bits, xs = inputs(n)
            outs = [c.all_reduce(x, op=op, stream=s, algo=algo)
                    for c, x, s in zip(comms, xs, streams, strict=True)]
            check(outs, [want(bits, op)] * P, f"all_reduce {n} {op} {algo}")
        bits, xs = inputs(n * P)
        outs = [c.reduce_scatter(x, op="sum", stream=s, algo=algo)
                for c, x, s in zip(comms, xs, streams, strict=True)]
        full = want(bits, "sum")
        check(outs, [full[r * n:(r + 1) * n] for r in range(P)], f"reduce_scatter {n} {algo}")
        bits, xs = inputs(n)
        outs = [c.all_gather(x, stream=s, algo=algo)
                for c, x, s in zip(comms, xs, streams, strict=True)]
        check(outs, [np.concatenate(bits)] * P, f"all_gather {n} {algo}")
        bits, xs = inputs(n)
        outs = [c.broadcast(x, root=P - 1, stream=s, algo=algo)
                for c, x, s in zip(comms, xs, streams, strict=True)]
        check(outs, [bits[P - 1]] * P, f"broadcast {n} {algo}")
    bits, xs = inputs(n)
    ys = [DeviceArray(n, hccl.bfloat16, d) for d in devs]
    for c, x, y, s in zip(comms, xs, ys, streams, strict=True):
        c.reduce(x, y, op="max", root=0, stream=s)
    check(ys, [want(bits, "max")] + [None] * (P - 1), f"reduce {n}")
for c in comms:
    c.destroy()
print("RESULT " + json.dumps({"cases": cases, "failures": failures}))
