"""The graph IR the model path works on: tensors, nodes lowered onto library op types, weights.

A :class:`Graph` is static: every tensor has a concrete dtype and shape. Its nodes are in a
topological order and each names a library op type (``Conv2D``, ``Add``, ...) with plain
Python attributes. Weights are numpy arrays keyed by tensor name; graph inputs and outputs are
the user's buffers; every other tensor is an intermediate that the MemoryPlanner places.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# aclDataType values (``acl_base_rt.h``) for the numpy dtypes a model may carry.
ACL_DTYPES: dict[str, int] = {
    "float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7,
    "uint32": 8, "int64": 9, "uint64": 10, "float64": 11, "bool": 12,
}
NUMPY_DTYPES: dict[int, str] = {v: k for k, v in ACL_DTYPES.items()}
# aclFormat values (``acl_base_rt.h``) accepted by ``--input_format``.
ACL_FORMATS: dict[str, int] = {"NCHW": 0, "NHWC": 1, "ND": 2, "NCDHW": 30}


@dataclass
class Tensor:
    """One value of the graph: its numpy dtype name, static shape and role."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    kind: str = "intermediate"  # "input" | "output" | "weight" | "intermediate"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class Node:
    """One task of the model: a library op applied to named input tensors."""

    name: str
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # the ONNX node it was lowered from
    tiling: dict[str, int] = field(default_factory=dict)  # the op library's, for these shapes


@dataclass
class Graph:
    """A static, topologically ordered graph of library ops."""

    name: str
    nodes: list[Node]
    tensors: dict[str, Tensor]
    inputs: list[str]
    outputs: list[str]
    weights: dict[str, np.ndarray]

    def intermediates(self) -> list[str]:
        """Names of tensors that live in the workspace (neither user buffers nor weights)."""
        return [t.name for t in self.tensors.values() if t.kind == "intermediate"]

    def op_signatures(self) -> set[tuple]:
        """Distinct (op, input dtypes/shapes, attrs) signatures: what must be compiled once."""
        return {signature(self, n) for n in self.nodes}


def signature(graph: Graph, node: Node) -> tuple:
    """The compile key of ``node``: op type, input and output dtypes/shapes, attributes."""
    def desc(names: list[str]) -> tuple:
        return tuple((graph.tensors[n].dtype, graph.tensors[n].shape) for n in names if n)
    attrs = tuple(sorted((k, _hashable(v)) for k, v in node.attrs.items()))
    return (node.op, desc(node.inputs), desc(node.outputs), attrs)


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value
