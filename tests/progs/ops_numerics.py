"""Child program of ``tests/integration/test_ops_numerics.py``: every op type of the
library run through the worker (``npuemu.host.api.run_op``) and compared with numpy; ``R``
maps each case to True (within tolerance) or what went wrong (the error, a shape or dtype
mismatch, the max errors).

``python ops_numerics.py every_op`` runs the cases and prints ``R`` (see ``childlib``).
"""

import math

import numpy as np
from childlib import R, main, scenario

from npuemu.host.api import DeviceArray, run_op

rng = np.random.default_rng(5)


def rnd(*shape, dtype=np.float32, lo=-2.0, hi=2.0):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(lo) if lo > -50 else -50, 50, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


def pos(*shape, dtype=np.float32):
    return rnd(*shape, dtype=dtype, lo=0.1, hi=3.0)


def dev(a):
    return DeviceArray.from_numpy(a)
erf = np.vectorize(math.erf)


def gelu(v):
    return 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
win = np.lib.stride_tricks.sliding_window_view


def conv_ref(x, w, s, p):
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    v = win(x, w.shape[2:], axis=(2, 3))[:, :, ::s, ::s]
    return np.einsum("nchwij,ocij->nohw", v, w)


def check(name, op, inputs, attrs, want, tol=1e-5):
    try:
        got = [o.to_numpy() for o in run_op(op, [dev(x) if d else x for x, d in inputs], attrs)]
    except Exception as err:
        R[name] = f"error {err!r}"
        return
    want = want if isinstance(want, list) else [want]
    errs = []
    for g, w in zip(got, want, strict=False):
        w = np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            R[name] = f"shape/dtype {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
            return
        errs.append(float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)),
                                 initial=0.0)) if g.size else 0.0)
    R[name] = max(errs) <= tol * max(1.0, float(np.max(np.abs(want[0]), initial=1.0))) or errs


