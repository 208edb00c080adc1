"""Lower a prepared ONNX model (see :mod:`.onnx_front`) onto the op library's op types.

Each ONNX node becomes one or more :class:`~.graph.Node` objects naming a library op type
(``Conv2D``, ``MaxPool``, ``AvgPool``, ``MatMul``, ``SoftmaxV2``, ...) with plain
attributes. A few ONNX ops are rewritten into several library ops: ``Gemm`` (MatMul, then a
scale and the bias Add), ``Sum`` / variadic ``Max`` / ``Min`` (chains of binary ops), ``LRN``
(square, transpose channels last-but-one, AvgPool over the channel window, scale, Pow, Div),
``Softmax`` before opset 13 (Reshape to 2-D around SoftmaxV2). ``Identity`` and inference
``Dropout`` disappear (their output is renamed to their input). Reshape-like ops (Reshape,
Flatten, Squeeze, Unsqueeze) become ``Reshape`` with the inferred static shape.

Attributes follow the op library's conventions (``host/ops``: ``transpose_x1``, Conv2D
``pads`` as ``[top, bottom, left, right]``, pooling ``padding`` VALID/SAME, ``concat_dim``,
``keep_dims``, ...). ONNX pooling with pads or ceil mode takes the library pooling's
``pads`` (our attribute) when the library's rule is ONNX's: MaxPool, or AvgPool without
``count_include_pad``, every window holding an element of the input. Otherwise it becomes
a ``Pad`` (with the dtype's lowest value for MaxPool, zeros for AvgPool) then VALID
pooling, and an AvgPool whose windows are not all full is then multiplied by a
compile-time weight ``kh*kw / count``.
Every lowered node is checked against the library: its op type exists, and the library's
shape inference gives the shapes and dtypes ONNX inferred (else 145000 naming the node).

The N-D and less common ops (Conv3D, ConvTranspose, 3-D and dilated pooling, Slice, Tile,
reflect/edge Pad, unequal Split, Expand to a computed shape, LogSoftmax, InstanceNormalization,
Softplus, Sign, Shrink) are lowered by :mod:`.lowering_ops`.

Every node the table does not cover is collected, and one
:class:`~.codes.UnsupportedOpsError` names them all with their node names; nothing is
written.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from npuemu.host.models import lowering_ops
from npuemu.host.models.codes import ACL_ERROR_GE_PARAM_INVALID, ModelError, UnsupportedOpsError
from npuemu.host.models.graph import ACL_DTYPES, Graph, Node, Tensor
from npuemu.host.ops import compiler, registry, signature
from npuemu.host.ops.registry import Spec
from npuemu.shared.errors import AclError

_SAME = {name: name for name in (
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg", "Relu", "Gelu",
    "Sigmoid", "Tanh", "Erf", "Where", "GlobalAveragePool")}
_VARIADIC: dict[str, str | None] = {"Sum": "Add", "Max": "Maximum", "Min": "Minimum", "Mean": None}
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
                missing.append((lowering_ops.refusal(node), node.name or node.output[0]))
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
        own = getattr(self, f"_op_{node.op_type}", None)
        extra = lowering_ops.HANDLERS.get(node.op_type)
        return own if own is not None or extra is None else functools.partial(extra, self)

    def finish(self) -> Graph:
        g = self.model.graph
        outputs = [self.name(o.name) for o in g.output]
        if len(set(outputs)) != len(outputs):
            raise UnsupportedOpsError([("two graph outputs of one value", g.name or "graph")])
        for k, out in enumerate(outputs):
            if self.tensors[out].kind == "weight" or (self.tensors[out].kind == "input"
                                                      and out != g.output[k].name):
                outputs[k] = self._copied_output(g.output[k].name, out)
                continue
            if self.tensors[out].kind != "intermediate":
                raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                                 f"output {out!r} is a {self.tensors[out].kind}, not computed")
            self.tensors[out].kind = "output"
        used = {i for n in self.nodes for i in n.inputs} | {o for n in self.nodes
                                                             for o in n.outputs}
        used |= {i.name for i in g.input}  # an input no task reads is still an input
        tensors = {k: v for k, v in self.tensors.items() if k in used}
        weights = {k: v for k, v in self.weights.items() if k in used}
        return Graph(g.name or "model", self.nodes, tensors, [i.name for i in g.input],
                     outputs, weights)

    def _copied_output(self, name: str, value: str) -> str:
        """Graph output ``name`` whose value is a constant or a graph input (``value``, e.g.
        a folded SequenceLength, an Identity of an input): an Identity task copies it."""
        src = value
        if name == value:  # a weight under the output's name: it moves to a new name
            src = self.new_weight(name, self.weights.pop(name))
        t = self.tensors[src]
        self.tensors[name] = Tensor(name, t.dtype, t.shape, "output")
        self.nodes.append(Node(name, "Identity", [src], [name], {}, "Identity"))
        return name

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
        assert op is not None  # lower() routes here only the ops with a binary form
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
        dtype = self.t(n.output[0]).dtype
        if dtype not in ACL_DTYPES:
            raise UnsupportedOpsError([(f"Cast to {dtype}", n.name)])
        self.emit(n, "Cast", [n.input[0]], [n.output[0]], dst_type=ACL_DTYPES[dtype])

    def _op_Conv(self, n: onnx.NodeProto, a: dict) -> None:
        w = self.t(n.input[1])
        if len(w.shape) == 3:
            self._via_2d(n, a, self._op_Conv, weights=True)
            return
        if len(w.shape) == 5:
            lowering_ops.conv3d(self, n, a)
            return
        if len(w.shape) != 4:
            raise UnsupportedOpsError([(f"Conv{len(w.shape) - 2}D", n.name)])
        t, left, b, r = _pads(n, a, self, w.shape[2:])
        self.emit(n, "Conv2D", list(n.input), [n.output[0]],
                  strides=[1, 1, *a.get("strides", [1, 1])], pads=[t, b, left, r],
                  dilations=[1, 1, *a.get("dilations", [1, 1])], groups=a.get("group", 1),
                  data_format="NCHW")

    def _pool(self, n: onnx.NodeProto, a: dict, op: str) -> None:
        """ONNX pooling as (Pad) + VALID library pooling (+ a count correction for Avg)."""
        ks = list(a["kernel_shape"])
        x = self.t(n.input[0])
        if len(ks) == 3 or any(d != 1 for d in a.get("dilations", [1, 1])):
            lowering_ops.pool_nd(self, n, a, op + "3D")
            return
        if len(ks) != 2 or len(x.shape) != 4:
            raise UnsupportedOpsError([(f"{n.op_type}{len(ks)}D", n.name)])
        strides = list(a.get("strides", [1, 1]))
        t, left, b, r = _pads(n, a, self, ks)
        out_hw = self.t(n.output[0]).shape[2:]
        # extra end padding so VALID pooling yields ONNX's output size (ceil mode)
        b += max(0, (out_hw[0] - 1) * strides[0] + ks[0] - (x.shape[2] + t + b))
        r += max(0, (out_hw[1] - 1) * strides[1] + ks[1] - (x.shape[3] + left + r))
        src, out = n.input[0], n.output[0]
        hw = x.shape[2:]
        if (t or b or left or r) and (op == "MaxPool" or not a.get("count_include_pad", 0)) \
                and t < ks[0] and left < ks[1] and (out_hw[0] - 1) * strides[0] - t < hw[0] \
                and (out_hw[1] - 1) * strides[1] - left < hw[1]:
            # the pads inside the pooling: pads never win a max and are not averaged
            self.emit(n, op, [src], [out], ksize=[1, 1, *ks], strides=[1, 1, *strides],
                      padding="VALID", data_format="NCHW", pads=[t, b, left, r])
            return
        if t or b or left or r:
            fill = float(np.finfo(np.dtype(x.dtype)).min) if op == "MaxPool" else 0.0
            src = self._pad(n, src, [[0, 0], [0, 0], [t, b], [left, r]], fill)
        scale = None
        if op == "AvgPool":
            scale = _avg_scale(x.shape[2:], ks, strides, (t, left), out_hw,
                               a.get("count_include_pad", 0), a.get("pads", [0, 0, 0, 0]))
        pooled = self.new_tensor(out, self.t(out).shape) if scale is not None else out
        self.emit(n, op, [src], [pooled], ksize=[1, 1, *ks], strides=[1, 1, *strides],
                  padding="VALID", data_format="NCHW")
        if scale is not None:
            self.emit(n, "Mul", [pooled, self.new_weight(out, scale.astype(x.dtype))], [out])

    def _pad(self, n: onnx.NodeProto, src: str, pads: list[list[int]], fill: float) -> str:
        shape = tuple(d + lo + hi for d, (lo, hi) in zip(self.t(src).shape, pads, strict=True))
        out = self.new_tensor(n.output[0], shape, self.t(src).dtype)
        self.emit(n, "Pad", [src], [out], paddings=pads, constant_values=fill)
        return out

    def _op_MaxPool(self, n: onnx.NodeProto, a: dict) -> None:
        if len(n.output) > 1 and n.output[1]:
            raise UnsupportedOpsError([("MaxPool with Indices", n.name)])
        if len(self.t(n.input[0]).shape) == 3:
            self._via_2d(n, a, self._op_MaxPool)
            return
        self._pool(n, a, "MaxPool")

    def _op_AveragePool(self, n: onnx.NodeProto, a: dict) -> None:
        if len(self.t(n.input[0]).shape) == 3:
            self._via_2d(n, a, self._op_AveragePool)
            return
        self._pool(n, a, "AvgPool")

    def _via_2d(self, n: onnx.NodeProto, a: dict, handler: Callable, weights: bool = False,
                ) -> None:
        """A 1-D conv or pool as the 2-D one over (L, 1): inputs (and a conv's filter) get a
        trailing unit dim, the window attributes a unit second entry."""
        x, out = n.input[0], n.output[0]
        x4 = self._reshaped(n, x, (*self.t(x).shape, 1))
        ins = [x4]
        if weights:
            ins.append(self._reshaped(n, n.input[1], (*self.t(n.input[1]).shape, 1)))
            ins += list(n.input[2:])
        y4 = self.new_tensor(out, (*self.t(out).shape, 1))
        attrs = dict(a)
        for key in ("kernel_shape", "strides", "dilations"):
            if key in attrs:
                attrs[key] = [*attrs[key], 1]
        if "pads" in attrs:
            attrs["pads"] = [attrs["pads"][0], 0, attrs["pads"][1], 0]
        fake = helper.make_node(n.op_type, ins, [y4], name=n.name or out)
        handler(fake, attrs)
        self.emit(n, "Reshape", [y4], [out], shape=list(self.t(out).shape))

    def _reshaped(self, n: onnx.NodeProto, name: str, shape: tuple) -> str:
        """``name`` with ``shape``: a reshaped weight, else a Reshape task."""
        value = self.const(name)
        if value is not None:
            return self.new_weight(name, value.reshape(shape))
        out = self.new_tensor(name, shape)
        self.emit(n, "Reshape", [name], [out], shape=list(shape))
        return out

    def _op_LeakyRelu(self, n: onnx.NodeProto, a: dict) -> None:
        """max(x, alpha*x) for 0 <= alpha <= 1."""
        alpha = a.get("alpha", 0.01)
        if not 0 <= alpha <= 1:
            raise UnsupportedOpsError([(f"LeakyRelu with alpha {alpha}", n.name)])
        x, out = n.input[0], n.output[0]
        scaled = self.new_tensor(out, self.t(x).shape)
        k = self.new_weight(out, np.array(alpha, self.t(x).dtype))
        self.emit(n, "Mul", [x, k], [scaled])
        self.emit(n, "Maximum", [x, scaled], [out])

    def _op_PRelu(self, n: onnx.NodeProto, a: dict) -> None:
        """relu(x) - slope * relu(-x); a (C,) slope of old exporters applies per channel."""
        x, slope, out = n.input[0], n.input[1], n.output[0]
        shape, sshape = self.t(x).shape, self.t(slope).shape
        try:
            np.broadcast_shapes(shape, sshape)
        except ValueError:
            if len(sshape) != 1 or len(shape) < 2 or sshape[0] != shape[1]:
                raise UnsupportedOpsError([("PRelu slope that does not broadcast", n.name)]) \
                    from None
            slope = self._reshaped(n, slope, (sshape[0], *(1,) * (len(shape) - 2)))
        pos, neg, nrelu, scaled = (self.new_tensor(out, shape) for _ in range(4))
        self.emit(n, "Relu", [x], [pos])
        self.emit(n, "Neg", [x], [neg])
        self.emit(n, "Relu", [neg], [nrelu])
        self.emit(n, "Mul", [nrelu, slope], [scaled])
        self.emit(n, "Sub", [pos, scaled], [out])

    def _op_Clip(self, n: onnx.NodeProto, a: dict) -> None:
        """Maximum with the lower bound, then Minimum with the upper one (constants)."""
        x, out = n.input[0], n.output[0]
        dtype = np.dtype(self.t(x).dtype)
        bounds = [a.get("min"), a.get("max")]
        for k, name in enumerate(n.input[1:3]):
            if name:
                value = self.const(name)
                if value is None:
                    raise UnsupportedOpsError([("Clip with computed bounds", n.name)])
                bounds[k] = value.item()
        cur = x
        steps = [(op, b) for op, b in (("Maximum", bounds[0]), ("Minimum", bounds[1]))
                 if b is not None]
        if not steps:
            self.alias[out] = self.name(x)
            return
        for k, (op, bound) in enumerate(steps):
            nxt = out if k == len(steps) - 1 else self.new_tensor(out, self.t(x).shape)
            self.emit(n, op, [cur, self.new_weight(out, np.array(bound, dtype))], [nxt])
            cur = nxt

    def _op_Expand(self, n: onnx.NodeProto, a: dict) -> None:
        """Broadcast by adding zeros of the output's shape (the shape input must be const)."""
        if self.const(n.input[1]) is None:
            lowering_ops.expand(self, n, a)
            return
        out = n.output[0]
        t = self.t(out)
        zeros = self.new_weight(out, np.zeros(t.shape, t.dtype))
        self.emit(n, "Add", [n.input[0], zeros], [out])

    def _op_Elu(self, n: onnx.NodeProto, a: dict, gamma: float = 1.0) -> None:
        """relu(x) + min(alpha * (exp(x) - 1), 0), times gamma for Selu (alpha > 0)."""
        alpha = a.get("alpha", 1.0 if n.op_type == "Elu" else 1.67326319217681884765625)
        if alpha <= 0:
            raise UnsupportedOpsError([(f"{n.op_type} with alpha {alpha}", n.name)])
        x, out = n.input[0], n.output[0]
        shape, dtype = self.t(x).shape, np.dtype(self.t(x).dtype)
        pos, ex, em1, scaled, neg = (self.new_tensor(out, shape) for _ in range(5))
        self.emit(n, "Relu", [x], [pos])
        self.emit(n, "Exp", [x], [ex])
        self.emit(n, "Sub", [ex, self.new_weight(out, np.array(1.0, dtype))], [em1])
        self.emit(n, "Mul", [em1, self.new_weight(out, np.array(alpha, dtype))], [scaled])
        self.emit(n, "Minimum", [scaled, self.new_weight(out, np.array(0.0, dtype))], [neg])
        if gamma == 1.0:
            self.emit(n, "Add", [pos, neg], [out])
            return
        total = self.new_tensor(out, shape)
        self.emit(n, "Add", [pos, neg], [total])
        self.emit(n, "Mul", [total, self.new_weight(out, np.array(gamma, dtype))], [out])

    def _op_Selu(self, n: onnx.NodeProto, a: dict) -> None:
        self._op_Elu(n, a, gamma=a.get("gamma", 1.05070102214813232421875))

    def _op_BatchNormalization(self, n: onnx.NodeProto, a: dict) -> None:
        shape = self.t(n.input[0]).shape
        if len(shape) in (2, 3):  # (N, C[, L]) as (N, C, L, 1)
            x4 = self._reshaped(n, n.input[0], (*shape, *(1,) * (4 - len(shape))))
            y4 = self.new_tensor(n.output[0], self.t(x4).shape)
            self.emit(n, "BatchNorm", [x4, *n.input[1:5]], [y4],
                      epsilon=a.get("epsilon", 1e-5), data_format="NCHW")
            self.emit(n, "Reshape", [y4], [n.output[0]], shape=list(shape))
            return
        if len(shape) == 5:
            lowering_ops.batch_norm_3d(self, n, a)
            return
        if len(shape) != 4:
            raise UnsupportedOpsError([(f"BatchNormalization on a {len(shape)}-D tensor",
                                        n.name)])
        self.emit(n, "BatchNorm", list(n.input[:5]), [n.output[0]],
                  epsilon=a.get("epsilon", 1e-5), data_format="NCHW")

    def _op_LayerNormalization(self, n: onnx.NodeProto, a: dict) -> None:
        if len(n.input) != 3 or not n.input[2] or (len(n.output) > 1 and any(n.output[1:])):
            raise UnsupportedOpsError([("LayerNormalization without bias or with stats",
                                        n.name)])
        axis = a.get("axis", -1) % len(self.t(n.input[0]).shape)
        self.emit(n, "LayerNorm", list(n.input), [n.output[0]], begin_norm_axis=axis,
                  begin_params_axis=axis, epsilon=a.get("epsilon", 1e-5))

    def _op_MatMul(self, n: onnx.NodeProto, a: dict) -> None:
        ra, rb = len(self.t(n.input[0]).shape), len(self.t(n.input[1]).shape)
        if ra == rb == 2:
            self.emit(n, "MatMul", list(n.input), [n.output[0]])
        elif ra >= 2 and rb >= 2:
            self.emit(n, "BatchMatMul", list(n.input), [n.output[0]])
        else:
            raise UnsupportedOpsError([("MatMul of a 1-D tensor", n.name)])

    def _op_Gemm(self, n: onnx.NodeProto, a: dict) -> None:
        """MatMul with transposes and the bias input; alpha folds into a constant B (else a
        Mul), beta into a constant C."""
        alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
        out = n.output[0]
        y = self.t(out)
        b = n.input[1]
        bval = self.const(b)
        if alpha != 1.0 and bval is not None:
            b, alpha = self.new_weight(out, (bval * alpha).astype(bval.dtype)), 1.0
        ins = [n.input[0], b]
        c = n.input[2] if len(n.input) > 2 and n.input[2] else ""
        late_c = ""
        if c:
            cval = self.const(c)
            if cval is not None and (beta != 1.0 or alpha != 1.0 or cval.ndim > 1):
                scaled = (cval * beta).astype(cval.dtype)
                if scaled.size == y.shape[1] and (scaled.ndim == 1 or scaled.shape[0] == 1):
                    c = self.new_weight(out, scaled.reshape(-1))
                else:
                    late_c, c = self.new_weight(out, scaled), ""
            elif cval is None and beta == 1.0 and self.t(c).shape == y.shape:
                late_c, c = c, ""  # a computed C of the output's shape: a late Add
            elif cval is None and (beta != 1.0 or self.t(c).shape not in ((y.shape[1],),)):
                raise UnsupportedOpsError([("Gemm with a computed, broadcast C", n.name)])
            if c and alpha == 1.0:
                ins.append(c)
                c = ""
        mm = out if (alpha == 1.0 and not c and not late_c) else self.new_tensor(out, y.shape)
        self.emit(n, "MatMul", ins, [mm], transpose_x1=bool(a.get("transA", 0)),
                  transpose_x2=bool(a.get("transB", 0)))
        if alpha != 1.0:
            nxt = out if not (c or late_c) else self.new_tensor(out, y.shape)
            self.emit(n, "Mul", [mm, self.new_weight(out, np.array(alpha, y.dtype))], [nxt])
            mm = nxt
        if c or late_c:
            self.emit(n, "Add", [mm, c or late_c], [out])

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
        """y = x / (bias + alpha/size * sum of x^2 over the channel window)^beta (ONNX LRN):
        the window sum is an AvgPool over channels (moved to the H position) of the
        zero-padded square, times ``size``."""
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
        padded = self._pad(n, tr, [[0, 0], [0, 0], [lo, hi], [0, 0]], 0.0)
        avg = self.new_tensor(out, (nn, h, c, w))
        self.emit(n, "AvgPool", [padded], [avg], ksize=[1, 1, size, 1], strides=[1, 1, 1, 1],
                  padding="VALID", data_format="NCHW")
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
        self.emit(n, "Concat", list(n.input), [n.output[0]], concat_dim=a["axis"])

    def _op_Split(self, n: onnx.NodeProto, a: dict) -> None:
        axis = a.get("axis", 0)
        sizes = {self.t(o).shape[axis] for o in n.output}
        if len(sizes) != 1:
            lowering_ops.split_v(self, n, a)
            return
        self.emit(n, "Split", [n.input[0]], list(n.output), split_dim=axis,
                  num_split=len(n.output))

    def _op_Gather(self, n: onnx.NodeProto, a: dict) -> None:
        idx = self.const(n.input[1])
        if idx is not None and (idx < 0).any():  # negative indices: made positive here
            dim = self.t(n.input[0]).shape[a.get("axis", 0)]
            fixed = self.new_weight(n.output[0], np.where(idx < 0, idx + dim, idx))
            self.emit(n, "Gather", [n.input[0], fixed], [n.output[0]], axis=a.get("axis", 0))
            return
        self.emit(n, "Gather", list(n.input), [n.output[0]], axis=a.get("axis", 0))

    def _reduce(self, n: onnx.NodeProto, a: dict) -> None:
        axes = a.get("axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            value = self.const(n.input[1])
            if value is None:
                raise UnsupportedOpsError([(f"{n.op_type} with computed axes", n.name)])
            axes = value.tolist()
        rank = len(self.t(n.input[0]).shape)
        if not axes and a.get("noop_with_empty_axes", 0):
            self.alias[n.output[0]] = self.name(n.input[0])
            return
        axes = list(range(rank)) if not axes else [x % rank for x in axes]
        self.emit(n, n.op_type, [n.input[0]], [n.output[0]], axes=axes,
                  keep_dims=bool(a.get("keepdims", 1)))

    _op_ReduceSum = _op_ReduceMean = _op_ReduceMax = _reduce

    def _op_Pad(self, n: onnx.NodeProto, a: dict) -> None:
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode not in ("constant", "reflect", "edge"):
            raise UnsupportedOpsError([(f"Pad mode {mode}", n.name)])
        pads = a.get("pads")
        value = a.get("value", 0.0)
        if pads is None:
            pads_c = self.const(n.input[1])
            if pads_c is None or (len(n.input) > 3 and n.input[3]):
                raise UnsupportedOpsError([("Pad with computed pads or axes", n.name)])
            pads = pads_c.tolist()
            cval = self.const(n.input[2]) if len(n.input) > 2 and n.input[2] else None
            value = 0.0 if cval is None else cval.item()
        rank = len(pads) // 2
        if min(pads) < 0:
            raise UnsupportedOpsError([("Pad with negative pads", n.name)])
        if mode != "constant":
            lowering_ops.pad_v3(self, n, a, mode, pads)
            return
        pairs = [[int(pads[i]), int(pads[i + rank])] for i in range(rank)]
        self.emit(n, "Pad", [n.input[0]], [n.output[0]], paddings=pairs,
                  constant_values=value)


def _pads(n: onnx.NodeProto, a: dict, low: _Lowerer, kernel: tuple | list) -> list[int]:
    """Explicit ONNX-order pads [top, left, bottom, right], resolving ``auto_pad``."""
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


def _avg_scale(hw: tuple, ks: list[int], strides: list[int], begin: tuple[int, int],
               out_hw: tuple, include_pad: int, pads: list[int]) -> np.ndarray | None:
    """``kh*kw / count`` per output position, or None when every window is full.

    ``count`` is what ONNX divides by: the window's elements inside the input (pads
    excluded) or inside input plus explicit pads (``count_include_pad``)."""
    counts = []
    for axis in range(2):
        lo = -begin[axis]
        hi = hw[axis] + (pads[axis + 2] + pads[axis] - begin[axis] if include_pad else 0)
        lo_edge = lo if include_pad else 0
        starts = lo + np.arange(out_hw[axis]) * strides[axis]
        ends = starts + ks[axis]
        counts.append(np.minimum(ends, hi) - np.maximum(starts, lo_edge))
    count = np.outer(counts[0], counts[1]).astype(np.float64)
    full = ks[0] * ks[1]
    if (count == full).all():
        return None
    return (full / count).reshape(1, 1, *out_hw)


def lower(model: onnx.ModelProto) -> Graph:
    """Lower a prepared ONNX model to a :class:`Graph` of library ops (see module doc)."""
    graph = _Lowerer(model).run()
    for node in graph.nodes:
        node.tiling = check_node(graph, node)
    return graph


def check_node(graph: Graph, node: Node) -> dict:
    """The library's view of ``node``: full attributes (defaults filled in, stored back in
    ``node.attrs``) and the tiling; 145000 if the library refuses or infers other shapes."""
    try:
        op = registry.lookup(node.op)
        attrs = registry.attrs_of(op, node.attrs)
        ins = [_spec(graph.tensors[i]) for i in node.inputs if i]
        outs = signature.outputs(op, ins, [], attrs)
        tiling = compiler.retile(op, ins, outs, attrs)
    except AclError as exc:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                         f"node {node.name!r} ({node.op} from {node.source}): the op library "
                         f"refuses it: {exc}") from exc
    want = [(graph.tensors[o].dtype, graph.tensors[o].shape) for o in node.outputs]
    got = [(s.dtype, tuple(s.shape)) for s in outs]
    if want != got:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                         f"node {node.name!r} ({node.op} from {node.source}): the op library "
                         f"infers {got}, ONNX {want}")
    node.attrs = attrs
    return dict(vars(tiling))


def _spec(t: Tensor) -> Spec:
    return Spec(t.dtype, tuple(t.shape))
