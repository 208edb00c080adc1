"""The model's interface as ATC's flags shape it: ``--out_nodes``, ``--input_fp16_nodes``,
``--output_type`` and ``--dynamic_image_size``.

* ``--out_nodes="node:0;node2:1"``: the model's outputs are those outputs of those ONNX
  nodes (by node name) instead of the graph's; nodes nothing needs then are dropped. An
  unknown node or output index: ``E10016`` (145000).
* ``--input_fp16_nodes="x;y"``: those float32 inputs take float16 data (a ``Cast`` task
  follows each). An unknown input: ``E10016``; a non-float32 input: 145000.
* ``--output_type=FP32|FP16|UINT8|INT8`` (every float output) or ``"node:0:FP16;..."`` (one
  output of a node): a ``Cast`` task ends each such output. A bad type or entry: 145000.
* ``--dynamic_image_size="h1,w1;h2,w2"``: 2..100 distinct (H, W) gears for inputs whose H
  and W are -1 in ``--input_shape`` (NCHW: dims 2 and 3, NHWC: 1 and 2). A bad list, no -1
  or -1 elsewhere: ``ACL_ERROR_GE_PARAM_INVALID`` 145000 (CANN documents no code of its own).
  The gears are kept sorted by area (the memory plan is made at the last, largest one).

Stateless; no threads.
"""

from __future__ import annotations

import onnx
from onnx import shape_inference

from npuemu.host.models import lowering
from npuemu.host.models.codes import ACL_ERROR_GE_PARAM_INVALID, ModelError
from npuemu.host.models.graph import ACL_DTYPES, Graph, Node, Tensor

OUTPUT_TYPES = {"FP32": "float32", "FP16": "float16", "UINT8": "uint8", "INT8": "int8"}
MAX_HW_GEARS = 100


def _param(detail: str) -> ModelError:
    return ModelError(ACL_ERROR_GE_PARAM_INVALID, detail)


def _not_found(name: str, flag: str) -> ModelError:
    return _param(f"E10016: Opname [{name}] specified in [--{flag}] is not found in the "
                  "model")


def _node_outputs(model: onnx.ModelProto, text: str, flag: str) -> list[tuple[str, str]]:
    """``"node:i;..."`` -> [(entry, output tensor name)]."""
    nodes = {n.name: n for n in model.graph.node if n.name}
    found = []
    for entry in (e.strip() for e in text.split(";") if e.strip()):
        name, sep, index = entry.rpartition(":")
        if not sep or not index.isdigit():
            raise _param(f"--{flag} entry {entry!r} is not node_name:output_index")
        node = nodes.get(name)
        if node is None or int(index) >= len(node.output):
            raise _not_found(entry, flag)
        found.append((entry, node.output[int(index)]))
    return found


