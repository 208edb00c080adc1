"""ATC's weight-folding graph passes: per-channel affine ops merged into the Conv / MatMul
before them.

On a lowered :class:`~.graph.Graph` (library op types), a ``Conv2D`` (NCHW, constant filter)
or a ``MatMul`` (constant ``x2``) whose output feeds exactly one task, is not a graph output,
and that task is

* ``BatchNorm`` (inference, all four statistics constant): the filter is scaled by
  ``scale / sqrt(variance + epsilon)`` per output channel and the bias becomes
  ``(bias - mean) * that + offset``;
* ``Mul`` by a constant that is one value per output channel (or one value): filter and bias
  scaled;
* ``Add`` / ``Sub`` of such a constant: added to (subtracted from) the bias;

absorbs that task: the Conv / MatMul gets the folded filter and a bias input and writes the
absorbed task's output. Chains fold one after another (Conv -> BatchNorm -> Mul -> Add is one
Conv). A ``Relu`` that is the sole reader of such a Conv2D's output (after its chain, if any)
is fused into it (``fused_relu``: the kernel applies ``max(., 0)`` to its output in place, so
the Relu's task and its pass over memory are gone); nothing folds after it. A Relu that is
the sole reader of an ``Add`` (a residual sum) or of a ``Concat`` (ShuffleNet's downsampling
units) is fused into it the same way. The arithmetic
is done in float64 and stored in the filter's dtype, so the folded model equals the unfused
one within the dtype's rounding. The Conv's ``MatMul``-from-``Gemm`` twin is the same:
``Gemm`` lowers to ``MatMul`` (+ ``Mul`` alpha, + ``Add`` C), which folds to one ``MatMul``
with a bias.

ShuffleNet's channel shuffle after a grouped Conv2D (``g`` groups, not depthwise, float
NCHW; after its folded chain and fused Relu): a Reshape to ``(N, g, C/g, H, W)``, a Transpose
``(0, 2, 1, 3, 4)`` and a Reshape back to ``(N, C, H, W)``, each the sole reader of the one
before, are fused into the Conv2D (``shuffle`` = g, our attribute: its GEMM writes each
group's channels through a strided view of the output, ``shared/conv.py``), so the three
tasks and the Transpose's pass over memory are gone. A pure permutation: the values are
the unfused ones exactly.

A ``BatchNorm`` that follows anything but a Conv (DenseNet's, after a Concat) is itself a
producer: with constant statistics it is ``x * a + b`` per channel, so the per-channel
``Mul`` / ``Add`` / ``Sub`` / ``BatchNorm`` after it fold into its ``a`` and ``b`` the same
way, and the Relu after the chain is fused into it (``fused_relu``). The folded BatchNorm
holds ``a`` as its scale, ``b`` as its offset, mean 0, variance 1 and epsilon 0, so its
kernel computes exactly ``x * a + b``.

Not done here: a Relu after a MatMul stays its own task; a Conv / MatMul / BatchNorm whose
output has several readers keeps them.

The passes are on by default; ``NPUEMU_ATC_FOLD=off`` (or ``0``/``no``/``false``) in the
environment, or ``fold=False`` given to ``atc.convert``, keeps every op as lowered (the
unfused path, for comparison and tests).
"""

from __future__ import annotations

import os

import numpy as np

from npuemu.host.models.graph import Graph, Node, Tensor

ENV = "NPUEMU_ATC_FOLD"
_OFF = ("off", "0", "no", "false")


def enabled(flag: bool | None = None) -> bool:
    """Whether the passes run: ``flag`` if given, else the environment (default on)."""
    if flag is not None:
        return bool(flag)
    return os.environ.get(ENV, "on").strip().lower() not in _OFF


def apply(graph: Graph) -> int:
    """Fold every foldable task of ``graph`` in place (see module doc); returns how many
    tasks were absorbed. Folded nodes are checked against the op library again."""
    from npuemu.host.models.lowering import check_node  # lowering imports the op library

    readers = _readers(graph)
    absorbed: set[int] = set()
    changed: list[Node] = []
    for node in graph.nodes:
        if id(node) in absorbed or not _producer(graph, node):
            continue
        folded = False
        while (nxt := _sole_reader(graph, readers, node)) is not None and _absorb(graph, node,
                                                                                   nxt):
            absorbed.add(id(nxt))
            folded = True
        if node.op in ("Conv2D", "BatchNorm") and _fuse_relu(graph, readers, node, absorbed):
            folded = True
        if node.op == "Conv2D" and _fuse_shuffle(graph, readers, node, absorbed):
            folded = True
        if folded:
            changed.append(node)
    for node in graph.nodes:
        if node.op in ("Add", "Concat") and id(node) not in absorbed and \
                _fuse_relu(graph, readers, node, absorbed):
            changed.append(node)
    if not absorbed:
        return 0
    graph.nodes = [n for n in graph.nodes if id(n) not in absorbed]
    _drop_unused(graph)
    for node in changed:
        node.tiling = check_node(graph, node)
    return len(absorbed)


