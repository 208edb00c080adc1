"""bfloat16 collectives on one node (HCCL_DATA_TYPE_BFP16, carried as uint16 bits, reduced
by the cards' reduce kernel through float32 with round-to-nearest-even).

Expected values come from a float32 reference with bf16 rounding (``npuemu.shared.bf16``):
with 2 ranks one rounding of op(a, b), exact for any inputs; with 3 ranks the inputs are
small integers so every partial result is exact whatever the order of the steps. Both
algorithms; HCCL_BUFFSIZE=1 MB so the large case runs in chunks; the pyhccl face too.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

CHILD = '''
import json, sys
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
    return bits, [DeviceArray.from_numpy(b.view(hccl.bfloat16), d) for b, d in zip(bits, devs)]

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
    for r, (o, e) in enumerate(zip(outs, expect)):
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
                    for c, x, s in zip(comms, xs, streams)]
            check(outs, [want(bits, op)] * P, f"all_reduce {n} {op} {algo}")
        bits, xs = inputs(n * P)
        outs = [c.reduce_scatter(x, op="sum", stream=s, algo=algo)
                for c, x, s in zip(comms, xs, streams)]
        full = want(bits, "sum")
        check(outs, [full[r * n:(r + 1) * n] for r in range(P)], f"reduce_scatter {n} {algo}")
        bits, xs = inputs(n)
        outs = [c.all_gather(x, stream=s, algo=algo) for c, x, s in zip(comms, xs, streams)]
        check(outs, [np.concatenate(bits)] * P, f"all_gather {n} {algo}")
        bits, xs = inputs(n)
        outs = [c.broadcast(x, root=P - 1, stream=s, algo=algo)
                for c, x, s in zip(comms, xs, streams)]
        check(outs, [bits[P - 1]] * P, f"broadcast {n} {algo}")
    bits, xs = inputs(n)
    ys = [DeviceArray(n, hccl.bfloat16, d) for d in devs]
    for c, x, y, s in zip(comms, xs, ys, streams):
        c.reduce(x, y, op="max", root=0, stream=s)
    check(ys, [want(bits, "max")] + [None] * (P - 1), f"reduce {n}")
for c in comms:
    c.destroy()
print("RESULT " + json.dumps({"cases": cases, "failures": failures}))
'''


@pytest.mark.parametrize("ranks", [2, 3])
def test_bf16_collectives_against_rounded_float32(run_py, ranks: int) -> None:
    code = f"import sys; sys.argv = ['m', '{ranks}']\n" + CHILD
    env = {"NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M", "HCCL_BUFFSIZE": "1",
           "NPUEMU_DEVICES": str(ranks), "NPUEMU_TOPOLOGY": f"0-{ranks - 1}"}
    res = run_py(code, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    result = json.loads(line[7:])
    assert result["failures"] == []
    assert result["cases"] == 2 * 2 * 7 + 2


def test_bf16_through_the_pyhccl_face(run_py) -> None:
    """``HcclAllReduce(..., HCCL_DATA_TYPE_BFP16=11, ...)`` with raw pointers, two cards."""
    code = '''
    import threading
    import numpy as np
    from npuemu.host import acl
    from npuemu.host.acl import hccl as pyhccl
    from npuemu.shared.bf16 import from_float32, to_float32

    acl.init()
    out = {}
    a = from_float32(np.array([1.5, -2.0, 3.25, 1e30], np.float32))
    def rank(r):
        acl.rt.set_device(r)
        s, _ = acl.rt.create_stream()
        x, _ = acl.rt.malloc(8, 0)
        acl.rt.memcpy(x, 8, a.ctypes.data, 8, 1)
        ret = pyhccl.HcclAllReduce(x, x, 4, pyhccl.HCCL_DATA_TYPE_BFP16,
                                   pyhccl.HCCL_REDUCE_SUM, comms[r], s)
        assert ret == 0, ret
        acl.rt.synchronize_stream(s)
        got = np.empty(4, np.uint16)
        acl.rt.memcpy(got.ctypes.data, 8, x, 8, 2)
        out[r] = to_float32(got).tolist()
    for d in (0, 1):
        acl.rt.set_device(d)
    ret, comms = pyhccl.HcclCommInitAll([0, 1])
    assert ret == 0, ret
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in ts: t.start()
    for t in ts: t.join(60)
    for c in comms:
        pyhccl.HcclCommDestroy(c)
    print("OUT", json.dumps(out))
    '''
    res = run_py("import json\n" + code.replace("\n    ", "\n"), timeout=120,
                 env={"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "HCCL_BUFFSIZE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("OUT ")][-1][4:])
    # 1e30 is not a bf16: both ranks carry its rounding, and the doubled value is exact
    twice = float(np_round(1e30)) * 2
    assert out == {"0": [3.0, -4.0, 6.5, twice], "1": [3.0, -4.0, 6.5, twice]}


def np_round(value: float) -> float:
    import numpy as np

    from npuemu.shared.bf16 import from_float32, to_float32

    return float(to_float32(from_float32(np.array([value], np.float32)))[0])
