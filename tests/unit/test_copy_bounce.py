"""Host copies around 4K aliasing (``memory.move``'s bounce buffer) and the pinned pool's
bisection (``PinnedPool.span``): the bytes land where they should, whatever the sizes and
page offsets of the two ends."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from npuemu.host import acl
from npuemu.host.core import memory

SIZES = [100, memory.BOUNCE_MIN_BYTES, memory.BOUNCE_CHUNK_BYTES * 3 + 123,
         memory.BOUNCE_MAX_BYTES - 1, memory.BOUNCE_MAX_BYTES + 4096]


@pytest.mark.parametrize("shift", [0, 16, memory.ALIASED_OFFSETS, 2048])
def test_move_copies_every_byte_at_any_offset(shift):
    """Aliased (16, 256 bytes past the source modulo 4 KiB) and plain ends, sizes on both
    sides of the bounce window and a last chunk shorter than the others."""
    n = max(SIZES)
    src = np.random.default_rng(shift).integers(0, 256, n + 8192, dtype=np.uint8)
    dst = np.zeros(n + 8192, np.uint8)
    s = src.ctypes.data + (-src.ctypes.data) % 4096  # page-aligned source
    d0 = dst.ctypes.data + (-dst.ctypes.data) % 4096 + shift
    for count in SIZES:
        dst[:] = 0
        memory.move(d0, s, count)
        got = np.ctypeslib.as_array((ctypes.c_uint8 * (count + 1)).from_address(d0))
        want = np.ctypeslib.as_array((ctypes.c_uint8 * count).from_address(s))
        assert (got[:count] == want).all(), count
        assert got[count] == 0, count  # nothing past the end


def test_device_to_numpy_copy_through_the_bounce_buffer(fake_runtime):
    """A D2H copy into a numpy buffer 16 bytes into its page (aliased) through the short
    path and through the general one (above ``SMALL_COPY_BYTES``)."""
    assert acl.rt.set_device(0) == 0
    for n in (64 * 1024, 300 * 1024):
        data = np.arange(n, dtype=np.uint32).astype(np.uint8)
        dev, ret = acl.rt.malloc(n, 0)
        assert ret == 0
        assert acl.rt.memcpy(dev, n, data.ctypes.data, n, 1) == 0
        out = np.zeros(n + 4096 + 16, np.uint8)
        start = (-out.ctypes.data) % 4096 + 16
        view = out[start:start + n]
        assert acl.rt.memcpy(view.ctypes.data, n, dev, n, 2) == 0
        assert (view == data).all()
        assert acl.rt.free(dev) == 0


def test_pinned_span_finds_the_block_of_any_inner_address(fake_runtime):
    pool = fake_runtime.pinned
    assert pool is not None
    blocks = [pool.malloc(size) for size in (4096, 3 * 4096, 4096)]
    try:
        for base in blocks:
            seg = pool.find(base)
            assert seg is not None
            assert pool.span(base) == (base, base + seg.size, seg)
            assert pool.span(base + seg.size - 1) == (base, base + seg.size, seg)
            end = base + seg.size
            if end not in blocks:
                assert pool.span(end) is None
        assert pool.span(min(blocks) - 1) is None
    finally:
        for ptr in blocks:
            pool.free(ptr)
    assert pool.span(blocks[1]) is None
