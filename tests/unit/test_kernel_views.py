"""``KernelContext.view`` (``device/exec/kernels.py``): the shaped view the op compiler's
one-tile kernels take is ``tensor(...).reshape(...)``, kept between launches only while no
block of the card was allocated, freed or mapped, with the isolated-page check on every call
and the bounds check on every miss. No processes: a stand-in card over a ctypes buffer."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from npuemu.device.exec.kernels import KernelContext, MemoryFault, Ranges
from npuemu.shared import errors, layout

_BASE, _SIZE = 0x1000, 4096


class _Arena:
    def __init__(self) -> None:
        self.raw = (ctypes.c_char * _SIZE)()
        self.seg = type("Seg", (), {"address": ctypes.addressof(self.raw)})()


class _Memory:
    def __init__(self) -> None:
        self.arena, self.resolved = _Arena(), 0

    def resolve(self, slot: int, ptr: int, nbytes: int):
        self.resolved += 1
        if not (ptr >= _BASE and ptr + nbytes <= _BASE + _SIZE):
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"0x{ptr:x} not live")
        return self.arena, ptr - _BASE


class _Faults:
    def __init__(self) -> None:
        self.checked: list[tuple[int, int]] = []

    def check_ranges(self, *ranges: tuple[int, int]) -> None:
        self.checked += ranges


class _Card:
    alloc_changes = 0

    def __init__(self) -> None:
        self.ctl = memoryview(bytearray(layout.DEVICE_CTL_SIZE)).cast("Q")
        self.memory, self.faults = _Memory(), _Faults()


class _Client:
    slot = 0

    def __init__(self) -> None:
        self.ranges = Ranges()


@pytest.fixture
def ctx():
    card = _Card()
    return KernelContext(card, _Client(), 0, 1)


def test_a_view_is_the_reshaped_tensor_and_is_kept_until_the_allocations_change(ctx) -> None:
    card = ctx._worker
    first = ctx.view(_BASE, "float32", (4, 8))
    assert first.shape == (4, 8) and first.dtype == np.float32
    first[...] = np.arange(32).reshape(4, 8)
    assert np.array_equal(ctx.tensor(_BASE, "float32", 32), np.arange(32))
    resolved = card.memory.resolved
    assert ctx.view(_BASE, "float32", (4, 8)) is first  # kept: no check, no view built
    assert card.memory.resolved == resolved
    assert ctx.view(_BASE, "float32", (8, 4)) is not first  # another shape, another view
    card.alloc_changes += 1  # a malloc, free or mapping since: checked again
    again = ctx.view(_BASE, "float32", (4, 8))
    assert again is not first and card.memory.resolved > resolved


def test_a_view_out_of_bounds_faults_as_tensor_does_and_is_never_kept(ctx) -> None:
    with pytest.raises(MemoryFault):
        ctx.view(_BASE + _SIZE - 16, "float32", (2, 4))
    with pytest.raises(MemoryFault):
        ctx.view(_BASE + _SIZE - 16, "float32", (2, 4))  # refused again, not served
    assert len(ctx._ranges.table) == 0


def test_a_kept_view_still_meets_the_isolated_page_check(ctx) -> None:
    card = ctx._worker
    view = ctx.view(_BASE, "int8", (16,))
    card.ctl[layout.DEVICE_CTL.POISONED] = 1
    assert ctx.view(_BASE, "int8", (16,)) is view
    assert (_BASE, 16) in card.faults.checked


def test_an_unhashable_shape_is_served_uncached(ctx) -> None:
    view = ctx.view(_BASE, "float32", [2, 2])
    assert view.shape == (2, 2) and not any(type(k[2]) is list for k in ctx._ranges.table)
