"""ONNX front end: load, check, pin input shapes, fold constants, infer static shapes.

``prepare(path_or_model, input_shape)`` returns a checked ``onnx.ModelProto`` in which

* graph inputs that have an initializer (old exporters list every weight as an input) are
  constants, as ATC treats them;
* every node whose inputs are all constants is folded: the constant sub-graph is run once by
  onnx's :class:`onnx.reference.ReferenceEvaluator` and replaced by plain initializers (so
  models whose weights come from ``ConstantOfShape`` and friends end with plain weights);
  ``Shape`` and ``Size`` of a statically shaped tensor fold too, which in turn folds the
  shape arithmetic of exported ``Reshape`` patterns;
* sequence ops with constant positions are resolved (:mod:`.sequences`);
* every value has a concrete static shape (``onnx.shape_inference`` with data propagation),
  or a :class:`~npuemu.host.models.codes.ModelError` names the tensor that has none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from npuemu.host.models import sequences
from npuemu.host.models.codes import (
    ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID,
    ACL_ERROR_GE_PARAM_INVALID,
    ACL_ERROR_GE_SHAPE_INVALID,
    ModelError,
)

# Ops whose value is not a function of their inputs: never folded.
NONDETERMINISTIC = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
    "Bernoulli",
})
_MAX_ROUNDS = 8
_SMALL_CONST = 4096  # initializers up to this many elements stay in shape inference


def load(source: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    """Read and check an ONNX model (145002 if unreadable, 145000 if invalid)."""
    if isinstance(source, onnx.ModelProto):
        model = source
    else:
        try:
            model = onnx.load(os.fspath(source))
        except OSError as exc:
            raise ModelError(ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, f"{source}: {exc}") from exc
        except Exception as exc:  # protobuf decode errors have no common base
            raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"{source}: not an ONNX model: {exc}") \
                from exc
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"ONNX check failed: {exc}") from exc
    return model


def parse_input_shape(text: str | None) -> dict[str, list[int]]:
    """Parse ATC's ``--input_shape`` (``"name:n,c,h,w;name2:d0,d1"``); -1 marks a gear dim."""
    shapes: dict[str, list[int]] = {}
    if not text:
        return shapes
    for part in text.split(";"):
        name, sep, dims = part.rpartition(":")
        try:
            if not sep or not name:
                raise ValueError(part)
            shapes[name] = [int(d) for d in dims.split(",")] if dims else []
        except ValueError as exc:
            raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"bad --input_shape entry {part!r}") \
                from exc
    return shapes


def prepare(source: str | os.PathLike | onnx.ModelProto,
            input_shape: dict[str, list[int]] | None = None) -> onnx.ModelProto:
    """Load, check, pin input shapes, fold constants and infer shapes (see module doc)."""
    model = onnx.ModelProto()
    model.CopyFrom(load(source))
    _drop_initializer_inputs(model.graph)
    model.ir_version = max(model.ir_version, 4)  # IR 4+: initializers need not be inputs
    _constant_nodes_to_initializers(model.graph)
    _pin_input_shapes(model.graph, input_shape or {})
    sequences.unroll(model)
    for _ in range(_MAX_ROUNDS):
        model = _infer(model)
        folded = fold_constants(model)
        folded += _fold_shapes(model)
        if not folded:
            break
    model = _infer(model)
    _require_static(model)
    return model


def fold_constants(model: onnx.ModelProto) -> int:
    """Replace every all-constant node by initializers, in one reference-evaluator run.

    Returns how many nodes were folded.
    """
    graph = model.graph
    consts = {init.name for init in graph.initializer}
    foldable = []
    for node in graph.node:
        if _foldable(node, consts):
            foldable.append(node)
            consts.update(o for o in node.output if o)
    if not foldable:
        return 0
    folded_names = {o for n in foldable for o in n.output}
    needed = _needed_outputs(graph, foldable, folded_names)
    values = _evaluate(model, foldable, needed) if needed else {}
    keep = [n for n in graph.node if n not in foldable]
    del graph.node[:]
    graph.node.extend(keep)
    for name in needed:
        graph.initializer.append(numpy_helper.from_array(np.asarray(values[name]), name))
    _drop_unused_initializers(graph)
    return len(foldable)


def _foldable(node: onnx.NodeProto, consts: set[str]) -> bool:
    if node.op_type in NONDETERMINISTIC or node.domain not in ("", "ai.onnx"):
        return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           for a in node.attribute):
        return False
    return all(not i or i in consts for i in node.input)


def _needed_outputs(graph: onnx.GraphProto, foldable: list, folded: set[str]) -> list[str]:
    used = {i for n in graph.node if n not in foldable for i in n.input}
    used.update(o.name for o in graph.output)
    return sorted(folded & used)