@scenario
def every_op():
    a, _b = rnd(64, 33), rnd(33)  # _b: drawn to keep the random stream of the cases
    big, bigb = rnd(4096, 40), rnd(4096, 40)           # several blocks and tiles
    for dt in (np.float32, np.float16, np.int32):
        x, y = rnd(5, 7, dtype=dt), rnd(7, dtype=dt)
        if dt == np.int32:
            y = np.where(y == 0, 3, y).astype(dt)
        t = 1e-5 if dt != np.float16 else 2e-3
        for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                       ("Maximum", np.maximum), ("Minimum", np.minimum)):
            check(f"{op}-{np.dtype(dt).name}", op, [(x, 1), (y, 1)], None, fn(x, y), t)
        div = np.floor_divide(x, y) if dt == np.int32 else (x / y).astype(dt)
        check(f"Div-{np.dtype(dt).name}", "Div", [(x, 1), (y, 1)], None, div, t)
    xx, yy = rnd(3, 1, 5), rnd(4, 1)
    check("Add-broadcast-3d", "Add", [(xx, 1), (yy, 1)], None, xx + yy)
    check("Add-scalar", "Add", [(np.float32(2.5).reshape(()), 1), (a, 1)], None, a + 2.5)
    check("Add-big", "Add", [(big, 1), (bigb, 1)], None, big + bigb)
    p = pos(6, 9)
    e = rnd(9)
    check("Pow", "Pow", [(p, 1), (e, 1)], None, np.power(p, e), 1e-4)
    check("Sqrt", "Sqrt", [(p, 1)], None, np.sqrt(p))
    check("Exp", "Exp", [(a, 1)], None, np.exp(a), 1e-5)
    check("Log", "Log", [(p, 1)], None, np.log(p))
    check("Abs", "Abs", [(a, 1)], None, np.abs(a))
    ai32 = rnd(9, dtype=np.int32)
    check("Abs-int", "Abs", [(ai32, 1)], None, np.abs(ai32))
    ai = rnd(9, dtype=np.int64)
    check("Neg-int64", "Neg", [(ai, 1)], None, -ai)
    check("Relu", "Relu", [(big, 1)], None, np.maximum(big, 0))
    check("Gelu", "Gelu", [(a, 1)], None, gelu(a), 1e-5)
    check("Sigmoid", "Sigmoid", [(a, 1)], None, 1 / (1 + np.exp(-a)), 1e-5)
    check("Tanh", "Tanh", [(a, 1)], None, np.tanh(a), 1e-5)
    check("Erf", "Erf", [(a, 1)], None, erf(a).astype(np.float32), 1e-6)
    check("Cast-f32-f16", "Cast", [(a, 1)], {"dst_type": 1}, a.astype(np.float16))
    check("Cast-f32-i32", "Cast", [(a * 10, 1)], {"dst_type": 3}, (a * 10).astype(np.int32))
    c = rnd(5, 7) > 0
    x1, x2 = rnd(5, 7), rnd(7)
    check("Where", "Where", [(c, 1), (x1, 1), (x2, 1)], None, np.where(c, x1, x2))
    check("Fill", "Fill", [(np.array([3, 4], np.int32), 0), (np.array([1.5], np.float32), 1)],
          None, np.full((3, 4), 1.5, np.float32))
    check("Identity", "Identity", [(a, 1)], None, a)
    m1, m2, bias = rnd(70, 24), rnd(24, 9), rnd(9)
    check("MatMul", "MatMul", [(m1, 1), (m2, 1)], None, m1 @ m2, 1e-5)
    check("MatMul-bias", "MatMul", [(m1, 1), (m2, 1), (bias, 1)], None, m1 @ m2 + bias, 1e-5)
    check("MatMul-t", "MatMul", [(m1.T.copy(), 1), (m2.T.copy(), 1)],
          {"transpose_x1": True, "transpose_x2": True}, m1 @ m2, 1e-5)
    bm1, bm2 = rnd(6, 5, 8), rnd(1, 8, 3)
    check("BatchMatMul", "BatchMatMul", [(bm1, 1), (bm2, 1)], None, np.matmul(bm1, bm2), 1e-5)
    cx, cw = rnd(3, 4, 9, 9), rnd(6, 4, 3, 3)
    check("Conv2D-NCHW", "Conv2D", [(cx, 1), (cw, 1)],
          {"strides": [1, 1, 2, 2], "pads": [1, 1, 1, 1]}, conv_ref(cx, cw, 2, 1), 1e-4)
    check("Conv2D-NHWC", "Conv2D", [(cx.transpose(0, 2, 3, 1).copy(), 1), (cw, 1)],
          {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0], "data_format": "NHWC"},
          conv_ref(cx, cw, 1, 0).transpose(0, 2, 3, 1), 1e-4)
    px = rnd(2, 3, 8, 8)
    mp = win(px, (2, 2), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-1, -2))
    check("MaxPool", "MaxPool", [(px, 1)], {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2]}, mp)
    ap = win(px, (3, 3), axis=(2, 3)).mean(axis=(-1, -2))
    check("AvgPool", "AvgPool", [(px, 1)], {"ksize": [1, 1, 3, 3], "strides": [1, 1, 1, 1]},
          ap.astype(np.float32), 1e-5)
    check("GlobalAveragePool", "GlobalAveragePool", [(px, 1)], None,
          px.mean(axis=(2, 3), keepdims=True), 1e-5)
    sc, of, mu, var = pos(3), rnd(3), rnd(3), pos(3)
    bn = (px - mu.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-4) \
        * sc.reshape(1, 3, 1, 1) + of.reshape(1, 3, 1, 1)
    check("BatchNorm", "BatchNorm", [(px, 1), (sc, 1), (of, 1), (mu, 1), (var, 1)], None, bn, 1e-4)
    lx, g, be = rnd(10, 16), pos(16), rnd(16)
    mu_ = lx.mean(-1, keepdims=True)
    ln = (lx - mu_) / np.sqrt(((lx - mu_) ** 2).mean(-1, keepdims=True) + 1e-7) * g + be
    check("LayerNorm", "LayerNorm", [(lx, 1), (g, 1), (be, 1)],
          {"begin_norm_axis": -1, "begin_params_axis": -1}, ln, 1e-4)
    ex = np.exp(a - a.max(-1, keepdims=True))
    check("SoftmaxV2", "SoftmaxV2", [(a, 1)], None, ex / ex.sum(-1, keepdims=True), 1e-5)
    e0 = np.exp(a - a.max(0, keepdims=True))
    check("SoftmaxV2-axis0", "SoftmaxV2", [(a, 1)], {"axes": [0]}, e0 / e0.sum(0, keepdims=True))
    r3 = rnd(4, 5, 6)
    check("ReduceSum", "ReduceSum", [(r3, 1), (np.array([1, 2], np.int32), 0)], None,
          r3.sum(axis=(1, 2)), 1e-5)
    check("ReduceMean-keep", "ReduceMean", [(r3, 1)], {"axes": [0], "keep_dims": True},
          r3.mean(axis=0, keepdims=True), 1e-5)
    check("ReduceMax-all", "ReduceMax", [(r3, 1)], {"axes": []}, r3.max())
    check("Transpose", "Transpose", [(r3, 1)], {"perm": [2, 0, 1]}, r3.transpose(2, 0, 1))
    check("Reshape", "Reshape", [(r3, 1), (np.array([-1, 6], np.int64), 0)], None,
          r3.reshape(-1, 6))
    check("Concat", "Concat", [(r3, 1), (r3 * 2, 1)], {"concat_dim": 1},
          np.concatenate([r3, r3 * 2], 1))
    check("Split", "Split", [(r3, 1)], {"split_dim": 2, "num_split": 3}, np.split(r3, 3, 2))
    idx = np.array([[0, 3], [2, 1]], np.int32)
    check("Gather", "Gather", [(r3, 1), (idx, 1)], {"axis": 1}, np.take(r3, idx, axis=1))
    check("Pad", "Pad", [(r3, 1), (np.array([[1, 0], [0, 2], [1, 1]], np.int32), 0)], None,
          np.pad(r3, ((1, 0), (0, 2), (1, 1))))
    activations_and_moves(big)
    bf16_and_int8()