def _fuse_relu(graph: Graph, readers: dict[str, list[Node]], node: Node,
               absorbed: set[int]) -> bool:
    """Fuse the Relu that is the sole reader of ``node``'s output into it (``fused_relu``);
    True if there was one."""
    nxt = _sole_reader(graph, readers, node)
    if nxt is None or nxt.op != "Relu" or nxt.inputs != [node.outputs[0]]:
        return False
    node.attrs["fused_relu"] = True
    node.outputs = list(nxt.outputs)
    absorbed.add(id(nxt))
    return True


def _fuse_shuffle(graph: Graph, readers: dict[str, list[Node]], node: Node,
                  absorbed: set[int]) -> bool:
    """Fuse the channel shuffle (Reshape to ``(N, g, C/g, H, W)``, Transpose ``(0, 2, 1, 3,
    4)``, Reshape back to ``(N, C, H, W)``, each the sole reader of the one before) that
    follows a Conv2D of ``g`` groups into it (``shuffle`` = g); True if there was one."""
    groups = int(node.attrs.get("groups", 1))
    weight = graph.tensors[node.inputs[1]].shape if len(node.inputs) > 1 else ()
    y = graph.tensors[node.outputs[0]]
    if (groups < 2 or node.attrs.get("shuffle") or len(y.shape) != 4 or len(weight) != 4
            or weight[1] == 1 or y.dtype not in ("float16", "float32", "float64")):
        return False  # not grouped, already shuffled, depthwise, or not a float NCHW output
    n, c, h, w = y.shape
    chain, src = [], node
    for op, shape in (("Reshape", (n, groups, c // groups, h, w)), ("Transpose", None),
                      ("Reshape", y.shape)):
        nxt = _sole_reader(graph, readers, src)
        if nxt is None or nxt.op != op or nxt.inputs[:1] != [src.outputs[0]]:
            return False
        out = graph.tensors[nxt.outputs[0]]
        if shape is None:
            if list(nxt.attrs.get("perm") or ()) != [0, 2, 1, 3, 4]:
                return False
        elif tuple(out.shape) != shape or out.dtype != y.dtype:
            return False
        chain.append(nxt)
        src = nxt
    node.attrs["shuffle"] = groups
    node.outputs = list(chain[-1].outputs)
    absorbed.update(id(step) for step in chain)
    return True


def _readers(graph: Graph) -> dict[str, list[Node]]:
    out: dict[str, list[Node]] = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name:
                out.setdefault(name, []).append(node)
    return out


def _producer(graph: Graph, node: Node) -> bool:
    """A Conv2D (NCHW) or MatMul whose filter / ``x2`` and bias (if any) are float weights,
    or an inference BatchNorm (NCHW, 4-D) whose four statistics are float weights."""
    if node.op in ("Conv2D", "BatchNorm") and node.attrs.get("data_format") not in (None,
                                                                                   "NCHW"):
        return False
    if node.op == "BatchNorm" and (node.attrs.get("is_training") or len(node.inputs) != 5
                                   or len(graph.tensors[node.inputs[0]].shape) != 4):
        return False
    if node.op not in ("Conv2D", "MatMul", "BatchNorm"):
        return False
    consts = [n for n in node.inputs[1:] if n]
    return all(n in graph.weights and graph.weights[n].dtype.kind == "f" for n in consts)


def _sole_reader(graph: Graph, readers: dict[str, list[Node]], node: Node) -> Node | None:
    out = node.outputs[0]
    if graph.tensors[out].kind != "intermediate" or len(readers.get(out, [])) != 1:
        return None
    return readers[out][0]


def _absorb(graph: Graph, prod: Node, nxt: Node) -> bool:
    """Merge ``nxt`` into ``prod`` if it is a foldable affine op; True if it was."""
    y = graph.tensors[prod.outputs[0]]
    if graph.tensors[nxt.outputs[0]].shape != y.shape:
        return False  # the op broadcasts the result to a bigger shape
    channels = y.shape[-1] if prod.op == "MatMul" else y.shape[1]
    affine = _affine(graph, nxt, prod.outputs[0], channels)
    if affine is None:
        return False
    scale, shift = affine
    if prod.op == "BatchNorm":
        a, b = _affine(graph, prod, prod.inputs[0], channels)  # type: ignore[misc]
        _store_affine(graph, prod, a * scale, b * scale + shift)
        prod.outputs = list(nxt.outputs)
        return True
    weight, bias = _current(graph, prod, channels)
    if prod.op == "Conv2D":
        weight = weight * scale.reshape(-1, 1, 1, 1)
    elif prod.attrs.get("transpose_x2"):
        weight = weight * scale.reshape(-1, 1)  # x2 is (N, K)
    else:
        weight = weight * scale.reshape(1, -1)  # x2 is (K, N)
    _store(graph, prod, weight, bias * scale + shift)
    prod.outputs = list(nxt.outputs)
    return True


def _affine(graph: Graph, node: Node, src: str, channels: int
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """``node`` as ``y = x * scale + shift`` per channel (float64), or None if it is not."""
    if node.op == "BatchNorm" and node.inputs[0] == src:
        if node.attrs.get("is_training") or node.attrs.get("data_format") not in (None, "NCHW"):
            return None
        stats = [graph.weights.get(n) for n in node.inputs[1:5]]
        if any(s is None or s.size != channels for s in stats):
            return None
        gamma, beta, mean, var = (np.asarray(s, np.float64).reshape(-1) for s in stats)
        scale = gamma / np.sqrt(var + float(node.attrs.get("epsilon", 1e-4)))
        return scale, beta - mean * scale
    if node.op not in ("Mul", "Add", "Sub") or len(node.inputs) != 2 or src not in node.inputs:
        return None
    other = node.inputs[1] if node.inputs[0] == src else node.inputs[0]
    if other == src or other not in graph.weights:
        return None
    if node.op == "Sub" and node.inputs[0] != src:
        return None  # c - x is not a shift of x
    per = _per_channel(graph.weights[other], graph.tensors[src], channels)
    if per is None:
        return None
    ones, zeros = np.ones(channels), np.zeros(channels)
    return {"Mul": (per, zeros), "Add": (ones, per), "Sub": (ones, -per)}[node.op]


def _per_channel(value: np.ndarray, x: Tensor, channels: int) -> np.ndarray | None:
    """``value`` as one float64 per channel of ``x`` if broadcasting it onto ``x`` gives one
    value per channel (channel axis 1 of 4-D Conv output, last axis of MatMul output)."""
    if value.ndim > len(x.shape) or value.dtype.kind != "f":
        return None
    shape = (1,) * (len(x.shape) - value.ndim) + value.shape
    axis = 1 if len(x.shape) == 4 else len(x.shape) - 1
    if any(d != 1 for i, d in enumerate(shape) if i != axis):
        return None
    flat = np.asarray(value, np.float64).reshape(-1)
    return np.broadcast_to(flat, (channels,)).copy() if flat.size in (1, channels) else None


def _current(graph: Graph, prod: Node, channels: int) -> tuple[np.ndarray, np.ndarray]:
    weight = np.asarray(graph.weights[prod.inputs[1]], np.float64)
    bias_name = prod.inputs[2] if len(prod.inputs) > 2 else ""
    bias = np.zeros(channels) if not bias_name else \
        np.broadcast_to(np.asarray(graph.weights[bias_name], np.float64).reshape(-1),
                        (channels,)).copy()
    return weight, bias


def _store(graph: Graph, prod: Node, weight: np.ndarray, bias: np.ndarray) -> None:
    dtype = graph.weights[prod.inputs[1]].dtype
    w_name, b_name = f"{prod.name}::folded_filter", f"{prod.name}::folded_bias"
    for name, value in ((w_name, weight.astype(dtype)), (b_name, bias.astype(dtype))):
        graph.weights[name] = value
        graph.tensors[name] = Tensor(name, value.dtype.name, value.shape, "weight")
    prod.inputs = [prod.inputs[0], w_name, b_name]


def _store_affine(graph: Graph, prod: Node, scale: np.ndarray, shift: np.ndarray) -> None:
    """Make the BatchNorm ``prod`` compute ``x * scale + shift``: those as its scale and
    offset, mean 0, variance 1, epsilon 0 (the kernel's factor is then exactly ``scale``)."""
    dtype = graph.weights[prod.inputs[1]].dtype
    values = (scale, shift, np.zeros_like(scale), np.ones_like(scale))
    names = [f"{prod.name}::folded_{k}" for k in ("scale", "offset", "mean", "variance")]
    for name, value in zip(names, values, strict=True):
        graph.weights[name] = value.astype(dtype)
        graph.tensors[name] = Tensor(name, np.dtype(dtype).name, value.shape, "weight")
    prod.inputs = [prod.inputs[0], *names]
    prod.attrs["epsilon"] = 0.0


def _drop_unused(graph: Graph) -> None:
    used = {i for n in graph.nodes for i in n.inputs} | {o for n in graph.nodes
                                                         for o in n.outputs}
    used |= set(graph.inputs) | set(graph.outputs)
    graph.tensors = {k: v for k, v in graph.tensors.items() if k in used}
    graph.weights = {k: v for k, v in graph.weights.items() if k in used}
