"""``move``: ``memmove`` for copies between large mappings (host buffers and card arenas),
around 4K aliasing. The host's host<->device copies and the workers' device-to-device copies
use it; it never blocks on anything but the copy itself.

4K aliasing: a load issued just after a store whose address has the same low 12 bits waits
for that store. A forward copy whose destination lies a little past its source modulo
4 KiB (``dst - src`` in ``(0, window]``) meets it at every step. Where glibc's ``memmove``
suffers it (measured on AMD EPYC, glibc 2.36):

| size                      | glibc's loop        | aliased when      | GB/s aliased / not |
|---------------------------|---------------------|-------------------|--------------------|
| ``SMALL_MIN``-``SMALL_MAX`` | ``rep movsb``     | ``SMALL_WINDOW``  | ~2 / ~6 (64 KiB)   |
| ``SMALL_MAX``-NT threshold | vector loop        | never (it copies backward then) |      |
| NT threshold and up       | non-temporal stores | ``NT_WINDOW``     | 3.3-4.8 / 11-21    |

(non-temporal threshold: ``nt_threshold``, set for a node's processes by
``config.glibc_tunables``.) An aliased copy in the first or last row goes in chunks through
this thread's bounce buffer, placed 2 KiB off the source's page offset so that neither leg
aliases: chunks of ``SMALL_CHUNK`` bytes (they stay in the L1/L2 cache between the legs),
or, past the non-temporal threshold, chunks of at least that threshold, so that the second
leg still stores non-temporally (its first leg goes in ``FIRST_LEG_PIECE`` pieces, below glibc's
``rep movsb`` limit). Measured, 64 MiB from a card's arena into a NumPy array (16 bytes into
its page): 3.7 GB/s direct, ~7 through the bounce buffer (two passes over the bytes instead
of one; the limit of what ``memmove`` can do with such a pair of addresses).

Numbers: a NumPy array's data starts 16 bytes into a page, a card's block on a page boundary
(or 64 bytes past one, the block's padding, for two blocks of the NORMAL class side by side):
a D2H copy into NumPy and a D2D copy between neighbouring blocks are aliased; H2D is not.

Threading model: any thread may call ``move``. Each thread owns its bounce buffers
(``_local``, made on the thread's first aliased copy of each kind); no lock, nothing shared.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from npuemu.shared.config import NT_TUNABLE

SMALL_WINDOW = 256
"""An aliased ``rep movsb`` copy: ``dst - src`` modulo 4 KiB in ``(0, SMALL_WINDOW]``."""
NT_WINDOW = 768
"""An aliased non-temporal copy: ``dst - src`` modulo 4 KiB in ``(0, NT_WINDOW)`` (measured:
512 still ~2x slower, 768 as fast as 0)."""
SMALL_MIN = 4 * 1024
"""Below this, an aliased copy is left as it is (the extra call costs what it saves)."""
SMALL_MAX = 512 * 1024
"""From this size on glibc no longer uses ``rep movsb`` (measured: 512 KiB at ~13 GB/s direct,
~8 through the bounce buffer)."""
SMALL_CHUNK = 64 * 1024
FIRST_LEG_PIECE = 256 * 1024
"""The first leg of a non-temporal bounce goes in pieces of this size (below ``SMALL_MAX``:
ordinary stores, so the chunk stays in the cache for the second leg)."""
NT_BOUNCE_MAX = 8 << 20
"""A non-temporal threshold above this gets no chunk of its size: such a process's aliased
copies from that threshold on go through the small chunks (~5 GB/s instead of ~3.7)."""


def nt_threshold(tunables: str) -> int:
    """The size from which this process's ``memmove`` stores non-temporally: the value of
    glibc's tunable in ``tunables`` (``GLIBC_TUNABLES`` as the process started); 0 when it
    is not set there (glibc's own threshold comes from what the CPU reports of its caches,
    192 MiB on the VM measured, which Python cannot read: copies that large are left to
    ``memmove``)."""
    for item in tunables.split(":"):
        name, _, value = item.partition("=")
        if name == NT_TUNABLE:
            try:
                return max(0, int(value, 0))
            except ValueError:
                return 0  # glibc ignores a bad value too
    return 0


NT_BYTES = nt_threshold(os.environ.get("GLIBC_TUNABLES", ""))
"""This process's non-temporal threshold (read once: glibc reads its tunables at start)."""
_local = threading.local()
_memmove = ctypes.memmove


def move(dst: int, src: int, count: int) -> None:
    """``memmove(dst, src, count)``, around 4K aliasing (module docstring). Overlapping
    ranges go to ``memmove`` as they are. No ``aclrt`` counterpart; does not block."""
    offset = (dst - src) & 4095
    if count < SMALL_MIN or not offset or src - count < dst < src + count:
        _memmove(dst, src, count)
    elif count < SMALL_MAX:
        if offset <= SMALL_WINDOW:
            _bounce(dst, src, count, SMALL_CHUNK, small_buffer())
        else:
            _memmove(dst, src, count)
    elif 0 < NT_BYTES <= count and offset < NT_WINDOW:
        if NT_BYTES <= NT_BOUNCE_MAX:
            _nt_bounce(dst, src, count)
        else:
            _bounce(dst, src, count, SMALL_CHUNK, small_buffer())
    else:
        _memmove(dst, src, count)


def _bounce(dst: int, src: int, count: int, chunk: int, buffer: Any) -> None:
    """Copy in ``chunk``-byte steps through ``buffer``, 2 KiB off the source's page offset."""
    base = ctypes.addressof(buffer)
    bounce = base + ((src + 2048 - base) & 4095)
    for at in range(0, count, chunk):
        n = min(chunk, count - at)
        _memmove(bounce, src + at, n)
        _memmove(dst + at, bounce, n)


def _nt_bounce(dst: int, src: int, count: int) -> None:
    """``_bounce`` in chunks of ``NT_BYTES`` (the last one takes the remainder, so that
    every second leg stores non-temporally); each first leg in ``FIRST_LEG_PIECE`` pieces."""
    buffer = _nt_buffer()
    base = ctypes.addressof(buffer)
    bounce = base + ((src + 2048 - base) & 4095)
    chunk = NT_BYTES
    at = 0
    while at < count:
        n = count - at if count - at < 2 * chunk else chunk
        for piece in range(0, n, FIRST_LEG_PIECE):
            _memmove(bounce + piece, src + at + piece, min(FIRST_LEG_PIECE, n - piece))
        _memmove(dst + at, bounce, n)
        at += n


def small_buffer() -> Any:
    """This thread's bounce buffer for ``SMALL_CHUNK`` chunks (at any offset in a page),
    made on its first use."""
    buf = getattr(_local, "small", None)
    if buf is None:
        buf = _local.small = ctypes.create_string_buffer(SMALL_CHUNK + 4096)
    return buf


def _nt_buffer() -> Any:
    buf = getattr(_local, "nt", None)
    if buf is None:  # two chunks less one byte at most, at any offset in a page
        buf = _local.nt = ctypes.create_string_buffer(2 * NT_BYTES + 4096)
    return buf
