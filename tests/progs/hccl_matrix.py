"""Child program of ``tests/integration/test_hccl.py``: every collective x dtype x reduce
op x algorithm for one rank count, on one node, against numpy. Run as
``python hccl_matrix.py P [quick]``; prints one JSON line ``RESULT {...}`` with the cases
run and the failures."""

import json
import sys

import numpy as np

from npuemu.host.api import Device, DeviceArray, Stream, hccl

P = int(sys.argv[1])
QUICK = len(sys.argv) > 2
DTYPES = ["int8", "int32", "int64", "float16", "float32"]
OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
rng = np.random.default_rng(P)
devs = [Device(d) for d in range(P)]
comms = hccl.init_all(list(range(P)))
streams = [Stream(d) for d in devs]
failures, cases = [], 0


def arrays(n, dtype):
    host = [rng.integers(-3, 4, n).astype(dtype) for _ in range(P)]
    return host, [DeviceArray.from_numpy(h, d) for h, d in zip(host, devs, strict=True)]


def finish(outs, expect, what):
    global cases
    cases += 1
    for s in streams:
        s.synchronize()
    for r in range(P):
        if expect[r] is None:
            continue
        got = outs[r].to_numpy()
        if not np.array_equal(got, expect[r]):
            failures.append(f"{what} rank {r}: {got[:6]} != {expect[r][:6]}")


def reduce_all(host, op):
    acc = host[0].copy()
    for h in host[1:]:
        OPS[op](acc, h, out=acc)
    return acc


ALGOS = ("mesh", "ring", "hier") if P == 8 else ("mesh", "ring")  # hier: two HCCS groups
for dtype in DTYPES:
    for n in ([5, 3001] if not QUICK else [3001]):
        for algo in ALGOS:
            for op in OPS:
                host, xs = arrays(n, dtype)
                outs = [c.all_reduce(x, op=op, stream=s, algo=algo)
                        for c, x, s in zip(comms, xs, streams, strict=True)]
                finish(outs, [reduce_all(host, op)] * P, f"all_reduce {dtype} {n} {op} {algo}")
                host, xs = arrays(n * P, dtype)
                outs = [c.reduce_scatter(x, op=op, stream=s, algo=algo)
                        for c, x, s in zip(comms, xs, streams, strict=True)]
                full = reduce_all(host, op)
                finish(outs, [full[r * n:(r + 1) * n] for r in range(P)],
                       f"reduce_scatter {dtype} {n} {op} {algo}")
            host, xs = arrays(n, dtype)
            outs = [c.all_gather(x, stream=s, algo=algo)
                    for c, x, s in zip(comms, xs, streams, strict=True)]
            finish(outs, [np.concatenate(host)] * P, f"all_gather {dtype} {n} {algo}")
            root = (n + P - 1) % P
            host, xs = arrays(n, dtype)
            for c, x, s in zip(comms, xs, streams, strict=True):
                c.broadcast(x, root=root, stream=s, algo=algo)
            finish(xs, [host[root]] * P, f"broadcast {dtype} {n} root {root} {algo}")
        for op in OPS:
            host, xs = arrays(n, dtype)
            outs = [DeviceArray(n, dtype, d) for d in devs]
            for c, x, y, s in zip(comms, xs, outs, streams, strict=True):
                c.reduce(x, y, op=op, root=P - 1, stream=s)
            finish(outs, [None] * (P - 1) + [reduce_all(host, op)], f"reduce {dtype} {n} {op}")
        host, xs = arrays(n * P, dtype)
        outs = [c.all_to_all(x, stream=s) for c, x, s in zip(comms, xs, streams, strict=True)]
        finish(outs, [np.concatenate([host[j][r * n:(r + 1) * n] for j in range(P)])
                      for r in range(P)], f"all_to_all {dtype} {n}")
        # a chain of send/recv: rank r receives from r-1 then sends to r+1
        host, xs = arrays(n, dtype)
        outs = [DeviceArray(n, dtype, d) for d in devs]
        for r in range(P):
            if r:
                comms[r].recv(outs[r], r - 1, stream=streams[r])
            if r + 1 < P:
                comms[r].send(xs[r] if r == 0 else outs[r], r + 1, stream=streams[r])
        finish(outs, [None] + [host[0]] * (P - 1), f"send/recv {dtype} {n}")

# larger than HCCL_BUFFSIZE (the test sets 1 MB): the host-staged path runs in chunks
n = 150001
for algo in (*ALGOS, "staged-mesh", "staged-ring"):
    host, xs = arrays(n, "float32")
    outs = [c.all_reduce(x, stream=s, algo=algo) for c, x, s in zip(comms, xs, streams,
                                                                     strict=True)]
    finish(outs, [reduce_all(host, "sum")] * P, f"chunked all_reduce {algo}")
    outs = [c.all_gather(x, stream=s, algo=algo) for c, x, s in zip(comms, xs, streams,
                                                                     strict=True)]
    finish(outs, [np.concatenate(host)] * P, f"chunked all_gather {algo}")
    host, xs = arrays(n * P, "float32")
    outs = [c.reduce_scatter(x, op="max", stream=s, algo=algo)
            for c, x, s in zip(comms, xs, streams, strict=True)]
    full = reduce_all(host, "max")
    finish(outs, [full[r * n:(r + 1) * n] for r in range(P)], f"chunked reduce_scatter {algo}")
    host, xs = arrays(n, "float32")
    for c, x, s in zip(comms, xs, streams, strict=True):
        c.broadcast(x, root=1, stream=s, algo=algo)
    finish(xs, [host[1]] * P, f"chunked broadcast {algo}")

# all_to_allv: rank r sends r+j+1 elements to rank j
from npuemu.host.hccl import all_to_allv  # noqa: E402

dt = 4  # HCCL_DATA_TYPE_FP32
sends, recvs, expect = [], [], []
host = [rng.standard_normal(sum(r + j + 1 for j in range(P))).astype(np.float32)
        for r in range(P)]
for r in range(P):
    sc = [r + j + 1 for j in range(P)]
    sd = list(np.cumsum([0, *sc[:-1]]).tolist())
    rc = [j + r + 1 for j in range(P)]
    rd = list(np.cumsum([0, *rc[:-1]]).tolist())
    x = DeviceArray.from_numpy(host[r], devs[r])
    y = DeviceArray(sum(rc), np.float32, devs[r])
    sends.append((x, sc, sd))
    recvs.append((y, rc, rd))
for r in range(P):
    x, sc, sd = sends[r]
    y, rc, rd = recvs[r]
    all_to_allv(x.ptr, sc, sd, dt, y.ptr, rc, rd, dt, comms[r].handle, streams[r].handle)
ex = []
for r in range(P):
    parts = []
    for j in range(P):
        _, scj, sdj = sends[j]
        parts.append(host[j][sdj[r]:sdj[r] + scj[r]])
    ex.append(np.concatenate(parts))
finish([y for y, _, _ in recvs], ex, "all_to_allv")
for c, s in zip(comms, streams, strict=True):
    c.barrier(stream=s)
for s in streams:
    s.synchronize()
for c in comms:
    c.destroy()
print("RESULT " + json.dumps({"cases": cases, "failures": failures[:20],
                              "nfail": len(failures)}))
