"""ATC's weight folding and Relu fusion (``host/models/fold.py``): the folded graph computes
what the unfused one does, within float32 rounding, on every light model (with random
weights, so the light models' constant weights hide nothing), and on small graphs that
exercise each pattern (BatchNorm, per-channel Mul / Add / Sub, Gemm's alpha and C, a Relu
fused into the Conv) and the cases that must not fold (two readers, a graph output in
between, a computed scale, a broadcasting Add). The unfused graph is run by onnxruntime
through the lowering tests' one-op-per-library-op translation; the folded one by the same
translation for the small graphs and, for the light models, by the op library's own kernels
(``compiler.build``'s source run block by block, as the zoo test does), so the fused Conv2D
kernel (bias, ``fused_relu``) is what is checked; the card-side check is in
``tests/integration/test_models_fold_card.py``.
"""

from __future__ import annotations

import collections
import copy
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from npuemu.host.models import fold, lowering, onnx_front
from npuemu.host.models.graph import Graph
from tests.unit.test_models_frontend import light, random_feeds, run_ort
from tests.unit.test_models_lowering import randomize_weights, to_onnx
from tests.unit.test_models_zoo import run_graph

# The slowest cases run only with NPUEMU_TEST_BIG_MODELS=1, as in the model tests through a
# card: VGG-19 (548 MB of weights) and ZFNet-512, whose folds (Conv -> Relu, Gemm -> Relu, no
# BatchNorm) are AlexNet's, and DenseNet-121, whose Conv -> BatchNorm (as Mul, Add) -> Relu
# are Inception v2's.
_BIG = pytest.mark.skipif(os.environ.get("NPUEMU_TEST_BIG_MODELS") != "1",
                          reason="a slow light model; set NPUEMU_TEST_BIG_MODELS=1")
LIGHT = ["squeezenet", "shufflenet", "resnet50", "inception_v1", "inception_v2",
         "bvlc_alexnet", *(pytest.param(n, marks=_BIG) for n in ("densenet121", "zfnet512",
                                                                  "vgg19"))]


def folded_pair(model: onnx.ModelProto) -> tuple[Graph, Graph, int]:
    plain = lowering.lower(onnx_front.prepare(model))
    folded = copy.deepcopy(plain)
    return plain, folded, fold.apply(folded)


def assert_same_outputs(model: onnx.ModelProto, plain: Graph, folded: Graph,
                        rtol: float = 1e-4) -> None:
    feeds = random_feeds(model, 3)
    want = run_ort(to_onnx(plain), feeds)
    got = run_ort(to_onnx(folded), feeds)
    for w, x in zip(want, got, strict=True):
        np.testing.assert_allclose(x, w, rtol=rtol, atol=1e-5 * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_folded_equals_unfused(name: str) -> None:
    model = randomize_weights(onnx_front.prepare(onnx.load(light(name))), 5)
    plain, folded, absorbed = folded_pair(model)
    ops = collections.Counter(n.op for n in plain.nodes)
    assert len(folded.nodes) == len(plain.nodes) - absorbed
    if ops["BatchNorm"]:
        assert absorbed >= 1  # every light model with BatchNorm has one right after a Conv
    fused = sum(bool(n.attrs.get("fused_relu")) for n in folded.nodes)
    assert fused >= 1 and ops["Relu"] - fused == collections.Counter(
        n.op for n in folded.nodes)["Relu"]  # every light model has a Conv -> Relu
    feeds = random_feeds(model, 3)
    want = run_ort(to_onnx(plain), feeds)
    got = run_graph(folded, feeds)
    for w, x in zip(want, got, strict=True):
        np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(w).max()))


def _conv_chain(tail: list, extra_out: list | None = None, scale_shape=(1, 4, 1, 1),
                bias: bool = True) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "g"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "be"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "m"),
             numpy_helper.from_array(np.abs(rng.standard_normal(4)).astype(np.float32) + .5,
                                     "v"),
             numpy_helper.from_array(rng.standard_normal(scale_shape).astype(np.float32), "k")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"],
                              pads=[1, 1, 1, 1], name="conv"), *tail]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 4, 6, 6])
            for o in [tail[-1].output[0], *(extra_out or [])]]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3, 6, 6])], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


_BN = helper.make_node("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"], epsilon=1e-3)


