"""Virtual memory (host/core/vmm.py) through acl.rt on the fake link: reserve, back a range
piecewise with physical handles, copy and fill through it across mapping boundaries."""

from __future__ import annotations

import os

import pytest

from npuemu.host import acl
from npuemu.shared import address

MiB = 1 << 20
PROP = {"handleType": 0, "allocationType": 0, "memAttr": 13, "location": {"type": 1, "id": 0}}
H2D, D2H, D2D = 1, 2, 3


def ok(ret):
    assert ret == 0, ret


@pytest.fixture
def mapped(fake_runtime):
    """A 6 MiB reservation backed by two handles (2 MiB at +0, 4 MiB at +2 MiB)."""
    ok(acl.rt.set_device(0))
    g, ret = acl.rt.mem_get_allocation_granularity(PROP, 1)
    assert (g, ret) == (2 * MiB, 0)
    va, ret = acl.rt.reserve_mem_address(6 * MiB, 0, 0, 0)
    ok(ret)
    assert address.is_virtual(va) and not address.is_device_ptr(va)
    h1, ret = acl.rt.malloc_physical(2 * MiB, PROP, 0)
    ok(ret)
    h2, ret = acl.rt.malloc_physical(3 * MiB, PROP, 0)  # rounded up to 4 MiB
    ok(ret)
    ok(acl.rt.map_mem(va, 2 * MiB, 0, h1, 0))
    ok(acl.rt.map_mem(va + 2 * MiB, 4 * MiB, 0, h2, 0))
    return va, h1, h2


def test_copies_and_fills_cross_mapping_boundaries(mapped):
    va, _h1, _h2 = mapped
    n = 3 * MiB
    data = os.urandom(n)
    src = acl.util.bytes_to_ptr(data)
    ok(acl.rt.memcpy(va + MiB, n, src, n, H2D))  # 1 MiB in the first handle, 2 in the second
    out = bytearray(n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, va + MiB, n, D2H))
    assert bytes(out) == data
    ok(acl.rt.memset(va + 2 * MiB - 10, 20, 0xAB, 20))
    small = bytearray(40)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(small), 40, va + 2 * MiB - 20, 40, D2H))
    assert bytes(small) == data[MiB - 20 : MiB - 10] + b"\xab" * 20 + data[MiB + 10 : MiB + 20]
    # device to device: virtual -> physical and back, async on a stream
    phys, ret = acl.rt.malloc(n, 0)
    ok(ret)
    s, ret = acl.rt.create_stream()
    ok(ret)
    ok(acl.rt.memcpy_async(phys, n, va + MiB, n, D2D, s))
    ok(acl.rt.memset_async(va, 6 * MiB, 0, 6 * MiB, s))
    ok(acl.rt.memcpy_async(va + 512, n, phys, n, D2D, s))
    ok(acl.rt.synchronize_stream(s))
    back = bytearray(n + 1024)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(back), n + 1024, va, n + 1024, D2H))
    filled = data[: MiB - 10] + b"\xab" * 20 + data[MiB + 10 :]  # the memset above
    assert bytes(back) == b"\0" * 512 + filled + b"\0" * 512


def test_unmapped_bytes_and_lifetime_rules(mapped):
    va, h1, h2 = mapped
    buf = bytearray(16)
    p = acl.util.bytes_to_ptr(buf)
    assert acl.rt.memcpy(p, 16, va + 6 * MiB, 16, D2H) == 107000  # past the range
    assert acl.rt.free_physical(h1) == 107000  # still mapped
    assert acl.rt.release_mem_address(va) == 107000  # still has mappings
    ok(acl.rt.unmap_mem(va))
    assert acl.rt.unmap_mem(va) == 107000
    assert acl.rt.memcpy(p, 16, va, 16, D2H) == 107000  # no longer mapped
    ok(acl.rt.memcpy(p, 16, va + 2 * MiB, 16, D2H))  # the other piece still is
    assert acl.rt.map_mem(va + 2 * MiB, 2 * MiB, 0, h1, 0) == 107000  # overlaps h2's mapping
    ok(acl.rt.map_mem(va, 2 * MiB, 0, h1, 0))  # map again
    ok(acl.rt.unmap_mem(va))
    ok(acl.rt.unmap_mem(va + 2 * MiB))
    ok(acl.rt.free_physical(h1))
    ok(acl.rt.free_physical(h2))
    assert acl.rt.free_physical(h2) == 107000
    ok(acl.rt.release_mem_address(va))
    assert acl.rt.release_mem_address(va) == 107000


