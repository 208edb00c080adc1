"""The single-op samples' ops without a device (ArgMaxV2, TopK, Slice/SliceD, GEMM,
ResizeBilinearV2, ResizeNearestNeighborV2, and the N-D ops the small models brought): each
signature checked and inferred by the op library, its kernel built (``compiler.build``) and
run block by block over numpy arrays, compared with numpy or onnxruntime; float16, float32
and int8 where the op takes them; bad signatures refused with their ACL codes."""

from __future__ import annotations

import types

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from npuemu.host.ops import compiler, registry, signature
from npuemu.host.ops import types as T
from npuemu.host.ops.registry import Spec
from npuemu.shared.errors import AclError
from tests.unit.test_models_zoo import BlockCtx


def run_op(op_type: str, arrays: list[np.ndarray], attrs: dict | None = None,
           consts: tuple[int, ...] = (), fmt: int = T.ACL_FORMAT_ND) -> list[np.ndarray]:
    """Run ``op_type`` on ``arrays`` (those at the indices ``consts`` are const inputs)."""
    op = registry.lookup(op_type)
    ins = [Spec(a.dtype.name, a.shape, fmt, a.tobytes() if k in consts else None)
           for k, a in enumerate(arrays)]
    full = registry.attrs_of(op, attrs or {})
    outs = signature.outputs(op, ins, [], full)
    binary = compiler.build(op, ins, outs, full)
    module = types.ModuleType(binary.name)
    exec(compile(binary.source, binary.name, "exec"), module.__dict__)
    mem = [np.array(a, copy=True) for a in arrays] + [np.zeros(o.shape, o.dtype) for o in outs]
    for b in range(binary.tiling.block_dim):
        getattr(module, binary.name)(BlockCtx(mem, b, binary.tiling.block_dim),
                                     *range(len(mem)))
    return mem[len(arrays):]


def refused(op_type: str, arrays: list[np.ndarray], attrs: dict | None = None,
            consts: tuple[int, ...] = ()) -> int:
    with pytest.raises(AclError) as info:
        run_op(op_type, arrays, attrs, consts)
    return info.value.code


RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "int8"])
def test_argmax_v2_first_maximum_along_a_const_dimension(dtype: str) -> None:
    x = RNG.integers(-5, 5, (4, 7, 3)).astype(dtype)  # small ints: ties are common
    for dim, out in ((1, 3), (-1, 9)):
        (y,) = run_op("ArgMaxV2", [x, np.array(dim, np.int32)], {"dtype": out}, consts=(1,))
        assert y.dtype == T.numpy_dtype(out)
        np.testing.assert_array_equal(y, np.argmax(x, axis=dim))
    assert refused("ArgMaxV2", [x, np.array(1, np.int32)]) == 100000  # not const
    assert refused("ArgMaxV2", [x, np.array(3, np.int32)], consts=(1,)) == 100000
    assert refused("ArgMaxV2", [x, np.array(0, np.int32)], {"dtype": 0}, (1,)) == 100026


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
def test_topk_values_and_indices_with_ties_in_index_order(dtype: str, largest: bool) -> None:
    x = RNG.integers(-4, 4, (3, 10)).astype(dtype)
    vals, idx = run_op("TopK", [x, np.array([4], np.int32)], {"largest": largest},
                       consts=(1,))
    key = -x.astype(np.float64) if largest else x
    want = np.argsort(key, axis=-1, kind="stable")[:, :4]
    assert idx.dtype == np.int32
    np.testing.assert_array_equal(idx, want)
    np.testing.assert_array_equal(vals, np.take_along_axis(x, want, -1))
    x0 = RNG.standard_normal((5, 6)).astype(np.float32)
    vals, idx = run_op("TopK", [x0, np.array([2], np.int32)], {"dim": 0}, consts=(1,))
    np.testing.assert_array_equal(vals, -np.sort(-x0, axis=0)[:2])
    assert refused("TopK", [x, np.array([11], np.int32)], consts=(1,)) == 100000


