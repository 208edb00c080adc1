"""The onnx package's small-model zoo (its backend test data: pytorch-converted,
pytorch-operator and simple, 140 models with shipped inputs and expected outputs), one test
per model, without a device: ATC's front end and lowering, then every task's kernel as the
op library compiles it (``compiler.build``: the same source a card runs), run block by block
over numpy arrays, and the graph outputs compared with the shipped outputs.

The models the op library does not cover are listed in ``REFUSED`` with the reason the
refusal must name; every other model must pass, so the count cannot drop silently.
Tolerances per dtype are in ``TOLERANCE``. The same models run through real workers and
acl.mdl in ``tests/integration/test_models_mdl.py``.
"""

from __future__ import annotations

import glob
import os
import types
import warnings

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from npuemu.host.models import lowering, onnx_front
from npuemu.host.models.codes import UnsupportedOpsError
from npuemu.host.models.graph import Graph
from npuemu.host.ops import compiler, registry
from npuemu.host.ops.registry import Spec

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
MODELS = sorted(glob.glob(os.path.join(DATA, "pytorch-*", "*", "model.onnx")) +
                glob.glob(os.path.join(DATA, "simple", "*", "model.onnx")))
NAMES = [p.split(os.sep)[-2] for p in MODELS]

_STRINGS = "StringNormalizer: string tensors (ACL_STRING) are not emulated"
_TRAINING = "Gradient: a training op (domain ai.onnx.preview.training)"
REFUSED = {
    **{name: _STRINGS for name in NAMES if name.startswith("test_strnorm_model")},
    "test_gradient_of_add": _TRAINING,
    "test_gradient_of_add_and_mul": _TRAINING,
}
"""Models refused by name, with (the start of) the reason their UnsupportedOpsError gives."""

TOLERANCE = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-4), "float64": (1e-9, 1e-12)}
"""(rtol, atol) per output dtype; integer and bool outputs must be equal."""


class BlockCtx:
    """One block of a kernel launch over numpy arrays (a pointer is the array's index)."""

    def __init__(self, arrays: list[np.ndarray], block_idx: int, block_num: int) -> None:
        self.arrays, self.block_idx, self.block_num = arrays, block_idx, block_num

    def split(self, n: int) -> tuple[int, int]:
        return n * self.block_idx // self.block_num, n * (self.block_idx + 1) // self.block_num

    def tensor(self, ptr: int, dtype: str, count: int) -> np.ndarray:
        return self.arrays[ptr].reshape(-1).view(dtype)[:count]

    def view(self, ptr: int, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
        return self.tensor(ptr, dtype, int(np.prod(shape))).reshape(shape)


def run_graph(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Every task of ``g`` in order: its kernel built by the op library, run on all blocks."""
    values = {**g.weights, **{k: np.ascontiguousarray(v) for k, v in feeds.items()}}
    for node in g.nodes:
        op = registry.lookup(node.op)
        ins = [Spec(g.tensors[i].dtype, g.tensors[i].shape) for i in node.inputs if i]
        outs = [Spec(g.tensors[o].dtype, g.tensors[o].shape) for o in node.outputs]
        binary = compiler.build(op, ins, outs, node.attrs)
        module = types.ModuleType(binary.name)
        exec(compile(binary.source, binary.name, "exec"), module.__dict__)
        arrays = [np.array(values[i], copy=True) for i in node.inputs if i]
        arrays += [np.zeros(o.shape, o.dtype) for o in outs]
        blocks = binary.tiling.block_dim
        for b in range(blocks):
            getattr(module, binary.name)(BlockCtx(arrays, b, blocks), *range(len(arrays)))
        values.update(zip(node.outputs, arrays[len(ins):], strict=True))
    return [values[o] for o in g.outputs]


def shipped(path: str) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """test_data_set_0's inputs (graph inputs without an initializer) and outputs."""
    model = onnx.load(path)
    folder = os.path.join(os.path.dirname(path), "test_data_set_0")
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]

    def read(kind: str, k: int) -> np.ndarray:
        return numpy_helper.to_array(onnx.load_tensor(os.path.join(folder, f"{kind}_{k}.pb")))
    return ({n: read("input", k) for k, n in enumerate(names)},
            [read("output", k) for k in range(len(model.graph.output))])


def test_the_zoo_is_the_140_models_and_at_most_10_are_refused() -> None:
    assert len(MODELS) == 140
    assert set(REFUSED) <= set(NAMES) and len(REFUSED) <= 10


@pytest.mark.parametrize("path", MODELS, ids=NAMES)
def test_small_model_matches_its_expected_outputs_or_is_refused_by_name(path: str) -> None:
    name = path.split(os.sep)[-2]
    feeds, want = shipped(path)
    shapes = {k: list(v.shape) for k, v in feeds.items()}
    if name in REFUSED:
        with pytest.raises(UnsupportedOpsError) as info:
            lowering.lower(onnx_front.prepare(path, shapes))
        assert REFUSED[name] in str(info.value)
        return
    g = lowering.lower(onnx_front.prepare(path, shapes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN of Sqrt/Pow in shipped inputs
        got = run_graph(g, feeds)
    assert len(got) == len(want)
    for w, x in zip(want, got, strict=True):
        assert x.dtype == w.dtype and x.size == w.size
        x = x.reshape(w.shape)
        if w.dtype.name in TOLERANCE:
            rtol, atol = TOLERANCE[w.dtype.name]
            np.testing.assert_allclose(x, w, rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(x, w, err_msg=name)