def test_conv_batchnorm_mul_add_sub_fold_into_one_conv() -> None:
    model = _conv_chain([_BN, helper.make_node("Mul", ["k", "n"], ["p"]),
                         helper.make_node("Add", ["p", "k"], ["q"]),
                         helper.make_node("Sub", ["q", "k"], ["r"]),
                         helper.make_node("Relu", ["r"], ["y"])])
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 5
    assert [n.op for n in folded.nodes] == ["Conv2D"] and folded.nodes[0].attrs["fused_relu"]
    assert len(folded.nodes[0].inputs) == 3  # the folded bias
    assert_same_outputs(model, plain, folded)


def test_conv_without_bias_and_scalar_mul() -> None:
    model = _conv_chain([helper.make_node("Mul", ["c", "k"], ["y"])], scale_shape=(1,),
                        bias=False)
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 1 and [n.op for n in folded.nodes] == ["Conv2D"]
    assert_same_outputs(model, plain, folded)


def test_batchnorm_after_a_concat_takes_mul_add_and_relu() -> None:
    """DenseNet's pattern: Concat -> BatchNorm -> Mul -> Add -> Relu is Concat and one
    BatchNorm (x * a + b, Relu fused), equal to the unfused graph by the op library's
    kernels and by onnxruntime; a BatchNorm with a second reader keeps its Mul and Add."""
    model = _conv_chain([helper.make_node("Concat", ["c", "c"], ["cc"], axis=0),
                         helper.make_node("BatchNormalization", ["cc", "g", "be", "m", "v"],
                                          ["n"], epsilon=1e-3),
                         helper.make_node("Mul", ["n", "k"], ["p"]),
                         helper.make_node("Add", ["k", "p"], ["q"]),
                         helper.make_node("Relu", ["q"], ["y"])])
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 4
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 3
    assert [n.op for n in folded.nodes] == ["Conv2D", "Concat", "BatchNorm"]
    bn = folded.nodes[2]
    assert bn.attrs["fused_relu"] and bn.attrs["epsilon"] == 0.0
    assert_same_outputs(model, plain, folded)
    feeds = random_feeds(model, 2)
    want = run_ort(to_onnx(plain), feeds)
    for w, x in zip(want, run_graph(folded, feeds), strict=True):
        np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(w).max()))
    model.graph.output.append(helper.make_tensor_value_info("n", TensorProto.FLOAT,
                                                            [4, 4, 6, 6]))
    _plain, kept, absorbed = folded_pair(model)
    assert absorbed == 1  # only the Relu, into the Add
    assert [n.op for n in kept.nodes][1:] == ["Concat", "BatchNorm", "Mul", "Add"]


@pytest.mark.parametrize("case", ["two readers", "output between", "computed", "broadcast",
                                  "c minus x"])
def test_what_must_not_fold(case: str) -> None:
    if case == "two readers":
        model = _conv_chain([_BN, helper.make_node("Add", ["n", "c"], ["y"])])
    elif case == "output between":
        model = _conv_chain([_BN], extra_out=["c"])
    elif case == "computed":
        model = _conv_chain([helper.make_node("Relu", ["c"], ["rc"]),
                             helper.make_node("Mul", ["c", "rc"], ["y"])])
    elif case == "broadcast":  # per-position, not per-channel
        model = _conv_chain([helper.make_node("Add", ["c", "k"], ["y"])],
                            scale_shape=(1, 1, 6, 6))
    else:
        model = _conv_chain([helper.make_node("Sub", ["k", "c"], ["y"])])
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 0
    assert [n.op for n in folded.nodes] == [n.op for n in plain.nodes]
    assert_same_outputs(model, plain, folded)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_alpha_beta_and_a_following_mul_fold_into_the_matmul(trans_b: int) -> None:
    rng = np.random.default_rng(1)
    b = rng.standard_normal((6, 5) if trans_b else (5, 6)).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["rx"]),
             helper.make_node("Gemm", ["rx", "B", "C"], ["g"], alpha=0.5, beta=2.0,
                              transB=trans_b),
             helper.make_node("Mul", ["g", "k"], ["y"])]
    inits = [numpy_helper.from_array(b, "B"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "C"),
             numpy_helper.from_array(rng.standard_normal((1, 6)).astype(np.float32), "k")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [3, 5])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [3, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    plain, folded, absorbed = folded_pair(model)
    assert absorbed == 1 and [n.op for n in folded.nodes] == ["Relu", "MatMul"]
    assert_same_outputs(model, plain, folded)


def test_the_switch(monkeypatch) -> None:
    monkeypatch.setenv(fold.ENV, "off")
    assert not fold.enabled() and fold.enabled(True)
    monkeypatch.setenv(fold.ENV, "on")
    assert fold.enabled() and not fold.enabled(False)
    monkeypatch.delenv(fold.ENV)
    assert fold.enabled()