def test_slice_and_slice_d_with_minus_one_sizes() -> None:
    x = np.arange(60, dtype=np.float16).reshape(3, 4, 5)
    want = x[1:3, 0:4, 2:4]
    offsets, size = np.array([1, 0, 2], np.int64), np.array([2, -1, 2], np.int64)
    (y,) = run_op("Slice", [x, offsets, size], consts=(1, 2))
    np.testing.assert_array_equal(y, want)
    (y,) = run_op("SliceD", [x], {"offsets": [1, 0, 2], "size": [2, -1, 2]})
    np.testing.assert_array_equal(y, want)
    assert refused("SliceD", [x], {"offsets": [2, 0, 0], "size": [2, 1, 1]}) == 100000


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
def test_gemm_alpha_beta_transposes_and_int8_accumulation(dtype: str) -> None:
    out = "int32" if dtype == "int8" else dtype
    a = RNG.integers(-100, 100, (6, 5)).astype(dtype) if dtype == "int8" else \
        RNG.standard_normal((6, 5)).astype(dtype)
    b = (RNG.integers(-100, 100, (7, 5)) if dtype == "int8"
         else RNG.standard_normal((7, 5))).astype(dtype)
    c = RNG.integers(-9, 9, (6, 7)).astype(out)
    alpha, beta = np.array([2], out), np.array([3], out)
    (y,) = run_op("GEMM", [a, b, c, alpha, beta], {"transpose_b": True})
    want = 2 * (a.astype(np.float64) @ b.astype(np.float64).T) + 3 * c
    assert y.dtype == np.dtype(out)
    if dtype == "int8":
        np.testing.assert_array_equal(y, want.astype(np.int64))  # exact, beyond int8 range
    else:
        tol = 1e-2 if dtype == "float16" else 1e-5
        np.testing.assert_allclose(y, want, rtol=tol, atol=tol * 10)
    bad_c = c.astype("float64")
    assert refused("GEMM", [a, b, bad_c, alpha, beta], {"transpose_b": True}) == 100026


def _ort_resize(x: np.ndarray, size: tuple[int, int], mode: str, coord: str,
                nearest: str) -> np.ndarray:
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                            coordinate_transformation_mode=coord, nearest_mode=nearest)
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [*x.shape[:2], *size])
    graph = helper.make_graph([node], "r", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x.shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [sizes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("flags,coord,nearest", [
    ({}, "asymmetric", "floor"),
    ({"align_corners": True}, "align_corners", "round_prefer_ceil"),
    ({"half_pixel_centers": True}, "tf_half_pixel_for_nn", "floor"),
])
def test_resize_nearest_neighbor_v2_matches_onnxruntime(flags, coord, nearest) -> None:
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    for size in ((9, 4), (10, 14), (3, 3)):
        (y,) = run_op("ResizeNearestNeighborV2", [x, np.array(size, np.int32)], flags,
                      consts=(1,))
        np.testing.assert_array_equal(y, _ort_resize(x, size, "nearest", coord, nearest))


@pytest.mark.parametrize("flags,coord", [
    ({}, "asymmetric"), ({"align_corners": True}, "align_corners"),
    ({"half_pixel_centers": True}, "half_pixel"),
])
def test_resize_bilinear_v2_matches_onnxruntime_and_nhwc(flags, coord) -> None:
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    for size in ((9, 4), (10, 14)):
        (y,) = run_op("ResizeBilinearV2", [x, np.array(size, np.int32)], flags, consts=(1,))
        want = _ort_resize(x, size, "linear", coord, "floor")
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).astype(np.float16)
    (y,) = run_op("ResizeBilinearV2", [nhwc, np.array((9, 4), np.int32)], flags,
                  consts=(1,), fmt=T.ACL_FORMAT_NHWC)
    assert y.dtype == np.float32 and y.shape == (2, 9, 4, 3)
    want = _ort_resize(x.astype(np.float16).astype(np.float32), (9, 4), "linear", coord,
                       "floor")
    np.testing.assert_allclose(y, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    assert refused("ResizeBilinearV2", [x, np.array((0, 4), np.int32)], consts=(1,)) == 100000


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_conv3d_and_pool3d_in_float16_and_float32(dtype: str) -> None:
    """Conv3D against a direct sum; MaxPool3D / AvgPool3D against numpy windows."""
    x = RNG.standard_normal((2, 4, 5, 6, 5)).astype(dtype)
    w = RNG.standard_normal((6, 2, 2, 3, 2)).astype(dtype)
    (y,) = run_op("Conv3D", [x, w], {"groups": 2, "pads": [1, 0, 0, 1, 1, 1],
                                     "strides": [1, 1, 2, 1, 1]})
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 0), (0, 1), (1, 1)))
    want = np.zeros(y.shape)
    for o in range(6):
        g = o // 3
        for d in range(y.shape[2]):
            for h in range(y.shape[3]):
                for v in range(y.shape[4]):
                    win = xp[:, 2 * g:2 * g + 2, 2 * d:2 * d + 2, h:h + 3, v:v + 2]
                    want[:, o, d, h, v] = (win * w[o].astype(np.float64)).sum(axis=(1, 2, 3, 4))
    tol = 2e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * 5)
    (m,) = run_op("MaxPool3D", [x], {"ksize": [2, 2, 2], "strides": [2, 2, 2],
                                    "ceil_mode": True})
    assert m.shape == (2, 4, 3, 3, 3) and m.dtype == np.dtype(dtype)
    assert m[0, 0, 2, 2, 2] == x[0, 0, 4, 4:6, 4].max()  # a partial (ceil mode) window
    (a,) = run_op("AvgPool3D", [x], {"ksize": [5, 6, 5], "strides": [1, 1, 1]})
    np.testing.assert_allclose(a.reshape(2, 4), x.astype(np.float64).mean(axis=(2, 3, 4)),
                               rtol=tol, atol=tol)


