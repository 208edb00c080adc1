"""The op library's 2-D pooling kernels (separable folds, ``host/ops/pooling.py``) against
numpy window reductions: MaxPool and AvgPool, VALID and SAME (AvgPool's mean over the real
elements), strides and window shapes of the light models, float16/32/64, NCHW and NHWC,
several blocks over the batch; and Pad (x copied into the middle, the border slabs filled)
against np.pad."""

from __future__ import annotations

import types

import numpy as np
import pytest
from onnx import TensorProto, helper

from npuemu.host.models import lowering, onnx_front
from npuemu.host.ops import compiler, registry
from npuemu.host.ops.registry import Spec
from npuemu.host.ops.types import ACL_FORMAT_NCHW, ACL_FORMAT_ND, ACL_FORMAT_NHWC
from tests.unit.test_models_frontend import random_feeds, run_ort
from tests.unit.test_models_zoo import BlockCtx, run_graph


def run_kernel(op_type: str, xs: list[np.ndarray], attrs: dict, fmt: int) -> np.ndarray:
    """One op's kernel built by the op library, run on every block of its tiling."""
    op = registry.lookup(op_type)
    ins = [Spec(x.dtype.name, x.shape, fmt) for x in xs]
    full = {**op.attrs, **attrs}
    (out,) = op.infer(ins, full, [])
    binary = compiler.build(op, ins, [out], full)
    module = types.ModuleType(binary.name)
    exec(compile(binary.source, binary.name, "exec"), module.__dict__)
    arrays = [*xs, np.full(out.shape, np.nan if np.dtype(out.dtype).kind == "f" else 7,
                           out.dtype)]
    blocks = binary.tiling.block_dim
    for b in range(blocks):
        getattr(module, binary.name)(BlockCtx(arrays, b, blocks), *range(len(arrays)))
    return arrays[-1]


def _reference(x: np.ndarray, kh: int, kw: int, s: int, same: bool, mode: str) -> np.ndarray:
    """NCHW pooling by window views, in float64."""
    h, w = x.shape[2:]
    x64 = x.astype(np.float64)
    valid = np.ones((h, w))
    if same:
        ho, wo = -(-h // s), -(-w // s)
        ph, pw = max((ho - 1) * s + kh - h, 0), max((wo - 1) * s + kw - w, 0)
        pads = ((0, 0), (0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2))
        x64 = np.pad(x64, pads, constant_values=-np.inf if mode == "max" else 0)
        valid = np.pad(valid, pads[2:])
    win = np.lib.stride_tricks.sliding_window_view
    xs = win(x64, (kh, kw), axis=(2, 3))[:, :, ::s, ::s]
    if mode == "max":
        return xs.max(axis=(-1, -2))
    return xs.sum(axis=(-1, -2)) / win(valid, (kh, kw))[::s, ::s].sum(axis=(-1, -2))


CASES = [(3, 3, 2, False), (2, 2, 2, False), (7, 7, 1, False), (1, 3, 2, False),
         (3, 3, 2, True), (3, 2, 1, True), (5, 5, 3, True)]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("op_type", ["MaxPool", "AvgPool"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("nhwc", [False, True])
def test_pooling_equals_window_reductions(case, op_type, dtype, nhwc) -> None:
    kh, kw, s, same = case
    x = np.random.default_rng(kh * 10 + kw).standard_normal((3, 5, 15, 13)).astype(dtype)
    attrs = {"ksize": [1, kh, kw, 1] if nhwc else [1, 1, kh, kw],
             "strides": [1, s, s, 1] if nhwc else [1, 1, s, s],
             "padding": "SAME" if same else "VALID"}
    given = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if nhwc else x
    got = run_kernel(op_type, [given], attrs, ACL_FORMAT_NHWC if nhwc else ACL_FORMAT_NCHW)
    if nhwc:
        got = got.transpose(0, 3, 1, 2)
    want = _reference(x, kh, kw, s, same, "max" if op_type == "MaxPool" else "avg")
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape, pads, value, dtype", [
    ((1, 4, 9, 9), [[0, 0], [0, 0], [1, 1], [1, 1]], -3.4e38, np.float32),
    ((2, 3, 4), [[1, 0], [0, 2], [1, 1]], 0, np.int32),
    ((5,), [[2, 3]], 1.5, np.float64),
    ((2, 3), [[0, 0], [0, 0]], 0, np.float16),
    ((3, 4), [[1, 1], [2, 0]], True, np.bool_)])
def test_pad_equals_np_pad(shape, pads, value, dtype) -> None:
    x = (np.random.default_rng(1).random(shape) * 10).astype(dtype)
    got = run_kernel("Pad", [x], {"paddings": pads, "constant_values": value}, ACL_FORMAT_ND)
    want = np.pad(x, [tuple(p) for p in pads], constant_values=value)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_onnx_pooling_pads_go_into_the_pooling_op() -> None:
    """ATC lowers ONNX MaxPool with pads and AveragePool with pads and ceil mode (pads not
    counted) to one pooling op with ``pads`` (no Pad, no count Mul); an AveragePool that
    counts its pads keeps its Pad. The op library's kernels equal onnxruntime's."""
    nodes = [helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1),
             helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[2, 2],
                              pads=[1, 1, 0, 0], count_include_pad=1)]
    graph = helper.make_graph(
        nodes, "pools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 17, 15])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    g = lowering.lower(onnx_front.prepare(model))
    assert [n.op for n in g.nodes] == ["MaxPool", "AvgPool", "Pad", "AvgPool"]
    assert g.nodes[1].attrs["pads"][1] > 0  # ceil mode's extra row at the bottom
    feeds = random_feeds(model, 4)
    (want,) = run_ort(model, feeds)
    (got,) = run_graph(g, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
