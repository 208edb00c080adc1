"""ATC's Relu fusion into an Add (a residual sum, ``host/models/fold.py``): the fused graph,
run by the op library's own kernels, computes what the unfused graph does in onnxruntime;
an Add whose output has another reader or is a graph output keeps its Relu. (The light
models' case, ResNet-50's and ShuffleNet's residuals included, is the fold test's.)"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.unit.test_models_fold import folded_pair
from tests.unit.test_models_frontend import random_feeds, run_ort
from tests.unit.test_models_lowering import to_onnx
from tests.unit.test_models_zoo import run_graph


def _residual(extra_reader: bool = False, relu_out: bool = False):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32),
                                     "w")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sum", ["c", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    outs = ["y"]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["s"], ["z"]))
        outs.append("z")
    if relu_out:
        outs.append("s")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 5, 5])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 4, 5, 5]) for o in outs],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_relu_after_a_residual_add_is_fused_into_it() -> None:
    model = _residual()
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 1
    assert [n.op for n in folded.nodes] == ["Conv2D", "Add"]
    assert folded.nodes[1].attrs["fused_relu"] and not folded.nodes[0].attrs.get("fused_relu")
    feeds = random_feeds(model, 1)
    want = run_ort(to_onnx(plain), feeds)
    got = run_graph(folded, feeds)
    assert (got[0] == 0).any() and (got[0] > 0).any()  # the Relu did cut something
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["another reader", "graph output"])
def test_an_add_read_elsewhere_keeps_its_relu(case: str) -> None:
    model = _residual(extra_reader=case == "another reader", relu_out=case == "graph output")
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 0
    assert [n.op for n in folded.nodes] == [n.op for n in plain.nodes]


def test_a_relu_after_a_concat_is_fused_into_it() -> None:
    """ShuffleNet's downsampling unit ends in Concat -> Relu: one Concat with fused_relu,
    equal to the unfused graph by the op library's kernels."""
    nodes = [helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Concat", ["x", "n"], ["c"], axis=1),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 4, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 1 and [n.op for n in folded.nodes] == ["Neg", "Concat"]
    assert folded.nodes[1].attrs["fused_relu"]
    feeds = random_feeds(model, 2)
    (want,) = run_ort(to_onnx(plain), feeds)
    (got,) = run_graph(folded, feeds)
    np.testing.assert_array_equal(got, want)
    (again,) = run_ort(to_onnx(folded), feeds)
    np.testing.assert_array_equal(again, want)


def _shuffled(groups: int = 4, shuffle: int = 4, extra_reader: bool = False):
    """Conv (``groups`` groups, bias) -> Relu -> ShuffleNet's channel shuffle in ``shuffle``
    groups (Reshape, Transpose, Reshape), batch 2."""
    rng = np.random.default_rng(5)
    c = 8
    inits = [numpy_helper.from_array(
                 rng.standard_normal((c, c // groups, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([2, shuffle, c // shuffle, 5, 5]), "s5"),
             numpy_helper.from_array(np.array([2, c, 5, 5]), "s4")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=groups),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "s5"], ["g"]),
             helper.make_node("Transpose", ["g"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s4"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 5, 5])]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["g"], ["z"]))
        outs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT,
                                                  [2, shuffle, c // shuffle, 5, 5]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 5, 5])],
        outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_channel_shuffle_after_a_grouped_conv_is_fused_into_it() -> None:
    """ShuffleNet's Conv -> Relu -> Reshape -> Transpose -> Reshape is one Conv2D (shuffle
    = its groups, fused_relu): the op library's kernel writes the shuffled channels, equal
    to onnxruntime's unfused graph."""
    model = _shuffled()
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 4 and [n.op for n in folded.nodes] == ["Conv2D"]
    conv = folded.nodes[0]
    assert conv.attrs["shuffle"] == 4 and conv.attrs["fused_relu"]
    assert conv.outputs == folded.outputs
    feeds = random_feeds(model, 4)
    (want,) = run_ort(to_onnx(plain), feeds)
    (got,) = run_graph(folded, feeds)
    (by_kernels,) = run_graph(plain, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, by_kernels)  # a permutation: exactly equal


@pytest.mark.parametrize("case", ["another reader", "other groups"])
def test_a_shuffle_that_is_not_the_convs_only_reader_or_of_other_groups_stays(case: str
                                                                            ) -> None:
    model = _shuffled(groups=2 if case == "other groups" else 4,
                      extra_reader=case == "another reader")
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 1  # the Relu only
    assert [n.op for n in folded.nodes] == [n.op for n in plain.nodes if n.op != "Relu"]
    assert not folded.nodes[0].attrs.get("shuffle")
