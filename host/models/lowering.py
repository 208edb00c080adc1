"""Lower a prepared ONNX model (see :mod:`.onnx_front`) onto the op library's op types.

Each ONNX node becomes one or more :class:`~.graph.Node` objects naming a library op type of
issue 10 (``Conv2D``, ``MaxPool``, ``AvgPool``, ``MatMul``, ``SoftmaxV2``, ...) with plain
attributes. A few ONNX ops are rewritten into several library ops: ``Gemm`` (MatMul, then a
scale and the bias Add), ``Sum`` / variadic ``Max`` / ``Min`` (chains of binary ops), ``LRN``
(square, transpose channels last-but-one, AvgPool over the channel window, scale, Pow, Div),
``Softmax`` before opset 13 (Reshape to 2-D around SoftmaxV2). ``Identity`` and inference
``Dropout`` disappear (their output is renamed to their input). Reshape-like ops (Reshape,
Flatten, Squeeze, Unsqueeze) become ``Reshape`` with the inferred static shape.

Every node the table does not cover is collected, and one
:class:`~.codes.UnsupportedOpsError` names them all with their node names; nothing is
written. Which op types exist is the op library's business: :data:`LIBRARY_OPS` is the list
issue 10 asks for, used until the library's registry can be queried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from npuemu.host.models.codes import ACL_ERROR_GE_PARAM_INVALID, ModelError, UnsupportedOpsError
from npuemu.host.models.graph import Graph, Node, Tensor

LIBRARY_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg",
    "Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "Cast", "MatMul", "BatchMatMul", "Conv2D",
    "MaxPool", "AvgPool", "GlobalAveragePool", "BatchNorm", "LayerNorm", "SoftmaxV2",
    "ReduceSum", "ReduceMean", "ReduceMax", "Transpose", "Reshape", "Concat", "Split", "Gather",
    "Pad", "Where", "Fill", "Identity",
})
_SAME = {name: name for name in (
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg", "Relu", "Gelu",
    "Sigmoid", "Tanh", "Erf", "Where", "GlobalAveragePool")}
_VARIADIC = {"Sum": "Add", "Max": "Maximum", "Min": "Minimum", "Mean": None}
_ALIASES = ("Identity", "Dropout")
_RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")


class _Lowerer:
    """Carries the graph being built; one ``_op_<Type>`` method per ONNX op type."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        self.nodes: list[Node] = []
        self.tensors: dict[str, Tensor] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.alias: dict[str, str] = {}
        self._counter = 0
        self._collect_tensors()

    # -- tensors ---------------------------------------------------------------------------
    def _collect_tensors(self) -> None:
        g = self.model.graph
        for init in g.initializer:
            arr = numpy_helper.to_array(init)
            self.weights[init.name] = arr
            self.tensors[init.name] = Tensor(init.name, arr.dtype.name, arr.shape, "weight")
        for info in [*g.input, *g.value_info, *g.output]:
            if info.name in self.tensors:
                continue
            t = info.type.tensor_type
            dtype = helper.tensor_dtype_to_np_dtype(t.elem_type).name
            shape = tuple(d.dim_value for d in t.shape.dim)
            self.tensors[info.name] = Tensor(info.name, dtype, shape)
        for info in g.input:
            self.tensors[info.name].kind = "input"

    def name(self, n: str) -> str:
        while n in self.alias:
            n = self.alias[n]
        return n

    def t(self, n: str) -> Tensor:
        return self.tensors[self.name(n)]

    def const(self, n: str) -> np.ndarray | None:
        return self.weights.get(self.name(n)) if n else None

    def new_tensor(self, like: str, shape: tuple[int, ...], dtype: str | None = None) -> str:
        self._counter += 1
        name = f"{like}__t{self._counter}"
        self.tensors[name] = Tensor(name, dtype or self.t(like).dtype, tuple(shape))
        return name

    def new_weight(self, base: str, value: np.ndarray) -> str:
        self._counter += 1
        name = f"{base}__w{self._counter}"
        self.weights[name] = value
        self.tensors[name] = Tensor(name, value.dtype.name, value.shape, "weight")
        return name

    def emit(self, src: onnx.NodeProto, op: str, inputs: list[str], outputs: list[str],
             **attrs: Any) -> None:
        name = src.name or src.output[0]
        if any(n.name == name for n in self.nodes[-4:]):
            name = f"{name}/{op}{len(self.nodes)}"
        self.nodes.append(Node(name, op, [self.name(i) if i else "" for i in inputs],
                               list(outputs), attrs, src.op_type))

    # -- driver ----------------------------------------------------------------------------
    def run(self) -> Graph:
        missing = []
        for node in self.model.graph.node:
            handler = self.handler(node)
            if handler is None:
                missing.append((node.op_type, node.name or node.output[0]))
            elif not missing:
                handler(node, {a.name: helper.get_attribute_value(a) for a in node.attribute})
        if missing:
            raise UnsupportedOpsError(missing)
        return self.finish()

    def handler(self, node: onnx.NodeProto) -> Callable | None:
        if node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type in _SAME:
            return self._op_same
        if node.op_type in _ALIASES:
            return self._op_alias
        if node.op_type in _RESHAPES:
            return self._op_reshape
        if _VARIADIC.get(node.op_type):
            return self._op_variadic
        return getattr(self, f"_op_{node.op_type}", None)

    def finish(self) -> Graph:
        g = self.model.graph
        outputs = [self.name(o.name) for o in g.output]
        for out in outputs:
            if self.tensors[out].kind != "intermediate":
                raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                                 f"output {out!r} is a {self.tensors[out].kind}, not computed")
            self.tensors[out].kind = "output"
        used = {i for n in self.nodes for i in n.inputs} | {o for n in self.nodes
                                                             for o in n.outputs}
        tensors = {k: v for k, v in self.tensors.items() if k in used}
        weights = {k: v for k, v in self.weights.items() if k in used}
        return Graph(g.name or "model", self.nodes, tensors, [i.name for i in g.input],
                     outputs, weights)

    # -- op handlers -----------------------------------------------------------------------
    def _op_same(self, n: onnx.NodeProto, a: dict) -> None:
        self.emit(n, _SAME[n.op_type], list(n.input), [n.output[0]], **a)

    def _op_alias(self, n: onnx.NodeProto, a: dict) -> None:
        if n.op_type == "Dropout" and a.get("training_mode"):
            raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"Dropout {n.name!r} in training mode")
        self.alias[n.output[0]] = self.name(n.input[0])

    def _op_reshape(self, n: onnx.NodeProto, a: dict) -> None:
        self.emit(n, "Reshape", [n.input[0]], [n.output[0]],
                  shape=list(self.t(n.output[0]).shape))

    def _op_variadic(self, n: onnx.NodeProto, a: dict) -> None:
        op = _VARIADIC[n.op_type]
        ins = list(n.input)
        if len(ins) == 1:
            self.alias[n.output[0]] = self.name(ins[0])
            return
        acc = ins[0]
        for i, other in enumerate(ins[1:], 1):
            out = n.output[0] if i == len(ins) - 1 else self.new_tensor(
                n.output[0], np.broadcast_shapes(self.t(acc).shape, self.t(other).shape))
            self.emit(n, op, [acc, other], [out])
            acc = out

    def _op_Cast(self, n: onnx.NodeProto, a: dict) -> None:
        self.emit(n, "Cast", [n.input[0]], [n.output[0]], dst_type=self.t(n.output[0]).dtype)

    def _op_Conv(self, n: onnx.NodeProto, a: dict) -> None:
        w = self.t(n.input[1])
        if len(w.shape) != 4:
            raise UnsupportedOpsError([(f"Conv{len(w.shape) - 2}D", n.name)])
        self.emit(n, "Conv2D", list(n.input), [n.output[0]],
                  strides=list(a.get("strides", [1, 1])), pads=_pads(n, a, self, w.shape[2:]),
                  dilations=list(a.get("dilations", [1, 1])), groups=a.get("group", 1),
                  data_format="NCHW")

    def _pool(self, n: onnx.NodeProto, a: dict, op: str, **extra: Any) -> None:
        ks = list(a["kernel_shape"])
        if len(ks) != 2:
            raise UnsupportedOpsError([(f"{n.op_type}{len(ks)}D", n.name)])
        self.emit(n, op, [n.input[0]], [n.output[0]], ksize=ks,
                  strides=list(a.get("strides", [1, 1])), pads=_pads(n, a, self, ks),
                  ceil_mode=a.get("ceil_mode", 0), data_format="NCHW", **extra)

    def _op_MaxPool(self, n: onnx.NodeProto, a: dict) -> None:
        if len(n.output) > 1 and n.output[1]:
            raise UnsupportedOpsError([("MaxPool with Indices", n.name)])
        self._pool(n, a, "MaxPool", dilations=list(a.get("dilations", [1, 1])))

    def _op_AveragePool(self, n: onnx.NodeProto, a: dict) -> None:
        self._pool(n, a, "AvgPool", count_include_pad=a.get("count_include_pad", 0))

    def _op_BatchNormalization(self, n: onnx.NodeProto, a: dict) -> None:
        self.emit(n, "BatchNorm", list(n.input[:5]), [n.output[0]],
                  epsilon=a.get("epsilon", 1e-5), data_format="NCHW")

    def _op_LayerNormalization(self, n: onnx.NodeProto, a: dict) -> None:
        self.emit(n, "LayerNorm", list(n.input), [n.output[0]], axis=a.get("axis", -1),
                  epsilon=a.get("epsilon", 1e-5))

    def _op_MatMul(self, n: onnx.NodeProto, a: dict) -> None:
        two_d = len(self.t(n.input[0]).shape) == 2 and len(self.t(n.input[1]).shape) == 2
        self.emit(n, "MatMul" if two_d else "BatchMatMul", list(n.input), [n.output[0]],
                  transpose_a=False, transpose_b=False)

    def _op_Gemm(self, n: onnx.NodeProto, a: dict) -> None:
        alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
        out = n.output[0]
        y_shape = self.t(out).shape
        has_c = len(n.input) > 2 and n.input[2]
        mm = self.new_tensor(out, y_shape) if has_c or alpha != 1.0 else out
        self.emit(n, "MatMul", [n.input[0], n.input[1]], [mm],
                  transpose_a=bool(a.get("transA", 0)), transpose_b=bool(a.get("transB", 0)))
        if alpha != 1.0:
            scaled = self.new_tensor(out, y_shape) if has_c else out
            k = self.new_weight(out, np.array(alpha, dtype=self.t(out).dtype))
            self.emit(n, "Mul", [mm, k], [scaled])
            mm = scaled
        if has_c:
            c = n.input[2]
            if beta != 1.0:
                cval = self.const(c)
                if cval is None:
                    raise UnsupportedOpsError([("Gemm with beta and a computed C", n.name)])
                c = self.new_weight(out, (cval * beta).astype(cval.dtype))
            self.emit(n, "Add", [mm, c], [out])

    def _op_Softmax(self, n: onnx.NodeProto, a: dict) -> None:
        x = self.t(n.input[0])
        axis = a.get("axis", -1 if self.opset >= 13 else 1) % max(len(x.shape), 1)
        if self.opset >= 13 or axis == len(x.shape) - 1:
            self.emit(n, "SoftmaxV2", [n.input[0]], [n.output[0]], axes=[axis])
            return
        flat = (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
        r = self.new_tensor(n.output[0], flat)
        s = self.new_tensor(n.output[0], flat)
        self.emit(n, "Reshape", [n.input[0]], [r], shape=list(flat))
        self.emit(n, "SoftmaxV2", [r], [s], axes=[1])
        self.emit(n, "Reshape", [s], [n.output[0]], shape=list(x.shape))

    def _op_LRN(self, n: onnx.NodeProto, a: dict) -> None:
        """y = x / (bias + alpha/size * sum of x^2 over the channel window)^beta (ONNX LRN)."""
        x = self.t(n.input[0])
        if len(x.shape) != 4:
            raise UnsupportedOpsError([("LRN on a non-4-D tensor", n.name)])
        size, out = int(a["size"]), n.output[0]
        nn, c, h, w = x.shape
        dt = np.dtype(x.dtype)
        sq = self.new_tensor(out, x.shape)
        self.emit(n, "Mul", [n.input[0], n.input[0]], [sq])
        tr = self.new_tensor(out, (nn, h, c, w))
        self.emit(n, "Transpose", [sq], [tr], perm=[0, 2, 1, 3])
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        avg = self.new_tensor(out, (nn, h, c, w))
        self.emit(n, "AvgPool", [tr], [avg], ksize=[size, 1], strides=[1, 1],
                  pads=[lo, 0, hi, 0], ceil_mode=0, count_include_pad=1, data_format="NCHW")
        back = self.new_tensor(out, x.shape)
        self.emit(n, "Transpose", [avg], [back], perm=[0, 2, 1, 3])
        scaled = self.new_tensor(out, x.shape)
        self.emit(n, "Mul", [back, self.new_weight(out, np.array(a.get("alpha", 1e-4), dt))],
                  [scaled])
        base = self.new_tensor(out, x.shape)
        self.emit(n, "Add", [scaled, self.new_weight(out, np.array(a.get("bias", 1.0), dt))],
                  [base])
        den = self.new_tensor(out, x.shape)
        self.emit(n, "Pow", [base, self.new_weight(out, np.array(a.get("beta", 0.75), dt))],
                  [den])
        self.emit(n, "Div", [n.input[0], den], [out])

    def _op_Transpose(self, n: onnx.NodeProto, a: dict) -> None:
        rank = len(self.t(n.input[0]).shape)
        self.emit(n, "Transpose", [n.input[0]], [n.output[0]],
                  perm=list(a.get("perm", range(rank - 1, -1, -1))))

    def _op_Concat(self, n: onnx.NodeProto, a: dict) -> None:
        self.emit(n, "Concat", list(n.input), [n.output[0]], axis=a["axis"])

    def _op_Split(self, n: onnx.NodeProto, a: dict) -> None:
        sizes = [self.t(o).shape[a.get("axis", 0)] for o in n.output]
        self.emit(n, "Split", [n.input[0]], list(n.output), axis=a.get("axis", 0), sizes=sizes)

    def _op_Gather(self, n: onnx.NodeProto, a: dict) -> None:
        self.emit(n, "Gather", list(n.input), [n.output[0]], axis=a.get("axis", 0))

    def _reduce(self, n: onnx.NodeProto, a: dict) -> None:
        axes = a.get("axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            value = self.const(n.input[1])
            if value is None:
                raise UnsupportedOpsError([(f"{n.op_type} with computed axes", n.name)])
            axes = value.tolist()
        rank = len(self.t(n.input[0]).shape)
        if axes is None and a.get("noop_with_empty_axes", 0):
            self.alias[n.output[0]] = self.name(n.input[0])
            return
        axes = list(range(rank)) if axes is None else [x % rank for x in axes]
        self.emit(n, n.op_type, [n.input[0]], [n.output[0]], axes=axes,
                  keepdims=bool(a.get("keepdims", 1)))

    _op_ReduceSum = _op_ReduceMean = _op_ReduceMax = _reduce

    def _op_Pad(self, n: onnx.NodeProto, a: dict) -> None:
        if a.get("mode", b"constant") not in (b"constant", "constant"):
            raise UnsupportedOpsError([(f"Pad mode {a['mode']!r}", n.name)])
        pads = a.get("pads")
        value = a.get("value", 0.0)
        if pads is None:
            pads_c = self.const(n.input[1])
            if pads_c is None:
                raise UnsupportedOpsError([("Pad with computed pads", n.name)])
            pads = pads_c.tolist()
            cval = self.const(n.input[2]) if len(n.input) > 2 else None
            value = 0.0 if cval is None else float(cval)
        self.emit(n, "Pad", [n.input[0]], [n.output[0]], pads=list(pads), value=value)

    def _op_ConstantOfShape(self, n: onnx.NodeProto, a: dict) -> None:
        value = a.get("value")
        fill = 0.0 if value is None else numpy_helper.to_array(value).reshape(-1)[0].item()
        self.emit(n, "Fill", [], [n.output[0]], shape=list(self.t(n.output[0]).shape),
                  value=fill)


def _pads(n: onnx.NodeProto, a: dict, low: _Lowerer, kernel: tuple | list) -> list[int]:
    """Explicit [top, left, bottom, right] pads, resolving ``auto_pad`` from static shapes."""
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", "VALID"):
        return list(a.get("pads", [0, 0, 0, 0])) if auto == "NOTSET" else [0, 0, 0, 0]
    x = low.t(n.input[0]).shape[2:]
    strides = a.get("strides", [1, 1])
    dil = a.get("dilations", [1, 1])
    begin, end = [], []
    for size, k, s, d in zip(x, kernel, strides, dil, strict=True):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


def lower(model: onnx.ModelProto) -> Graph:
    """Lower a prepared ONNX model to a :class:`Graph` of library ops (see module doc)."""
    graph = _Lowerer(model).run()
    unknown = sorted({n.op for n in graph.nodes} - LIBRARY_OPS)
    if unknown:  # a bug in the table above, not in the user's model
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"lowering produced unknown ops {unknown}")
    return graph
