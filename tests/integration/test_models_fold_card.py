"""ATC's weight folding on a real card: the same ONNX model converted with and without the
folding passes (``atc.convert(fold=...)``), both OM files executed by ``acl.mdl.execute``;
the outputs agree within float32 rounding, with onnxruntime and with each other, and the
folded OM has fewer tasks."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from childprog import run_program
from onnx import TensorProto, helper, numpy_helper

from npuemu.host.models import atc, omfile, onnx_front
from tests.integration.test_models_mdl import ENV, PROG, ort_run
from tests.unit.test_models_frontend import light
from tests.unit.test_models_lowering import randomize_weights

pytestmark = pytest.mark.integration


def bn_cnn() -> onnx.ModelProto:
    """Conv -> BatchNorm -> Mul -> Add -> Relu -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(4)
    def w(name: str, *shape: int, positive: bool = False) -> onnx.TensorProto:
        v = rng.standard_normal(shape).astype(np.float32)
        return numpy_helper.from_array(np.abs(v) + 0.5 if positive else v, name)
    inits = [w("w", 8, 3, 3, 3), w("b", 8), w("g", 8), w("be", 8), w("m", 8),
             w("v", 8, positive=True), w("k", 1, 8, 1, 1), w("d", 8, 1, 1), w("B", 5, 8),
             w("C", 5)]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"]),
             helper.make_node("Mul", ["n", "k"], ["p"]),
             helper.make_node("Add", ["p", "d"], ["q"]),
             helper.make_node("Relu", ["q"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["gp"]),
             helper.make_node("Flatten", ["gp"], ["f"]),
             helper.make_node("Gemm", ["f", "B", "C"], ["y"], transB=1, alpha=0.5)]
    graph = helper.make_graph(nodes, "bn_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _tasks(om: str) -> int:
    return len(omfile.read_file(om).programs[0]["tasks"])


@pytest.mark.parametrize("name", ["bn_cnn", "shufflenet"])
def test_folded_and_unfused_models_agree_on_the_card(run_prog, tmp_path, name: str) -> None:
    if name == "bn_cnn":
        model = bn_cnn()
    else:
        model = randomize_weights(onnx_front.prepare(onnx.load(light(name))), 9)
    src = tmp_path / f"{name}.onnx"
    onnx.save(model, src)
    oms = [atc.convert(src, tmp_path / f"{name}_{tag}", "Ascend910B1", fold=flag)["om"]
           for tag, flag in (("folded", True), ("unfused", False))]
    assert _tasks(oms[0]) < _tasks(oms[1])
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    for k in range(2):
        np.save(tmp_path / f"x{k}.npy", x)
    run_program(run_prog, PROG, "run_many", tmp_path, json.dumps(oms), env=ENV, timeout=600)
    want = ort_run(model, x)
    folded, unfused = (np.load(tmp_path / f"y{k}.npy").view(np.float32).reshape(want.shape)
                       for k in range(2))
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(folded, unfused, rtol=1e-4, atol=1e-5 * scale)
    np.testing.assert_allclose(folded, want, rtol=1e-3, atol=1e-5 * scale)
