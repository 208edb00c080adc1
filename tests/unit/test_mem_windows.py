"""The card's windows of reserved ranges (device/memory/windows.py) over a real file: pieces
of the "arena" mapped side by side, spanning lookups, unmapping, refusals."""

from __future__ import annotations

import ctypes
import mmap
import os
import tempfile

import pytest

from npuemu.device.memory.windows import Windows
from npuemu.shared import address, errors

G = 2 << 20
VA = address.VIRT_BASE + 8 * G


@pytest.fixture
def arena():
    fd, path = tempfile.mkstemp()
    os.unlink(path)
    os.ftruncate(fd, 8 * G)
    mm = mmap.mmap(fd, 8 * G)
    yield fd, mm
    mm.close()
    os.close(fd)


def read(addr: int, n: int) -> bytes:
    return ctypes.string_at(addr, n)


def test_pieces_far_apart_in_the_arena_are_neighbours_in_the_window(arena):
    fd, mm = arena
    mm[5 * G - 4:5 * G] = b"tail"  # the end of the block at 3G..5G
    mm[1 * G:1 * G + 4] = b"head"  # the start of the block at 1G..2G
    w = Windows()
    w.map(VA, 4 * G, 0, 0x1000, 2 * G, fd, [(3 * G, 2 * G)])  # offset 0: arena 3G (two granules)
    w.map(VA, 4 * G, 2 * G, 0x2000, G, fd, [(1 * G, G)])  # offset 2G: arena 1G
    addr, spans = w.find(VA + 2 * G - 4, 8)
    assert read(addr, 8) == b"tailhead"  # one contiguous range over both blocks
    assert spans == [(0x1000 + 2 * G - 4, 4), (0x2000, 4)]
    ctypes.memmove(addr, b"TAILHEAD", 8)  # writes land in the arena's pages
    assert mm[5 * G - 4:5 * G] + mm[1 * G:1 * G + 4] == b"TAILHEAD"
    with pytest.raises(errors.AclError):
        w.find(VA + 3 * G - 4, 8)  # runs into the unmapped last granule
    with pytest.raises(errors.AclError):
        w.find(VA + 4 * G, 1)  # past the reservation
    w.unmap(VA, 2 * G)
    with pytest.raises(errors.AclError):
        w.find(VA + 2 * G - 4, 8)
    assert read(addr + 4, 4) == b"\0\0\0\0"  # scratch, not the arena, after the unmap
    assert mm[1 * G:1 * G + 4] == b"HEAD"
    w.release()
    assert not w.by_va


def test_refusals_and_pieces_without_window_pages(arena):
    fd, _mm = arena
    w = Windows()
    bad = [(VA + 1, 4 * G, 0, 1, G, fd, [(0, G)]),  # not page-aligned
           (VA, 4 * G, 3 * G, 1, 2 * G, fd, [(0, 2 * G)]),  # past the reservation
           (0x1000, 4 * G, 0, 1, G, fd, [(0, G)])]  # not a virtual address
    for args in bad:
        with pytest.raises(errors.AclError) as info:
            w.map(*args)
        assert info.value.code == errors.ACL_ERROR_RT_PARAM_INVALID
    w.map(VA, 4 * G, 0, 0x1000, G, fd, [(0, G)])
    with pytest.raises(errors.AclError):
        w.map(VA, 4 * G, 0, 0x2000, G, fd, [(G, G)])  # overlaps
    with pytest.raises(errors.AclError):
        w.map(VA + 2 * G, 4 * G, 0, 0x2000, G, fd, [(G, G)])  # overlaps the mapped reservation
    w.map(VA, 4 * G, G, 0x3040, G, fd, [(G + 64, G)])  # not page-aligned in the arena
    assert w.find(VA + G + 8, 16) == (None, [(0x3048, 16)])  # alone: its physical block
    with pytest.raises(errors.AclError):
        w.find(VA + G - 8, 16)  # joined to its neighbour: refused
    with pytest.raises(errors.AclError):
        w.unmap(VA, 3 * G)  # no mapping starts there
    w.unmap(VA, 0)
    w.unmap(VA, G)
    w.map(VA + 2 * G, 2 * G, 0, 0x4000, G, fd, [(0, G)])  # the empty old window gives way
    assert list(w.by_va) == [VA + 2 * G]
    w.release()