def select_outputs(model: onnx.ModelProto, out_nodes: str | None) -> onnx.ModelProto:
    """The model with ``--out_nodes``'s outputs (see module doc); unchanged without it."""
    if not out_nodes:
        return model
    wanted = [t for _e, t in _node_outputs(model, out_nodes, "out_nodes")]
    inferred = shape_inference.infer_shapes(model)
    infos = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.output[:]
    for name in wanted:
        info = infos.get(name)
        out.graph.output.append(info if info is not None else
                                onnx.helper.make_empty_tensor_value_info(name))
    needed, keep = set(wanted), []
    for node in reversed(out.graph.node):
        if needed & set(node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    del out.graph.node[:]
    out.graph.node.extend(reversed(keep))
    return out


def parse_fp16_nodes(text: str | None) -> set[str]:
    """``--input_fp16_nodes="a;b"`` -> the input names."""
    return {n.strip() for n in (text or "").split(";") if n.strip()}


def fp16_inputs(graph: Graph, names: set[str]) -> None:
    """Make each named float32 input float16, a Cast task converting it (see module doc)."""
    for name in sorted(names):
        if name not in graph.inputs:
            raise _not_found(name, "input_fp16_nodes")
        t = graph.tensors[name]
        if t.dtype != "float32":
            raise _param(f"--input_fp16_nodes: input {name!r} is {t.dtype}, not float32")
        inner = f"{name}__fp32"
        graph.tensors[inner] = Tensor(inner, "float32", t.shape)
        for n in graph.nodes:
            n.inputs = [inner if i == name else i for i in n.inputs]
        t.dtype = "float16"
        _cast_first(graph, Node(f"{name}__cast", "Cast", [name], [inner],
                                {"dst_type": ACL_DTYPES["float32"]}, "input_fp16_nodes"))


def _cast_first(graph: Graph, node: Node) -> None:
    node.tiling = lowering.check_node(graph, node)
    graph.nodes.insert(0, node)


def output_types(graph: Graph, model: onnx.ModelProto, text: str | None) -> None:
    """Cast the outputs ``--output_type`` names to its type (see module doc)."""
    if not text:
        return
    if ":" not in text:
        dtype = _output_type(text)
        for name in list(graph.outputs):
            if graph.tensors[name].dtype in ("float32", "float16"):
                _cast_output(graph, name, dtype)
        return
    entries = [e.strip() for e in text.split(";") if e.strip()]
    spec = ";".join(e.rpartition(":")[0] for e in entries)
    for (entry, tensor), full in zip(_node_outputs(model, spec, "output_type"), entries,
                                     strict=True):
        if tensor not in graph.outputs:
            raise _param(f"--output_type: {entry} is not an output of the model")
        _cast_output(graph, tensor, _output_type(full.rpartition(":")[2]))


def _output_type(name: str) -> str:
    dtype = OUTPUT_TYPES.get(name.strip().upper())
    if dtype is None:
        raise _param(f"--output_type {name!r}: one of {sorted(OUTPUT_TYPES)}")
    return dtype


def _cast_output(graph: Graph, name: str, dtype: str) -> None:
    t = graph.tensors[name]
    if t.dtype == dtype:
        return
    inner = f"{name}__{t.dtype}"
    graph.tensors[inner] = Tensor(inner, t.dtype, t.shape)
    for n in graph.nodes:
        n.outputs = [inner if o == name else o for o in n.outputs]
        n.inputs = [inner if i == name else i for i in n.inputs]
    t.dtype = dtype
    node = Node(f"{name}__cast", "Cast", [inner], [name], {"dst_type": ACL_DTYPES[dtype]},
                "output_type")
    node.tiling = lowering.check_node(graph, node)
    graph.nodes.append(node)


def parse_hw(text: str | None) -> list[list[int]]:
    """``--dynamic_image_size="224,224;448,448"`` -> [[h, w], ...] (2..100 distinct)."""
    if not text:
        return []
    try:
        gears = [[int(v) for v in part.split(",")] for part in text.split(";") if part]
    except ValueError as exc:
        raise _param(f"--dynamic_image_size {text!r}: not h,w pairs of integers") from exc
    if any(len(g) != 2 or min(g) < 1 for g in gears) or \
            len({tuple(g) for g in gears}) != len(gears) or \
            not 2 <= len(gears) <= MAX_HW_GEARS:
        raise _param(f"--dynamic_image_size {text!r}: needs 2..{MAX_HW_GEARS} distinct "
                     "positive h,w pairs")
    return sorted(gears, key=lambda g: (g[0] * g[1], g[0]))  # the largest last, as planned


def hw_gear_shapes(shapes: dict[str, list[int]], gears: list[list[int]],
                   fmt: str) -> list[dict[str, list[int]]]:
    """One ``--input_shape`` per (H, W) gear: the -1 H and W dims replaced."""
    axes = (1, 2) if fmt == "NHWC" else (2, 3)
    marked = {n for n, dims in shapes.items() if -1 in dims}
    if not marked:
        raise _param("--dynamic_image_size needs -1 on H and W in --input_shape")
    for name in marked:
        dims = shapes[name]
        if len(dims) != 4 or [i for i, d in enumerate(dims) if d == -1] != list(axes):
            raise _param(f"input {name!r}: with --dynamic_image_size only H and W "
                         f"({fmt}) may be -1, got {dims}")
    out = []
    for h, w in gears:
        gear = {}
        for name, dims in shapes.items():
            dims = list(dims)
            if name in marked:
                dims[axes[0]], dims[axes[1]] = h, w
            gear[name] = dims
        out.append(gear)
    return out

