"""Op workspaces (``OpDef.workspace``): Conv2D declares one image's im2col matrix, its kernel
works in the scratch it is given (``pw``) and allocates it itself when given none (a
single-op launch); the model runtime passes each task its planned block."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from npuemu.host.ops import compiler, registry, signature
from npuemu.host.ops.registry import Spec


class FakeContext:
    """What a kernel sees of its launch, over host buffers keyed by fake pointers."""

    def __init__(self, buffers: dict[int, np.ndarray], block_idx: int = 0,
                 block_num: int = 1) -> None:
        self.buffers, self.block_idx, self.block_num = buffers, block_idx, block_num
        self.touched: list[int] = []

    def split(self, n: int) -> tuple[int, int]:
        return n * self.block_idx // self.block_num, n * (self.block_idx + 1) // self.block_num

    def tensor(self, ptr: int, dtype: str, count: int) -> np.ndarray:
        self.touched.append(ptr)
        raw = self.buffers[ptr]
        view = raw.view(np.uint8)[: count * np.dtype(dtype).itemsize]
        return view.view(dtype)

    def view(self, ptr: int, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
        return self.tensor(ptr, dtype, int(np.prod(shape))).reshape(shape)


def conv_kernel(x: Spec, w: Spec, attrs: dict):
    op = registry.lookup("Conv2D")
    full = registry.attrs_of(op, attrs)
    y = signature.outputs(op, [x, w], [], full)[0]
    binary = compiler.build(op, [x, w], [y], full)
    ns: dict = {}
    exec(binary.source, ns)
    return ns[binary.name], binary, y


def reference(x: np.ndarray, w: np.ndarray, pads: list[int], strides: list[int]) -> np.ndarray:
    node = onnx.helper.make_node("Conv", ["x", "w"], ["y"],
                                 pads=[pads[0], pads[2], pads[1], pads[3]], strides=strides)
    return ReferenceEvaluator(node).run(None, {"x": x, "w": w})[0]


@pytest.mark.parametrize("n", [1, 2])
def test_conv2d_uses_the_workspace_it_is_given_and_allocates_without_one(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    attrs = {"pads": [1, 1, 2, 0], "strides": [1, 1, 2, 1]}
    fn, binary, yspec = conv_kernel(Spec("float32", x.shape), Spec("float32", w.shape), attrs)
    want = reference(x, w, attrs["pads"], [2, 1])
    # declared: one image's im2col matrix (64-byte aligned), whatever the batch
    ho, wo = yspec.shape[2:]
    assert binary.workspace == -(-(3 * 9 * ho * wo * 4) // 64) * 64
    for given in (True, False):
        y = np.zeros(yspec.shape, np.float32)
        ws = np.zeros(binary.workspace, np.uint8)
        ctx = FakeContext({1: x.copy(), 2: w, 3: y, 4: ws})
        fn(ctx, 1, 2, 3, binary.shapes, *binary.tiling.args(), 4 if given else 0)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
        # the kernel worked in the scratch only when it was given one
        assert (4 in ctx.touched) == given and bool(ws.any()) == given


def test_conv2d_without_padding_or_window_declares_no_workspace() -> None:
    _fn, binary, _y = conv_kernel(Spec("float32", (1, 8, 5, 5)), Spec("float32", (4, 8, 1, 1)),
                                  {})
    assert binary.workspace == 0 and "pw" not in binary.source
    # a stride gathers the window positions: one offset's matrix
    _fn, binary, y = conv_kernel(Spec("float32", (1, 8, 5, 5)), Spec("float32", (4, 8, 1, 1)),
                                 {"strides": [1, 1, 2, 2]})
    assert y.shape == (1, 4, 3, 3) and binary.workspace == -(-(8 * 9 * 4) // 64) * 64
