"""Host copies around 4K aliasing (``memory.move``: ``shared/memcopy.py``, whose own tests are
``test_memcopy.py``) and the pinned pool's bisection (``PinnedPool.span``): the bytes land
where they should, whatever the sizes and page offsets of the two ends."""

from __future__ import annotations

import numpy as np

from npuemu.host import acl
from npuemu.shared import memcopy


def test_device_to_numpy_copy_through_the_bounce_buffer(fake_runtime, monkeypatch):
    """A D2H copy into a numpy buffer 16 bytes into its page (aliased) through the short
    path and through the general one (above ``SMALL_COPY_BYTES``; past the non-temporal
    threshold, 1 MiB as in a node's processes, through the non-temporal bounce)."""
    monkeypatch.setattr(memcopy, "NT_BYTES", 1 << 20)
    monkeypatch.setattr(memcopy._local, "nt", None, raising=False)
    assert acl.rt.set_device(0) == 0
    for n in (64 * 1024, 300 * 1024, 3 * (1 << 20) + 777):
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