def test_bad_input(fake_runtime):
    ok(acl.rt.set_device(0))
    assert acl.rt.reserve_mem_address(0, 0, 0, 0) == (0, 100000)
    assert acl.rt.reserve_mem_address(MiB, 0, 0, 0) == (0, 100000)  # not whole granules
    assert acl.rt.reserve_mem_address(2 * MiB, 3, 0, 0) == (0, 100000)
    assert acl.rt.reserve_mem_address(2 * MiB, 0, 0, 1) == (0, 100000)
    assert acl.rt.reserve_mem_address(2 * MiB, 0, 16 << 40, 0) == (0, 107000)
    va, ret = acl.rt.reserve_mem_address(4 * MiB, 0, 0, 0)
    ok(ret)
    assert acl.rt.reserve_mem_address(2 * MiB, 0, va, 0) == (0, 107000)  # taken
    for prop in (None, {"memAttr": 1}, {"location": {"type": 0, "id": 0}},
                 {"location": {"type": 1, "id": 9}}, {"allocationType": 1}):
        assert acl.rt.malloc_physical(2 * MiB, prop, 0) == (0, 100000), prop
        assert acl.rt.mem_get_allocation_granularity(prop, 0) == (0, 100000), prop
    assert acl.rt.mem_get_allocation_granularity(PROP, 5) == (0, 100000)
    assert acl.rt.mem_get_allocation_granularity({**PROP, "memAttr": 14}, 0) == (1 << 30, 0)
    assert acl.rt.malloc_physical(0, PROP, 0) == (0, 100000)
    h, ret = acl.rt.malloc_physical(2 * MiB, PROP, 0)
    ok(ret)
    assert acl.rt.map_mem(va, 4 * MiB, 0, h, 0) == 100000  # size must equal the handle's
    assert acl.rt.map_mem(va, 2 * MiB, 4096, h, 0) == 100000  # offset must be 0
    assert acl.rt.map_mem(va + 4096, 2 * MiB, 0, h, 0) == 107000  # not aligned
    assert acl.rt.map_mem(va + 4 * MiB, 2 * MiB, 0, h, 0) == 107000  # outside the range
    assert acl.rt.map_mem(va, 2 * MiB, 0, 424242, 0) == 107000
    assert acl.rt.unmap_mem("x") == 107000
    ok(acl.rt.free_physical(h))
    ok(acl.rt.release_mem_address(va))


def test_access_flags_are_obeyed_by_copies(mapped):
    va, _h1, _h2 = mapped
    buf = bytearray(b"x" * 64)
    p = acl.util.bytes_to_ptr(buf)
    dev0 = {"type": 1, "id": 0}
    assert acl.rt.mem_get_access(va, dev0) == (3, 0)  # READWRITE until set
    ok(acl.rt.mem_set_access(va, 2 * MiB, [{"flags": 1, "location": dev0}]))
    assert acl.rt.mem_get_access(va, dev0) == (1, 0)
    assert acl.rt.mem_get_access(va + 2 * MiB, dev0) == (3, 0)  # the other mapping
    ok(acl.rt.memcpy(p, 64, va, 64, D2H))  # reading is allowed
    assert acl.rt.memcpy(va, 64, p, 64, H2D) == 107000  # writing is not
    assert acl.rt.memset(va + 2 * MiB - 8, 16, 0, 16) == 107000  # crosses into it
    ok(acl.rt.memset(va + 2 * MiB, 16, 0, 16))
    ok(acl.rt.mem_set_access(va, 6 * MiB, [{"flags": 0, "location": dev0}]))
    assert acl.rt.memcpy(p, 64, va + 3 * MiB, 64, D2H) == 107000
    ok(acl.rt.mem_set_access(va, 6 * MiB, [{"flags": 3, "location": dev0}]))
    ok(acl.rt.memcpy(va, 64, p, 64, H2D))
    assert acl.rt.mem_set_access(va, 8 * MiB, [{"flags": 3, "location": dev0}]) == 107000
    assert acl.rt.mem_set_access(va, 2 * MiB, [{"flags": 2, "location": dev0}]) == 100000
    assert acl.rt.mem_set_access(va, 2 * MiB, []) == 100000
    assert acl.rt.mem_get_access(va + 6 * MiB, dev0) == (0, 107000)
