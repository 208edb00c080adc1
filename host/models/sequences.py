"""ONNX sequence ops resolved at conversion: a sequence whose length and positions are known
when the model is converted never exists on the card.

CANN runs the sequence ops (``SequenceConstruct``, ``SequenceInsert``, ``SequenceAt``, ...) as
AI CPU ops on resource handles. npuemu's op library has no resource type, so ``unroll`` turns
every sequence value into the list of tensor names it holds, following the nodes in order:

* ``SequenceEmpty`` / ``SequenceConstruct`` start a list; ``SequenceInsert`` / ``SequenceErase``
  change it at a constant position (default: the end; negative counts from the end);
* ``SequenceAt`` (constant position) becomes an ``Identity`` of that element,
  ``SequenceLength`` an int64 constant, ``ConcatFromSequence`` a ``Concat`` (with
  ``new_axis``: each element reshaped with a unit axis first), ``SplitToSequence`` a ``Split``
  (``split`` absent: pieces of 1, squeezed unless ``keepdims``; a scalar: pieces of that
  size, the last one shorter; a list: those sizes) of a tensor with a static shape. Sizes
  given at run time (a 1-D input of static length) fix only the length: such pieces may be
  counted by ``SequenceLength`` and never read (the sizes are then not checked against the
  split dimension: no task reads them).

Refused by name (UnsupportedOpsError): a position computed at run time, a position out of
range, a sequence that is a graph output or the input of any other op, a split of a tensor
whose shape is not static, reading a piece split by run-time sizes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from npuemu.host.models.codes import UnsupportedOpsError

SEQUENCE_OPS = frozenset({
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
    "SequenceLength", "ConcatFromSequence", "SplitToSequence",
})


class _Unroller:
    """Walks the graph once, keeping each sequence value as a list of tensor names."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        self.consts = {i.name: numpy_helper.to_array(i) for i in self.graph.initializer}
        self.shapes = _shapes(model)
        self.seqs: dict[str, list[str]] = {}
        self.opaque: set[str] = set()
        """Pieces of a split whose sizes come at run time: never read."""
        self.nodes: list[onnx.NodeProto] = []
        self.count = 0

    def refuse(self, what: str, node: onnx.NodeProto) -> UnsupportedOpsError:
        return UnsupportedOpsError([(what, node.name or node.output[0])])

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}__seq{self.count}"

    def const(self, name: str, value: np.ndarray) -> str:
        self.graph.initializer.append(numpy_helper.from_array(value, name))
        self.consts[name] = value
        return name

    def position(self, node: onnx.NodeProto, k: int, length: int, insert: bool) -> int:
        """The constant position input ``k`` of ``node`` (default: the end)."""
        if len(node.input) <= k or not node.input[k]:
            return length if insert else length - 1
        value = self.consts.get(node.input[k])
        if value is None:
            raise self.refuse(f"{node.op_type} at a position computed at run time", node)
        pos = int(value.reshape(-1)[0])
        top = length if insert else length - 1
        if not -length <= pos <= top:
            raise self.refuse(f"{node.op_type} position {pos} outside a sequence of {length}",
                              node)
        return pos + length if pos < 0 else pos

    def run(self) -> None:
        for node in self.graph.node:
            if node.op_type in SEQUENCE_OPS and node.domain in ("", "ai.onnx"):
                getattr(self, f"_{node.op_type}")(node)
            elif any(i in self.seqs for i in node.input):
                raise self.refuse(f"{node.op_type} of a sequence", node)
            else:
                self.nodes.append(node)
        for out in self.graph.output:
            if out.name in self.seqs:
                raise UnsupportedOpsError([("a sequence as a graph output", out.name)])
        del self.graph.node[:]
        self.graph.node.extend(self.nodes)
        for info in [*self.graph.value_info]:
            if info.type.HasField("sequence_type"):
                self.graph.value_info.remove(info)

    # -- the ops -----------------------------------------------------------------------------
    def _SequenceEmpty(self, node: onnx.NodeProto) -> None:
        self.seqs[node.output[0]] = []

    def _SequenceConstruct(self, node: onnx.NodeProto) -> None:
        self.seqs[node.output[0]] = list(node.input)

    def _SequenceInsert(self, node: onnx.NodeProto) -> None:
        items = list(self.seqs[node.input[0]])
        items.insert(self.position(node, 2, len(items), insert=True), node.input[1])
        self.seqs[node.output[0]] = items

    def _SequenceErase(self, node: onnx.NodeProto) -> None:
        items = list(self.seqs[node.input[0]])
        del items[self.position(node, 1, len(items), insert=False)]
        self.seqs[node.output[0]] = items

    def _SequenceAt(self, node: onnx.NodeProto) -> None:
        items = self.seqs[node.input[0]]
        pick = items[self.position(node, 1, len(items), insert=False)]
        self.readable([pick], node)
        self.nodes.append(helper.make_node("Identity", [pick], [node.output[0]],
                                           name=node.name or node.output[0]))

    def _SequenceLength(self, node: onnx.NodeProto) -> None:
        self.const(node.output[0], np.array(len(self.seqs[node.input[0]]), np.int64))

    def _ConcatFromSequence(self, node: onnx.NodeProto) -> None:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        items, axis = self.seqs[node.input[0]], int(attrs["axis"])
        if not items:
            raise self.refuse("ConcatFromSequence of an empty sequence", node)
        self.readable(items, node)
        if attrs.get("new_axis", 0):
            shape = self.static(items[0], node)
            axis %= len(shape) + 1
            unit = [*shape[:axis], 1, *shape[axis:]]
            target = self.const(self.fresh(node.output[0]), np.array(unit, np.int64))
            reshaped = []
            for item in items:
                reshaped.append(self.fresh(node.output[0]))
                self.nodes.append(helper.make_node("Reshape", [item, target], [reshaped[-1]]))
            items = reshaped
        self.nodes.append(helper.make_node("Concat", items, [node.output[0]], axis=axis,
                                           name=node.name or node.output[0]))

    def _SplitToSequence(self, node: onnx.NodeProto) -> None:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if len(node.input) > 1 and node.input[1] and node.input[1] not in self.consts:
            self._split_by_run_time_sizes(node)
            return
        shape = self.static(node.input[0], node)
        axis = int(attrs.get("axis", 0)) % len(shape)
        dim = shape[axis]
        squeeze = False
        if len(node.input) < 2 or not node.input[1]:
            sizes, squeeze = [1] * dim, not attrs.get("keepdims", 1)
        else:
            split = self.consts.get(node.input[1])
            if split is None:
                raise self.refuse("SplitToSequence with a split computed at run time", node)
            if split.ndim == 0:
                step = int(split)
                sizes = [min(step, dim - k) for k in range(0, dim, step)]
            else:
                sizes = [int(v) for v in split]
        pieces = [self.fresh(node.output[0]) for _ in sizes]
        self.nodes.append(self.split_node(node, sizes, axis, pieces))
        if squeeze:
            rest = [d for k, d in enumerate(shape) if k != axis]
            target = self.const(self.fresh(node.output[0]), np.array(rest, np.int64))
            squeezed = [self.fresh(node.output[0]) for _ in pieces]
            self.nodes += [helper.make_node("Reshape", [p, target], [q])
                           for p, q in zip(pieces, squeezed, strict=True)]
            pieces = squeezed
        self.seqs[node.output[0]] = pieces

    def _split_by_run_time_sizes(self, node: onnx.NodeProto) -> None:
        """Sizes given at run time by a 1-D tensor of static length: the sequence's length
        is known, its pieces are not (only SequenceLength may read it)."""
        sizes = self.shapes.get(node.input[1])
        if sizes is None or len(sizes) != 1:
            raise self.refuse("SplitToSequence with a split computed at run time", node)
        pieces = [self.fresh(node.output[0]) for _ in range(sizes[0])]
        self.opaque.update(pieces)
        self.seqs[node.output[0]] = pieces

    def split_node(self, node: onnx.NodeProto, sizes: list[int], axis: int,
                   outs: list[str]) -> onnx.NodeProto:
        name = node.name or node.output[0]
        if self.opset >= 13:
            split = self.const(self.fresh(node.output[0]), np.array(sizes, np.int64))
            return helper.make_node("Split", [node.input[0], split], outs, axis=axis, name=name)
        return helper.make_node("Split", [node.input[0]], outs, axis=axis, split=sizes,
                                name=name)

    def readable(self, items: list[str], node: onnx.NodeProto) -> None:
        if self.opaque.intersection(items):
            raise self.refuse(f"{node.op_type} of a piece split by sizes computed at run time",
                              node)

    def static(self, name: str, node: onnx.NodeProto) -> list[int]:
        shape = self.shapes.get(name)
        if shape is None:
            raise self.refuse(f"{node.op_type} of a tensor without a static shape", node)
        return shape


def _shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Static shapes known before the sequences are resolved (graph inputs, initializers and
    what onnx's shape inference finds)."""
    try:
        inferred = shape_inference.infer_shapes(model)
        infos = [*inferred.graph.input, *inferred.graph.value_info]
    except Exception:  # inference of sequence graphs may fail; the inputs still count
        infos = list(model.graph.input)
    shapes = {}
    for info in infos:
        if not info.type.HasField("tensor_type"):
            continue
        dims = info.type.tensor_type.shape.dim
        if info.type.tensor_type.HasField("shape") and all(d.HasField("dim_value")
                                                           for d in dims):
            shapes[info.name] = [d.dim_value for d in dims]
    shapes.update({i.name: list(i.dims) for i in model.graph.initializer})
    return shapes


def unroll(model: onnx.ModelProto) -> None:
    """Resolve every sequence op of ``model`` in place (see the module docstring)."""
    if any(n.op_type in SEQUENCE_OPS for n in model.graph.node):
        _Unroller(model).run()