def _evaluate(model: onnx.ModelProto, nodes: list, outputs: list[str]) -> dict[str, np.ndarray]:
    graph = model.graph
    wanted = {i for n in nodes for i in n.input}
    inits = [i for i in graph.initializer if i.name in wanted]
    sub = helper.make_graph(nodes, "fold", [], [helper.make_value_info(o, onnx.TypeProto())
                                                for o in outputs], inits)
    sub_model = helper.make_model(sub, opset_imports=model.opset_import,
                                  ir_version=model.ir_version)
    try:
        results = ReferenceEvaluator(sub_model).run(None, {})
    except Exception as exc:  # the evaluator raises whatever its op implementation raises
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"constant folding failed: {exc}") from exc
    return dict(zip(outputs, results, strict=True))


def _fold_shapes(model: onnx.ModelProto) -> int:
    """Fold ``Shape`` / ``Size`` of tensors whose shape inference found a static shape."""
    graph = model.graph
    shapes = _static_shapes(model)
    keep, count = [], 0
    for node in graph.node:
        shape = shapes.get(node.input[0]) if node.op_type in ("Shape", "Size") else None
        if shape is None:
            keep.append(node)
            continue
        value = np.array(_shape_slice(node, shape) if node.op_type == "Shape"
                         else int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        count += 1
    if count:
        del graph.node[:]
        graph.node.extend(keep)
    return count


def _shape_slice(node: onnx.NodeProto, shape: list[int]) -> list[int]:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return shape[attrs.get("start", 0):attrs.get("end", len(shape))]


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    graph = model.graph
    shapes = {}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        shape = _dims(info)
        if shape is not None:
            shapes[info.name] = shape
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def _dims(info: onnx.ValueInfoProto) -> list[int] | None:
    ttype = info.type.tensor_type
    if not ttype.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in ttype.shape.dim]
    return None if any(d < 0 for d in dims) else dims


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference on a weightless copy (big initializers become typed inputs), so the
    weights are not serialized for every round; the inferred value infos are copied back."""
    light = onnx.ModelProto()
    light.CopyFrom(model)  # protobuf copy of the weights is cheap next to serializing them
    graph = light.graph
    keep, stand_ins = [], []
    for init in graph.initializer:
        if int(np.prod(init.dims, dtype=np.int64)) <= _SMALL_CONST:
            keep.append(init)
        else:
            stand_ins.append(helper.make_tensor_value_info(init.name, init.data_type,
                                                           list(init.dims)))
    del graph.initializer[:]
    graph.initializer.extend(keep)
    graph.input.extend(stand_ins)
    try:
        inferred = shape_inference.infer_shapes(light, check_type=True, strict_mode=True,
                                                data_prop=True)
    except Exception as exc:  # InferenceError and friends
        raise ModelError(ACL_ERROR_GE_SHAPE_INVALID, f"shape inference failed: {exc}") from exc
    del model.graph.value_info[:]
    model.graph.value_info.extend(inferred.graph.value_info)
    for mine, theirs in zip(model.graph.output, inferred.graph.output, strict=True):
        mine.CopyFrom(theirs)
    return model


def _require_static(model: onnx.ModelProto) -> None:
    shapes = _static_shapes(model)
    used = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out in node.output:
            if out in used and out not in shapes:
                raise ModelError(ACL_ERROR_GE_SHAPE_INVALID,
                                 f"no static shape for tensor {out!r} (node {node.name!r}, "
                                 f"{node.op_type}); give --input_shape")
    for info in model.graph.input:
        if info.name not in shapes:
            raise ModelError(ACL_ERROR_GE_SHAPE_INVALID,
                             f"input {info.name!r} has no static shape; give --input_shape")


def _drop_initializer_inputs(graph: onnx.GraphProto) -> None:
    inits = {i.name for i in graph.initializer}
    keep = [i for i in graph.input if i.name not in inits]
    del graph.input[:]
    graph.input.extend(keep)


def _constant_nodes_to_initializers(graph: onnx.GraphProto) -> None:
    keep = []
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            tensor = _constant_value(node)
            graph.initializer.append(numpy_helper.from_array(tensor, node.output[0]))
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    attr = node.attribute[0]
    value = helper.get_attribute_value(attr)
    if attr.name == "value":
        return numpy_helper.to_array(value)
    kinds = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
             "value_ints": np.int64}
    if attr.name in kinds:
        return np.array(value if isinstance(value, float | int) else list(value),
                        dtype=kinds[attr.name])
    raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                     f"Constant node {node.name!r}: attribute {attr.name} not supported")


def _pin_input_shapes(graph: onnx.GraphProto, shapes: dict[str, list[int]]) -> None:
    names = {i.name for i in graph.input}
    unknown = sorted(set(shapes) - names)
    if unknown:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                         f"--input_shape names {unknown}, not inputs of the model "
                         f"(inputs: {sorted(names)})")
    for info in graph.input:
        if info.name in shapes:
            _set_dims(info, shapes[info.name])


def _set_dims(info: onnx.ValueInfoProto, dims: Iterable[int]) -> None:
    shape = info.type.tensor_type.shape
    del shape.dim[:]
    for d in dims:
        if d < 0:
            raise ModelError(ACL_ERROR_GE_SHAPE_INVALID,
                             f"input {info.name!r}: dim {d} (gears are set per batch size)")
        shape.dim.add().dim_value = d


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    keep = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