def activations_and_moves(big):
    """The ops the onnx zoo's models used to be the only check of."""
    for dt, t in ((np.float32, 1e-6), (np.float16, 2e-3)):
        v = big[:300].astype(dt) * 20  # exp overflows float16 past 11: logaddexp must not
        check(f"Softplus-{np.dtype(dt).name}", "Softplus", [(v, 1)], None,
              np.logaddexp(0, v.astype(np.float32)).astype(dt), t)
    sv = np.array([-3.5, -0.0, 0.0, 2.0, np.inf, -np.inf], np.float32)
    check("Sign", "Sign", [(sv, 1)], None, np.sign(sv))
    si = rnd(50, dtype=np.int32)
    check("Sign-int32", "Sign", [(si, 1)], None, np.sign(si))
    sh = rnd(40, 9)
    for lambd, bias in ((0.5, 0.0), (1.2, 0.3)):
        want = np.where(sh < -lambd, sh + bias, np.where(sh > lambd, sh - bias, 0)).astype(
            np.float32)
        check(f"Shrink-{lambd}", "Shrink", [(sh, 1)], {"lambd": lambd, "bias": bias}, want)
    lx = big[:200] * 30  # large logits: the max is subtracted before exp
    for axes in ([-1], [0]):
        m = lx - lx.max(axis=axes[0], keepdims=True)
        check(f"LogSoftmaxV2-axis{axes[0]}", "LogSoftmaxV2", [(lx, 1)], {"axes": axes},
              m - np.log(np.exp(m).sum(axis=axes[0], keepdims=True)), 1e-5)
    ix, g, b = rnd(3, 4, 5, 6), pos(4), rnd(4)
    mu, var = ix.mean(axis=(2, 3), keepdims=True), ix.var(axis=(2, 3), keepdims=True)
    check("InstanceNorm", "InstanceNorm", [(ix, 1), (g, 1), (b, 1)], {"epsilon": 1e-5},
          ((ix - mu) / np.sqrt(var + 1e-5) * g.reshape(1, 4, 1, 1)
           + b.reshape(1, 4, 1, 1)).astype(np.float32), 1e-5)
    x5 = rnd(2, 3, 4, 5, 6)
    sc, of, m3, v3 = pos(3), rnd(3), rnd(3), pos(3)
    per_c = (1, 3, 1, 1, 1)
    check("BatchNorm3D", "BatchNorm3D", [(x5, 1), (sc, 1), (of, 1), (m3, 1), (v3, 1)],
          {"epsilon": 1e-3}, ((x5 - m3.reshape(per_c)) / np.sqrt(v3.reshape(per_c) + 1e-3)
                              * sc.reshape(per_c) + of.reshape(per_c)).astype(np.float32),
          1e-4)
    r = rnd(4, 10, 3, dtype=np.int32)
    check("SplitVD", "SplitVD", [(r, 1)], {"size_splits": [2, 5, 3], "split_dim": 1,
                                           "num_split": 3}, np.split(r, [2, 7], axis=1))
    check("SplitVD-rest", "SplitVD", [(r, 1)], {"size_splits": [1, -1], "split_dim": -1,
                                                "num_split": 2}, np.split(r, [1], axis=-1))
    check("TileD", "TileD", [(r, 1)], {"multiples": [2, 1, 3]}, np.tile(r, (2, 1, 3)))
    check("TileD-rank-up", "TileD", [(r[0], 1)], {"multiples": [2, 1, 1]},
          np.tile(r[0], (2, 1, 1)))
    e = rnd(3, 1, dtype=np.float16)
    check("Expand", "Expand", [(e, 1), (np.array([2, 3, 4], np.int64), 0)], None,
          np.broadcast_to(e, (2, 3, 4)))
    check("Expand-attr", "Expand", [(e, 1)], {"shape": [3, 5]}, np.broadcast_to(e, (3, 5)))