def test_n_d_ops_refuse_bad_signatures() -> None:
    x = np.zeros((1, 2, 3, 3, 3), np.float32)
    assert refused("Conv3D", [x, np.zeros((4, 3, 1, 1, 1), np.float32)]) == 100000
    assert refused("MaxPool3D", [x], {"ksize": [2, 2, 2], "pads": [2, 2, 0, 0, 0, 0]}) \
        == 100000
    assert refused("Conv3D", [x, np.zeros((4, 2, 1, 1, 1), np.float32)],
                   {"data_format": "NDHWC"}) == 100000
    assert refused("PadV3D", [np.zeros((2, 2), np.int8)],
                   {"paddings": [2, 0, 0, 0], "mode": "reflect"}) == 100000
    assert refused("StridedSliceD", [np.zeros(4, np.int8)],
                   {"begin": [0], "end": [2], "shrink_axis_mask": 1}) == 100000


def _one_node_model(node, x_shape: list[int], inits: list, outs: list[tuple[int, list]]):
    """``node`` as a model of input ``x``; ``outs`` gives each output's type and shape."""
    graph = helper.make_graph(
        [node], "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, t, shape)
         for o, (t, shape) in zip(node.output, outs, strict=True)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _lowered_vs_onnxruntime(model, x: np.ndarray) -> tuple[list, list]:
    from npuemu.host.models import lowering, onnx_front
    from tests.unit.test_models_zoo import run_graph
    g = lowering.lower(onnx_front.prepare(model))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return run_graph(g, {"x": x}), sess.run(None, {"x": x})


def test_onnx_argmax_topk_and_resize_lower_onto_the_samples_ops() -> None:
    x = RNG.integers(-3, 3, (2, 3, 4, 5)).astype(np.float32)
    for keep in (0, 1):
        model = _one_node_model(helper.make_node("ArgMax", ["x"], ["y"], axis=2,
                                                 keepdims=keep), [2, 3, 4, 5], [],
                                [(TensorProto.INT64, [2, 3, 1, 5] if keep else [2, 3, 5])])
        (got,), (want,) = _lowered_vs_onnxruntime(model, x)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    for largest in (0, 1):
        model = _one_node_model(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1,
                                                 largest=largest), [2, 3, 4, 5], [k],
                                [(TensorProto.FLOAT, [2, 3, 4, 3]),
                                 (TensorProto.INT64, [2, 3, 4, 3])])
        got, want = _lowered_vs_onnxruntime(model, x)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])  # int64, ties in index order
    sizes = helper.make_tensor("s", TensorProto.INT64, [4], [2, 3, 7, 9])
    xr = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for mode, coord, nearest in (("linear", "half_pixel", "floor"),
                                 ("linear", "align_corners", "floor"),
                                 ("nearest", "asymmetric", "floor"),
                                 ("nearest", "tf_half_pixel_for_nn", "floor")):
        node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode=mode,
                                coordinate_transformation_mode=coord, nearest_mode=nearest)
        model = _one_node_model(node, [2, 3, 4, 5], [sizes], [(TensorProto.FLOAT, list("nchw"))])
        (got,), (want,) = _lowered_vs_onnxruntime(model, xr)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{mode} {coord}")
    from npuemu.host.models import lowering, onnx_front
    from npuemu.host.models.codes import UnsupportedOpsError
    node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="nearest")
    with pytest.raises(UnsupportedOpsError, match="half_pixel/round_prefer_floor"):
        lowering.lower(onnx_front.prepare(_one_node_model(
            node, [2, 3, 4, 5], [sizes], [(TensorProto.FLOAT, list("nchw"))])))


def test_conv2d_transpose_d_with_output_padding_matches_onnxruntime() -> None:
    x = RNG.standard_normal((1, 4, 3, 4)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)  # (Cin, Cout / groups, kh, kw)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 3], group=2,
                            pads=[1, 0, 0, 1], output_padding=[1, 0], dilations=[1, 2])
    graph = helper.make_graph(
        [node], "ct", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                       helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x, "w": w})
    (y,) = run_op("Conv2DTransposeD", [x, w], {"strides": [1, 1, 2, 3], "groups": 2,
                                               "pads": [1, 0, 0, 1], "dilations": [1, 1, 1, 2],
                                               "output_padding": [0, 0, 1, 0]})
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
