"""bfloat16 and int8 in the op library without a device: each kernel built by the compiler
and run block by block over numpy memory (``test_ops_samples.run_op``), against float32 numpy
rounded once to bfloat16 (``ml_dtypes``, round to nearest even) and exact int32 products;
the ops CANN has no bfloat16 / int8 kernel for refused with 100026; the dtype table and
tensor descriptors of ACL_BF16."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from npuemu.host import acl
from npuemu.host.ops import types as T
from tests.unit.test_ops_samples import refused, run_op

RNG = np.random.default_rng(23)
win = np.lib.stride_tricks.sliding_window_view


@pytest.fixture(scope="module")
def bf():
    """``ml_dtypes.bfloat16`` (imported here, not at collection: its import is slow)."""
    return pytest.importorskip("ml_dtypes").bfloat16


def f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float32)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint16)


def conv_ref(x: np.ndarray, w: np.ndarray, s: int, p: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    v = win(x, w.shape[2:], axis=(2, 3))[:, :, ::s, ::s]
    return np.einsum("nchwij,ocij->nohw", v, w)


def test_bf16_elementwise_and_reductions_round_once_from_float32(bf) -> None:
    # 150 rows: several blocks; ties and halfway cases come from the random draws' low bits
    x = RNG.uniform(-3, 3, (150, 19)).astype(bf)
    y = RNG.uniform(0.25, 2, (19,)).astype(bf)
    for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                   ("Div", np.divide), ("Maximum", np.maximum), ("Pow", np.power)):
        a = np.abs(x) if op == "Pow" else x
        (got,) = run_op(op, [a, y])
        assert got.dtype == bf
        np.testing.assert_array_equal(bits(got), bits(fn(f32(a), f32(y)).astype(bf)), op)
    unary = {"Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Abs": np.abs, "Neg": np.negative,
             "Relu": lambda v: np.maximum(v, 0), "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
             "Tanh": np.tanh,
             "Gelu": lambda v: 0.5 * v * (1 + np.tanh(0.7978845608028654
                                                      * (v + 0.044715 * v * v * v)))}
    for op, fn in unary.items():
        a = np.abs(x) + np.asarray(0.5, bf) if op in ("Sqrt", "Log") else x
        (got,) = run_op(op, [a])
        np.testing.assert_array_equal(bits(got), bits(fn(f32(a)).astype(bf)), op)
    # a sum of 1,000 ones in bfloat16 arithmetic stops at 256: the kernel sums in float32
    (s1,) = run_op("ReduceSum", [np.ones((4, 1000), bf)], {"axes": [1]})
    np.testing.assert_array_equal(f32(s1), np.full(4, 1000, np.float32))
    for op, fn, axes in (("ReduceSum", np.sum, [1]), ("ReduceMean", np.mean, []),
                         ("ReduceMax", np.max, [0])):
        (got,) = run_op(op, [x], {"axes": axes})
        want = fn(f32(x), axis=tuple(axes) or None).astype(bf)
        np.testing.assert_array_equal(bits(got), bits(want), op)
    xl = x * np.asarray(10, bf)  # logits with a spread: the max is subtracted in float32
    v = f32(xl)
    for axis in (-1, 0):
        m = v - v.max(axis=axis, keepdims=True)
        (sm,) = run_op("SoftmaxV2", [xl], {"axes": [axis]})
        want = (np.exp(m) / np.exp(m).sum(axis=axis, keepdims=True)).astype(bf)
        np.testing.assert_array_equal(bits(sm), bits(want), axis)
        (lsm,) = run_op("LogSoftmaxV2", [xl], {"axes": [axis]})
        want = (m - np.log(np.exp(m).sum(axis=axis, keepdims=True))).astype(bf)
        np.testing.assert_array_equal(bits(lsm), bits(want), axis)


def test_bf16_cast_and_moves(bf) -> None:
    x = RNG.uniform(-1e3, 1e3, (40, 7)).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -0.0, 3.4e38]  # NaN stays NaN, 3.4e38 rounds past the max
    (b,) = run_op("Cast", [x], {"dst_type": T.ACL_BF16})
    np.testing.assert_array_equal(bits(b), bits(x.astype(bf)))
    assert np.isnan(f32(b)[0, 0]) and np.isinf(f32(b)[0, 3])
    (back,) = run_op("Cast", [b], {"dst_type": T.ACL_FLOAT})
    np.testing.assert_array_equal(back, f32(b))
    (i32,) = run_op("Cast", [b[1:]], {"dst_type": T.ACL_INT32})
    np.testing.assert_array_equal(i32, f32(b[1:]).astype(np.int32))
    (same,) = run_op("Identity", [b])
    np.testing.assert_array_equal(bits(same), bits(b))
    (t,) = run_op("Transpose", [b], {"perm": [1, 0]})
    np.testing.assert_array_equal(bits(t), bits(b.T))
    (c,) = run_op("Concat", [b, b], {"concat_dim": 1})
    np.testing.assert_array_equal(bits(c), bits(np.concatenate([b, b], 1)))


def test_bf16_matmul_batchmatmul_and_conv2d_accumulate_in_float32(bf) -> None:
    a, b = RNG.uniform(-1, 1, (70, 24)).astype(bf), RNG.uniform(-1, 1, (24, 9)).astype(bf)
    bias = RNG.uniform(-1, 1, 9).astype(np.float32)
    (y,) = run_op("MatMul", [a, b, bias])
    np.testing.assert_array_equal(bits(y), bits((f32(a) @ f32(b) + bias).astype(bf)))
    (yt,) = run_op("MatMul", [a.T.copy(), b, bias.astype(bf)], {"transpose_x1": True})
    np.testing.assert_array_equal(bits(yt), bits((f32(a) @ f32(b) + f32(bias.astype(bf)))
                                                 .astype(bf)))
    ba = RNG.uniform(-1, 1, (3, 5, 8)).astype(bf)
    bb = RNG.uniform(-1, 1, (1, 8, 4)).astype(bf)
    (bm,) = run_op("BatchMatMul", [ba, bb])
    np.testing.assert_array_equal(bits(bm), bits(np.matmul(f32(ba), f32(bb)).astype(bf)))
    x = RNG.uniform(-1, 1, (2, 4, 9, 9)).astype(bf)
    w = RNG.uniform(-1, 1, (6, 4, 3, 3)).astype(bf)
    want = conv_ref(f32(x).astype(np.float64), f32(w).astype(np.float64), 2, 1)
    (y,) = run_op("Conv2D", [x, w], {"strides": [1, 1, 2, 2], "pads": [1, 1, 1, 1]})
    assert y.dtype == bf and np.abs(f32(y) - want).max() <= 2 ** -8 * np.abs(want).max()
    (yh,) = run_op("Conv2D", [np.ascontiguousarray(x.transpose(0, 2, 3, 1)), w],
                   {"strides": [1, 2, 2, 1], "pads": [1, 1, 1, 1], "data_format": "NHWC"})
    np.testing.assert_array_equal(bits(yh), bits(y.transpose(0, 2, 3, 1)))


def test_int8_matmulv2_and_conv2d_accumulate_exactly_in_int32() -> None:
    a = RNG.integers(-128, 128, (37, 64)).astype(np.int8)
    b = RNG.integers(-128, 128, (64, 7)).astype(np.int8)
    bias = RNG.integers(-1000, 1000, 7).astype(np.int32)
    (y,) = run_op("MatMulV2", [a, b, bias])
    assert y.dtype == np.int32  # 64 * 128 * 128 overflows int8 and int16 alike
    np.testing.assert_array_equal(y, a.astype(np.int32) @ b.astype(np.int32) + bias)
    x = RNG.integers(-128, 128, (2, 4, 9, 9)).astype(np.int8)
    w = RNG.integers(-128, 128, (6, 4, 3, 3)).astype(np.int8)
    cb = RNG.integers(-99, 99, 6).astype(np.int32)
    (y,) = run_op("Conv2D", [x, w, cb], {"strides": [1, 1, 2, 2], "pads": [1, 1, 1, 1]})
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, conv_ref(x.astype(np.int64), w.astype(np.int64), 2, 1)
                                  + cb.reshape(1, -1, 1, 1))
    (yg,) = run_op("Conv2D", [x, w[:, :2].copy()], {"groups": 2, "pads": [0, 0, 0, 0],
                                                   "strides": [1, 1, 1, 1]})
    ref = np.concatenate([conv_ref(x[:, 2 * g:2 * g + 2].astype(np.int64),
                                   w[3 * g:3 * g + 3, :2].astype(np.int64), 1, 0)
                          for g in (0, 1)], 1)
    np.testing.assert_array_equal(yg, ref)


def test_dtypes_cann_has_no_kernel_for_are_refused(bf) -> None:
    a8, b8 = np.ones((4, 4), np.int8), np.ones((4, 4), np.int8)
    assert refused("MatMul", [a8, b8]) == 100026  # int8 is MatMulV2's, not MatMul's
    assert refused("BatchMatMul", [a8, b8]) == 100026
    assert refused("MatMulV2", [a8, b8, np.ones(4, np.int8)]) == 100026  # bias must be int32
    assert refused("MatMul", [np.ones((4, 4), np.float64)] * 2) == 100026
    assert refused("Conv2D", [np.ones((1, 1, 3, 3), np.int32)] * 2) == 100026
    xb = np.ones((2, 3), bf)
    # GEMM: CANN's has no bfloat16; LayerNorm and Pad: CANN's have, npuemu's do not (yet)
    for op, args in (("LayerNorm", [xb, xb[0], xb[0]]),
                     ("GEMM", [xb, xb.T.copy(), np.ones((2, 2), bf), xb[0, :1], xb[0, :1]]),
                     ("Add", [xb, np.ones((2, 3), np.float32)]),
                     ("Pad", [xb, np.zeros((2, 2), np.int32)])):
        assert refused(op, args) == 100026, op


def test_acl_bf16_in_the_dtype_table_and_tensor_descs(bf, monkeypatch) -> None:
    assert acl.data_type_size(T.ACL_BF16) == 2
    assert T.numpy_dtype(T.ACL_BF16) == "bfloat16" and T.storage("bfloat16") == "uint16"
    assert T.acl_dtype(bf) == T.acl_dtype(np.dtype(bf)) == T.acl_dtype("bfloat16") == 27
    from npuemu.host.hccl.types import BFLOAT16
    assert T.acl_dtype(BFLOAT16) == 27 and T.acl_dtype(np.uint16) == 7
    assert T.user_dtype("bfloat16") == np.dtype(bf)
    monkeypatch.delitem(sys.modules, "ml_dtypes")  # a program that never imported it
    assert T.user_dtype("bfloat16") is BFLOAT16
    d = acl.create_tensor_desc(T.ACL_BF16, [3, 5], T.ACL_FORMAT_ND)
    assert acl.get_tensor_desc_type(d) == 27 and acl.get_tensor_desc_size(d) == 30
    acl.destroy_tensor_desc(d)