def bf16_and_int8():
    """bfloat16 (float32 math, one round to nearest even on store) and int8 with int32
    accumulation, through the card: the kernels' bf16 import and uint16 views included.
    The expected bfloat16 arrays are rounded by shared/bf16 and typed as run_op returns
    bfloat16 (ml_dtypes' once imported, as onnx does, else hccl.bfloat16's tagged uint16);
    every comparison is exact."""
    from npuemu.host.ops.types import user_dtype
    from npuemu.shared.bf16 import from_float32, to_float32

    def bf(v):  # float32 values -> bfloat16, rounded to nearest even
        return from_float32(np.asarray(v, np.float32)).view(user_dtype("bfloat16"))

    x, y = bf(rnd(300, 17)), bf(rnd(17))
    fx, fy = to_float32(x.view(np.uint16)), to_float32(y.view(np.uint16))
    check("Add-bfloat16", "Add", [(x, 1), (y, 1)], None, bf(fx + fy), 0)
    check("Sigmoid-bfloat16", "Sigmoid", [(x, 1)], None, bf(1 / (1 + np.exp(-fx))), 0)
    check("ReduceSum-bfloat16", "ReduceSum", [(bf(np.ones((3, 1000))), 1)], {"axes": [1]},
          bf(np.full(3, 1000)), 0)  # bf16 arithmetic would stop at 256
    check("Cast-f32-bf16", "Cast", [(fx * 1.001, 1)], {"dst_type": 27}, bf(fx * 1.001), 0)
    check("Cast-bf16-f32", "Cast", [(x, 1)], {"dst_type": 0}, fx, 0)
    m1, m2 = bf(rnd(70, 24)), bf(rnd(24, 9))
    check("MatMul-bfloat16", "MatMul", [(m1, 1), (m2, 1)], None,
          bf(to_float32(m1.view(np.uint16)) @ to_float32(m2.view(np.uint16))), 0)
    a8, b8 = (rng.integers(-128, 128, sh).astype(np.int8) for sh in ((40, 64), (64, 6)))
    bias = rnd(6, dtype=np.int32)
    check("MatMulV2-int8", "MatMulV2", [(a8, 1), (b8, 1), (bias, 1)], None,
          a8.astype(np.int32) @ b8.astype(np.int32) + bias, 0)
    cx = rng.integers(-128, 128, (2, 4, 9, 9)).astype(np.int8)
    cw = rng.integers(-128, 128, (6, 4, 3, 3)).astype(np.int8)
    check("Conv2D-int8", "Conv2D", [(cx, 1), (cw, 1)],
          {"strides": [1, 1, 2, 2], "pads": [1, 1, 1, 1]},
          conv_ref(cx.astype(np.int64), cw.astype(np.int64), 2, 1).astype(np.int32), 0)


if __name__ == "__main__":
    main()
