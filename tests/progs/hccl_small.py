"""Child program of ``tests/integration/test_hccl_small.py``: the one-shot all_reduce (at most
``COMM_SMALL_BYTES``) for ``P`` ranks on one node, every dtype and reduce op, against numpy
folding the inputs in rank order as the cards do (so float results are compared bit for
bit). Run as ``python hccl_small.py P``; prints one JSON line ``RESULT {...}``.

Sizes: 1 and 3 elements, exactly ``COMM_SMALL_BYTES`` (the largest one-shot message) and one
element more (the mesh or hierarchical path, with small integers so that any order of the
reduction is exact). Then the paths a one-shot call can take on a card: rank 0 calls first
and its peers only after a pause far longer than ``INLINE_WAIT_S``, so rank 0's loop hands
the wait to the engine thread; rank 0's second call, on another stream of its card, meets
that busy engine and runs on it from the start. Inputs are random (integers wrap as numpy's
do)."""

import json
import sys
import time

import numpy as np

from npuemu.device.exec.collective import INLINE_WAIT_S
from npuemu.host.api import Device, DeviceArray, Stream, hccl
from npuemu.shared import layout
from npuemu.shared.bf16 import bf16_reduce, from_float32

P = int(sys.argv[1])
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
          "float32", "float64", "bfloat16"]
OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
SMALL = layout.COMM_SMALL_BYTES
rng = np.random.default_rng(P)
devs = [Device(d) for d in range(P)]
comms = hccl.init_all(list(range(P)))
streams = [Stream(d) for d in devs]
failures: list[str] = []
cases = 0


def inputs(dtype: str, n: int, exact: bool) -> list[np.ndarray]:
    """Each rank's input; ``exact``: integers in [-2, 2], whose sums and products (powers of
    two) every float type holds exactly, so every order of the reduction agrees."""
    if dtype == "bfloat16":
        vals = [(rng.integers(-2, 3, n) if exact else rng.normal(0, 8, n)).astype(np.float32)
                for _ in range(P)]
        return [from_float32(v) for v in vals]
    dt = np.dtype(dtype)
    if exact:
        lo = 0 if dt.kind == "u" else -2
        return [rng.integers(lo, 3, n).astype(dt) for _ in range(P)]
    if dt.kind == "f":
        return [rng.normal(0, 8, n).astype(dt) for _ in range(P)]
    info = np.iinfo(dt)
    return [rng.integers(info.min, info.max, n, dtype=dt, endpoint=True) for _ in range(P)]


def fold(host: list[np.ndarray], dtype: str, op: str) -> np.ndarray:
    """``host[0] op host[1] op ...`` in rank order, elementwise (bfloat16 rounded each step)."""
    acc = host[0].copy()
    for h in host[1:]:
        if dtype == "bfloat16":
            bf16_reduce(op, acc, h)
        else:
            OPS[op](acc, h, out=acc)
    return acc


def device_arrays(host: list[np.ndarray], dtype: str) -> list[DeviceArray]:
    view = hccl.bfloat16 if dtype == "bfloat16" else host[0].dtype
    return [DeviceArray.from_numpy(h.view(view), d) for h, d in zip(host, devs, strict=True)]


def check(outs: list[DeviceArray], want: np.ndarray, what: str) -> None:
    global cases
    cases += 1
    for s in streams:
        s.synchronize()
    for r, out in enumerate(outs):
        got = out.to_numpy().view(want.dtype)
        if got.tobytes() != want.tobytes():
            bad = np.flatnonzero(got.view(np.uint8) != want.view(np.uint8))[:4]
            failures.append(f"{what} rank {r}: bytes {bad.tolist()} differ: "
                            f"{got[:4].tolist()} != {want[:4].tolist()}")


for dtype in DTYPES:
    size = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    for n in (1, 3, SMALL // size, SMALL // size + 1):
        exact = n * size > SMALL  # the mesh path reduces in another order
        for op in OPS:
            host = inputs(dtype, n, exact)
            outs = [c.all_reduce(x, op=op, stream=s)
                    for c, x, s in zip(comms, device_arrays(host, dtype), streams, strict=True)]
            check(outs, fold(host, dtype, op), f"all_reduce {dtype} x{n} {op}")

# rank 0 first, its peers later: the loop's wait ends, the engine finishes it; rank 0's next
# call (another stream of card 0) finds the engine busy and runs there
late = [Stream(devs[0])]
host1, host2 = inputs("float32", 7, False), inputs("float32", 7, False)
xs1, xs2 = device_arrays(host1, "float32"), device_arrays(host2, "float32")
out1 = [comms[0].all_reduce(xs1[0], stream=streams[0])]
out2 = [comms[0].all_reduce(xs2[0], op="max", stream=late[0])]
time.sleep(50 * INLINE_WAIT_S)
for r in range(1, P):
    out1.append(comms[r].all_reduce(xs1[r], stream=streams[r]))
    out2.append(comms[r].all_reduce(xs2[r], op="max", stream=streams[r]))
late[0].synchronize()
check(out1, fold(host1, "float32", "sum"), "late peers: first call")
check(out2, fold(host2, "float32", "max"), "late peers: second call, another stream")
print("RESULT " + json.dumps({"cases": cases, "failures": failures}), flush=True)
