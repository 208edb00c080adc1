"""``shared/memcopy.py``: copies around 4K aliasing land every byte where it should, whatever
the sizes and page offsets of the two ends, through each of its bounce paths; the process's
non-temporal threshold is read from ``GLIBC_TUNABLES``."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from npuemu.shared import memcopy
from npuemu.shared.config import NT_TUNABLE

M = 1 << 20
SIZES = [100, memcopy.SMALL_MIN, memcopy.SMALL_CHUNK * 3 + 123, memcopy.SMALL_MAX - 1,
         memcopy.SMALL_MAX + 4096, M, M + 1, 2 * M - 1, 2 * M, 3 * M + 12345]
SHIFTS = [0, 16, 64, memcopy.SMALL_WINDOW, 512, memcopy.NT_WINDOW, 2048, 4000]


@pytest.fixture
def nt_1mib(monkeypatch):
    """This process copies as if glibc stored non-temporally from 1 MiB on (a node's
    setting), so that the non-temporal bounce runs whatever the test process's tunables."""
    monkeypatch.setattr(memcopy, "NT_BYTES", M)
    monkeypatch.setattr(memcopy._local, "nt", None, raising=False)  # sized for 1 MiB


def _check_moves(shift: int) -> None:
    n = max(SIZES)
    src = np.random.default_rng(shift).integers(0, 256, n + 8192, dtype=np.uint8)
    dst = np.zeros(n + 8192, np.uint8)
    s = src.ctypes.data + (-src.ctypes.data) % 4096  # page-aligned source
    d0 = dst.ctypes.data + (-dst.ctypes.data) % 4096 + shift
    for count in SIZES:
        dst[:] = 0
        memcopy.move(d0, s, count)
        got = np.ctypeslib.as_array((ctypes.c_uint8 * (count + 1)).from_address(d0))
        want = np.ctypeslib.as_array((ctypes.c_uint8 * count).from_address(s))
        assert (got[:count] == want).all(), count
        assert got[count] == 0, count  # nothing past the end
        assert not dst[: d0 - dst.ctypes.data].any(), count  # nothing before the start


@pytest.mark.parametrize("shift", SHIFTS)
def test_move_copies_every_byte_with_the_non_temporal_bounce(nt_1mib, shift):
    _check_moves(shift)


@pytest.mark.parametrize("shift", [16, 4000])
def test_move_copies_every_byte_under_a_threshold_too_large_to_bounce(monkeypatch, shift):
    """A threshold past ``NT_BOUNCE_MAX``: large aliased copies take the small chunks."""
    monkeypatch.setattr(memcopy, "NT_BYTES", 2 * M)
    monkeypatch.setattr(memcopy, "NT_BOUNCE_MAX", M)
    _check_moves(shift)


def test_an_aliased_copy_past_the_threshold_goes_through_the_non_temporal_bounce(
        nt_1mib, monkeypatch):
    """16 bytes past the source (a NumPy array's start against a card's block) and 64 (two
    neighbouring blocks) take the bounce; 2048 bytes and a copy below the threshold do not."""
    calls: list[int] = []
    real = memcopy._nt_bounce

    def spy(dst: int, src: int, count: int) -> None:
        calls.append(count)
        real(dst, src, count)

    monkeypatch.setattr(memcopy, "_nt_bounce", spy)
    src = np.zeros(3 * M + 8192, np.uint8)
    dst = np.zeros(3 * M + 8192, np.uint8)
    s = src.ctypes.data + (-src.ctypes.data) % 4096
    d = dst.ctypes.data + (-dst.ctypes.data) % 4096
    for shift, count in ((16, 3 * M), (64, M), (2048, 3 * M), (16, M - 4096)):
        memcopy.move(d + shift, s, count)
    assert calls == [3 * M, M]


def test_overlapping_ranges_copy_as_memmove_does(nt_1mib):
    buf = np.arange(3 * M + 8192, dtype=np.uint32).astype(np.uint8)
    want = buf.copy()
    base = buf.ctypes.data + (-buf.ctypes.data) % 4096
    at = base - buf.ctypes.data
    memcopy.move(base + 16, base, 2 * M)  # aliased, but one range holds the other's start
    want[at + 16 : at + 16 + 2 * M] = want[at : at + 2 * M].copy()
    assert (buf == want).all()


@pytest.mark.parametrize(("tunables", "want"), [
    (f"{NT_TUNABLE}=0x100000", M),
    (f"glibc.malloc.check=0:{NT_TUNABLE}=4194304", 4 * M),
    ("glibc.malloc.check=0", 0),  # glibc's own threshold: not known here
    (f"{NT_TUNABLE}=junk", 0),
    ("", 0),
])
def test_the_threshold_comes_from_the_tunable(tunables, want):
    assert memcopy.nt_threshold(tunables) == want
