"""The short path of ``aclrtMemcpy`` (``memory.small_copy``) on the fake link: what it keeps
from one call to the next (the last block found, the last host range checked, each block's
memoryview) never outlives what it stands for, and its copies land exactly, 4K-aliased or
not."""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest

from npuemu.host import acl
from npuemu.host.core import memory
from npuemu.shared import errors, memcopy

RT_PARAM_INVALID = 107000
H2D, D2H, D2D = 1, 2, 3


def ok(ret: int) -> None:
    assert ret == 0, (ret, acl.get_recent_err_msg())


def malloc(size: int) -> int:
    """A device block of ``size`` bytes on the current card (asserted)."""
    return ok_value(*acl.rt.malloc(size, 0))


def ok_value(value: int, ret: int) -> int:
    ok(ret)
    return value


def page_buffer(n: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """A zeroed buffer and its view of ``n`` bytes starting ``shift`` bytes into a page."""
    raw = np.zeros(n + 8192, np.uint8)
    start = (-raw.ctypes.data) % 4096 + shift
    return raw, raw[start:start + n]


def test_a_freed_block_is_not_kept_and_bounds_hold_on_the_kept_one(fake_runtime):
    ok(acl.rt.set_device(0))
    n = 4096
    host = np.arange(n, dtype=np.uint32).astype(np.uint8)
    a = malloc(n)
    ok(acl.rt.memcpy(a, n, host.ctypes.data, n, H2D))  # a is now the kept block
    assert memory._recent_dst.ptr == a
    assert acl.rt.memcpy(a + 1, n, host.ctypes.data, n, H2D) == RT_PARAM_INVALID  # one past
    ok(acl.rt.memcpy(a + n - 16, 16, host.ctypes.data, 16, H2D))  # its last 16 bytes
    ok(acl.rt.free(a))
    for args in ((a, n, host.ctypes.data, n, H2D), (host.ctypes.data, n, a, n, D2H),
                 (a, n, a, n, D2D)):
        assert acl.rt.memcpy(*args) == RT_PARAM_INVALID, args  # freed: the table decides
    b = malloc(n)
    ok(acl.rt.memcpy(b, n, host.ctypes.data, n, H2D))
    out = np.zeros(n, np.uint8)
    ok(acl.rt.memcpy(out.ctypes.data, n, b, n, D2H))
    assert (out == host).all()
    ok(acl.rt.free(b))


def test_a_host_range_is_checked_again_once_the_maps_change(fake_runtime):
    """The kept host range holds only while ``HostMaps.cache`` is the one it came from: an
    unmapped range (the maps invalidated, as ``aclrtFreeHost`` does) is 107000, not a
    fault."""
    ok(acl.rt.set_device(0))
    n = 4096
    dev = malloc(n)
    region = mmap.mmap(-1, 4 * n)
    anchor = ctypes.c_char.from_buffer(region)
    addr = ctypes.addressof(anchor)
    ctypes.memset(addr, 5, 4 * n)
    ok(acl.rt.memcpy(dev, n, addr, n, H2D))
    ok(acl.rt.memcpy(addr + 2 * n, n, dev, n, D2H))  # written back into the same mapping
    assert ctypes.string_at(addr + 2 * n, n) == b"\x05" * n
    low, high = memory._host_read[:2]
    assert low <= addr and addr + n <= high
    del anchor
    region.close()  # unmapped
    fake_runtime.host_maps.invalidate()
    assert acl.rt.memcpy(dev, n, addr, n, H2D) == RT_PARAM_INVALID
    assert acl.rt.memcpy(addr, n, dev, n, D2H) == RT_PARAM_INVALID
    ok(acl.rt.free(dev))


def test_covering_gives_the_mapped_range_and_the_cache_it_holds_for(fake_runtime):
    maps = fake_runtime.host_maps
    buf = bytearray(10000)
    ptr = acl.util.bytes_to_ptr(buf)
    low, high, token = maps.covering(ptr, len(buf), write=True)
    assert low <= ptr and ptr + len(buf) <= high and token is maps.cache
    assert maps.covering(ptr + 10, 16, write=False)[:2] == (low, high)
    with pytest.raises(errors.AclError) as err:
        maps.covering(0x10, 16, write=False)
    assert err.value.code == RT_PARAM_INVALID


@pytest.mark.parametrize("shift", [0, 16, memcopy.SMALL_WINDOW, 2048, 4000])
def test_short_copies_land_exactly_aliased_or_not(fake_runtime, shift):
    """H2D and D2H of sizes about the split and bounce thresholds, up to ``SMALL_COPY_BYTES``,
    with the host end ``shift`` bytes into its page (16 and 256: D2H aliased; 4000: H2D
    aliased), at the start and inside a block: every byte, nothing past the end."""
    ok(acl.rt.set_device(0))
    top = memory.SMALL_COPY_BYTES
    dev = malloc(top + 8192)
    rng = np.random.default_rng(shift)
    for count in (100, memory.SPLIT_MIN_BYTES - 1, memory.SPLIT_MIN_BYTES, 3001,
                  memory.SPLIT_MAX_BYTES, memory.SPLIT_MAX_BYTES + 1, 3 * 4096 + 5, top):
        for inner in (0, 4096):
            _raw_src, src = page_buffer(count, shift)
            src[:] = rng.integers(0, 256, count, dtype=np.uint8)
            ok(acl.rt.memset(dev, top + 8192, 0, top + 8192))
            ok(acl.rt.memcpy(dev + inner, count, src.ctypes.data, count, H2D))
            raw, out = page_buffer(count + 1, shift)
            ok(acl.rt.memcpy(out.ctypes.data, count + 1, dev + inner, count + 1, D2H))
            assert (out[:count] == src).all(), (count, inner)
            assert out[count] == 0, (count, inner)  # the device byte after: not written
            raw[:] = 0
            ok(acl.rt.memcpy(out.ctypes.data, count, dev + inner, count, D2H))
            assert (out[:count] == src).all() and out[count] == 0, (count, inner)
    ok(acl.rt.free(dev))


def test_device_to_device_short_copies_between_blocks_and_within_one(fake_runtime):
    ok(acl.rt.set_device(0))
    n = 8192
    a, b = malloc(n), malloc(n)
    data = np.arange(n, dtype=np.uint32).astype(np.uint8)
    ok(acl.rt.memcpy(a, n, data.ctypes.data, n, H2D))
    ok(acl.rt.memcpy(b, n, a, n, D2D))
    ok(acl.rt.memcpy(b + 1000, n - 1000, b, 4096, D2D))  # overlapping: memmove's result
    want = data.copy()
    want[1000:1000 + 4096] = data[:4096]
    out = np.zeros(n, np.uint8)
    ok(acl.rt.memcpy(out.ctypes.data, n, b, n, D2H))
    assert (out == want).all()
    assert acl.rt.memcpy(b, n, a + 1, n, D2D) == RT_PARAM_INVALID  # source past its block
    ok(acl.rt.free(a))
    ok(acl.rt.free(b))
