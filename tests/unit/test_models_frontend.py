"""ONNX front end: checking, constant folding (onnx's reference evaluator), shape folding,
input shapes, and the one error that names every unsupported op (no process, no device)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from npuemu.host.models import atc, lowering, onnx_front
from npuemu.host.models.codes import (
    ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID,
    ACL_ERROR_GE_PARAM_INVALID,
    ModelError,
    UnsupportedOpsError,
)

ort.set_default_logger_severity(3)
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
SMALL_LIGHT = ["squeezenet", "shufflenet", "inception_v1", "resnet50", "densenet121"]


def light(name: str) -> str:
    return os.path.join(LIGHT, f"light_{name}.onnx")


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for info in model.graph.input:
        if info.name in inits:
            continue
        dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
        feeds[info.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def const_of_shape_model() -> onnx.ModelProto:
    """y = x @ W + b where W and b come from ConstantOfShape / Constant / Add."""
    shape_w = numpy_helper.from_array(np.array([4, 3], np.int64), "shape_w")
    shape_b = numpy_helper.from_array(np.array([3], np.int64), "shape_b")
    half = numpy_helper.from_array(np.array([0.5], np.float32), "v")
    nodes = [
        helper.make_node("ConstantOfShape", ["shape_w"], ["W"], value=half, name="cw"),
        helper.make_node("ConstantOfShape", ["shape_b"], ["b0"], value=half, name="cb"),
        helper.make_node("Constant", [], ["one"], value_float=1.0, name="k"),
        helper.make_node("Add", ["b0", "one"], ["b"], name="addb"),
        helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
        helper.make_node("Add", ["xw", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "cos", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [shape_w, shape_b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_constant_of_shape_weights_end_as_plain_weights() -> None:
    model = const_of_shape_model()
    prepared = onnx_front.prepare(model)
    assert [n.op_type for n in prepared.graph.node] == ["MatMul", "Add"]
    weights = {i.name: numpy_helper.to_array(i) for i in prepared.graph.initializer}
    np.testing.assert_array_equal(weights["W"], np.full((4, 3), 0.5, np.float32))
    np.testing.assert_array_equal(weights["b"], np.full((3,), 1.5, np.float32))
    feeds = random_feeds(model)
    np.testing.assert_allclose(run_ort(prepared, feeds)[0], run_ort(model, feeds)[0],
                               rtol=1e-6, atol=1e-7)


def test_shape_arithmetic_folds_into_a_static_reshape() -> None:
    """The exporter pattern Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds away."""
    idx = numpy_helper.from_array(np.array(0, np.int64), "i0")
    minus = numpy_helper.from_array(np.array([-1], np.int64), "m1")
    axes = numpy_helper.from_array(np.array([0], np.int64), "ax")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0, name="gather"),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="unsq"),
        helper.make_node("Concat", ["n1", "m1"], ["target"], axis=0, name="cat"),
        helper.make_node("Reshape", ["r", "target"], ["y"], name="flat"),
    ]
    graph = helper.make_graph(
        nodes, "flat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])], [idx, minus, axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    prepared = onnx_front.prepare(model)
    assert [n.op_type for n in prepared.graph.node] == ["Relu", "Reshape"]
    g = lowering.lower(prepared)
    assert g.tensors["y"].shape == (2, 12) and g.nodes[1].attrs["shape"] == [2, 12]


@pytest.mark.parametrize("name", SMALL_LIGHT)
def test_light_model_folds_to_plain_weights_and_same_numbers(name: str) -> None:
    model = onnx.load(light(name))
    prepared = onnx_front.prepare(model)
    ops = {n.op_type for n in prepared.graph.node}
    assert not ops & {"ConstantOfShape", "Unsqueeze", "Constant", "Shape"}
    assert [i.name for i in prepared.graph.input] == list(random_feeds(model))
    # weights are constants in these models; random inputs still check the folding. Their
    # logits are large and all equal, so a final softmax would turn float32 summation order
    # into 0 or 1: the logits before it are compared.
    feeds = random_feeds(model, seed=1)
    np.testing.assert_allclose(run_ort(without_final_softmax(prepared), feeds)[0],
                               run_ort(without_final_softmax(model), feeds)[0],
                               rtol=1e-5, atol=1e-6)


def without_final_softmax(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose output is its final Softmax's input (the model if it does
    not end in a Softmax)."""
    last = model.graph.node[-1]
    if last.op_type != "Softmax":
        return model
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    del cut.graph.node[-1]
    cut.graph.output[0].name = last.input[0]
    return cut


def test_unsupported_ops_are_all_named_with_their_nodes(tmp_path) -> None:
    nodes = [
        helper.make_node("Hardmax", ["x"], ["a"], name="first_bad"),
        helper.make_node("Relu", ["a"], ["b"], name="fine"),
        helper.make_node("Det", ["b"], ["y"], name="second_bad"),
    ]
    graph = helper.make_graph(
        nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedOpsError) as info:
        lowering.lower(onnx_front.prepare(model))
    assert info.value.ops == [("Hardmax", "first_bad"), ("Det", "second_bad")]
    assert info.value.code == ACL_ERROR_GE_PARAM_INVALID
    assert "first_bad" in str(info.value) and "second_bad" in str(info.value)
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    with pytest.raises(UnsupportedOpsError):
        atc.convert(path, tmp_path / "bad", "Ascend910B1")
    assert sorted(os.listdir(tmp_path)) == ["bad.onnx"]  # nothing half-written


def test_input_shape_parsing_and_errors() -> None:
    assert onnx_front.parse_input_shape("a:1,3,224,224;b:2") == {"a": [1, 3, 224, 224],
                                                                 "b": [2]}
    assert onnx_front.parse_input_shape("gpu_0/data_0:1,3") == {"gpu_0/data_0": [1, 3]}
    for bad in ("a", "a:1,x", ":1"):
        with pytest.raises(ModelError) as info:
            onnx_front.parse_input_shape(bad)
        assert info.value.code == ACL_ERROR_GE_PARAM_INVALID
    with pytest.raises(ModelError, match="not inputs"):
        onnx_front.prepare(const_of_shape_model(), {"nope": [1]})


def test_input_shape_pins_a_symbolic_batch() -> None:
    model = const_of_shape_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    with pytest.raises(ModelError, match="static shape"):
        onnx_front.prepare(model)
    g = lowering.lower(onnx_front.prepare(model, {"x": [5, 4]}))
    assert g.tensors["y"].shape == (5, 3)


def test_bad_files_get_ge_codes(tmp_path) -> None:
    with pytest.raises(ModelError) as info:
        onnx_front.load(tmp_path / "missing.onnx")
    assert info.value.code == ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x07not a protobuf at all\xff" * 3)
    with pytest.raises(ModelError) as info:
        onnx_front.load(junk)
    assert info.value.code == ACL_ERROR_GE_PARAM_INVALID
