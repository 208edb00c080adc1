"""ONNX sequence ops resolved at conversion (``host/models/sequences.py``): constant
positions give plain tensor ops, matching onnxruntime; run-time positions, sequences read by
other ops and sequence graph outputs are refused by name; an Expand to a run-time shape fails
its task when the shape is not the one it was built for."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from npuemu.host.models import lowering, onnx_front
from npuemu.host.models.codes import UnsupportedOpsError
from tests.unit.test_models_zoo import run_graph
from tests.unit.test_ops_samples import run_op

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "seq", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _pos(name: str, value: int):
    return helper.make_tensor(name, TensorProto.INT64, [], [value])


def test_insert_erase_at_and_concat_with_constant_positions_match_onnxruntime() -> None:
    vi = [helper.make_tensor_value_info(n, F, [2, 3]) for n in "abc"]
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s1"]),
             helper.make_node("SequenceInsert", ["s1", "c", "p0"], ["s2"]),   # c, a, b
             helper.make_node("SequenceErase", ["s2", "m1"], ["s3"]),         # c, a
             helper.make_node("SequenceAt", ["s3", "m1"], ["y"]),             # a
             helper.make_node("ConcatFromSequence", ["s2"], ["z"], axis=0, new_axis=1),
             helper.make_node("SplitToSequence", ["b"], ["s4"], axis=1, keepdims=0),
             helper.make_node("SequenceLength", ["s4"], ["n"])]
    outs = [helper.make_tensor_value_info("y", F, [2, 3]),
            helper.make_tensor_value_info("z", F, [3, 2, 3]),
            helper.make_tensor_value_info("n", TensorProto.INT64, [])]
    model = _model(nodes, vi, outs, [_pos("p0", 0), _pos("m1", -1)])
    rng = np.random.default_rng(3)
    feeds = {n: rng.standard_normal((2, 3)).astype(np.float32) for n in "abc"}
    g = lowering.lower(onnx_front.prepare(model))
    assert not {n.source for n in g.nodes} & {"SequenceAt", "SequenceInsert"}
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, w in zip(run_graph(g, feeds), want, strict=True):
        np.testing.assert_array_equal(got.reshape(w.shape), w)
    assert int(want[2]) == 3


def test_run_time_positions_and_other_readers_are_refused_by_name() -> None:
    x = helper.make_tensor_value_info("x", F, [2, 3])
    pos = helper.make_tensor_value_info("pos", TensorProto.INT64, [])
    y = helper.make_tensor_value_info("y", F, [2, 3])
    model = _model([helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="mk"),
                    helper.make_node("SequenceAt", ["s", "pos"], ["y"], name="pick")],
                   [x, pos], [y])
    with pytest.raises(UnsupportedOpsError) as info:
        onnx_front.prepare(model)
    assert info.value.ops == [("SequenceAt at a position computed at run time", "pick")]
    model = _model([helper.make_node("SequenceConstruct", ["x"], ["s"], name="mk"),
                    helper.make_node("SequenceErase", ["s", "p"], ["t"], name="drop"),
                    helper.make_node("SequenceAt", ["t", "p"], ["y"], name="pick")],
                   [x], [y], [_pos("p", 3)])
    with pytest.raises(UnsupportedOpsError, match="position 3 outside a sequence of 1"):
        onnx_front.prepare(model)
    seq_out = helper.make_value_info("s", helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(F, [2, 3])))
    model = _model([helper.make_node("SequenceConstruct", ["x"], ["s"], name="mk")], [x],
                   [seq_out])
    with pytest.raises(UnsupportedOpsError, match="a sequence as a graph output"):
        onnx_front.prepare(model)


def test_expand_to_a_run_time_shape_checks_it_on_the_card() -> None:
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    (y,) = run_op("Expand", [x, np.array([2, 3, 4], np.int64)], {"shape": [2, 3, 4]})
    np.testing.assert_array_equal(y, np.broadcast_to(x, (2, 3, 4)))
    with pytest.raises(ValueError, match="built for"):  # the kernel fails its task
        run_op("Expand", [x, np.array([2, 3, 5], np.int64)], {"shape": [2, 3, 4]})
