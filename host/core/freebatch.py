"""Batched frees of the uncached ``aclrtMalloc``/``aclrtFree`` path.

``aclrtFree`` of a block of at most ``DEFER_MAX_SIZE`` bytes does not post its FREE at once:
the block waits here (at most ``DEFER_MAX_BLOCKS`` blocks and ``DEFER_MAX_BYTES`` bytes per
process, then the card's waiting frees are posted in one go). A later ``aclrtMalloc`` of the
same size and policy on the same card takes such a block back without a round trip: the
device ends exactly as after a free and a malloc that returned that address (the device
pointer a malloc returns is the allocator's choice; its content is not cleared, as on
hardware).

What the program can observe stays exact: every request whose answer depends on frees
(``aclrtGetMemInfo``, ``aclrtGetMemUsageInfo``, page-pool stats, a malloc that misses and
goes to the device) posts the card's waiting frees first, and so does a kernel launch (the
worker checks the pointers a kernel touches, so a freed block must be freed there); the
worker handles frames in order. A tool reading the card's counters from another process
(``npuemu status``/``smi``) may see up to ``DEFER_MAX_BYTES`` of this process's freed
blocks as still used until its next such request, malloc miss, launch or device reset.

Threading model: no threads; every function but ``check_alive`` and ``waiting`` is called
with ``Runtime.lock`` held (it guards ``_waiting`` and the counts together with the
runtime's allocation tables); those two only read, or replace one ``_checked`` entry
(atomic under the GIL).
"""

from __future__ import annotations

import time

from npuemu.host.core import runtime
from npuemu.host.core.runtime import Allocation
from npuemu.host.driver.interface import Link
from npuemu.shared.protocol import Op

__all__ = ["DEFER_MAX_BLOCKS", "DEFER_MAX_BYTES", "DEFER_MAX_SIZE", "defer", "flush", "take"]

DEFER_MAX_SIZE = 1 << 20
DEFER_MAX_BLOCKS = 32
DEFER_MAX_BYTES = 8 << 20

# link -> {(size, policy): [Allocation, ...]}
_waiting: dict[Link, dict[tuple[int, int], list[Allocation]]] = {}
_count = 0
_bytes = 0
_checked: dict[Link, float] = {}  # link -> monotonic time of its last liveness check
ALIVE_CHECK_S = 1e-3


def check_alive(link: Link) -> None:
    """``link.check_alive()`` at most once a millisecond per card: a malloc or free served
    here finds a lost or stopped card as the request it saves would have."""
    now = time.monotonic()
    if now - _checked.get(link, 0.0) > ALIVE_CHECK_S:
        link.check_alive()
        _checked[link] = now


def waiting() -> bool:
    """True if any free waits (a lock-free peek)."""
    return _count > 0


def take(link: Link, size: int, policy: int) -> Allocation | None:
    """A waiting block of exactly ``size`` and ``policy`` on ``link``'s card, or None."""
    global _count, _bytes
    blocks = _waiting.get(link)
    if not blocks:
        return None
    same = blocks.get((size, policy))
    if not same:
        return None
    alloc = same.pop()
    _count -= 1
    _bytes -= alloc.span
    return alloc


def defer(alloc: Allocation) -> bool:
    """Keep ``alloc``'s free waiting (True), or False if the caller must post it now."""
    global _count, _bytes
    if alloc.size > DEFER_MAX_SIZE:
        return False
    if _count >= DEFER_MAX_BLOCKS or _bytes + alloc.span > DEFER_MAX_BYTES:
        for link in list(_waiting):
            flush(link)
    blocks = _waiting.get(alloc.link)
    if blocks is None:
        blocks = _waiting[alloc.link] = {}
    key = (alloc.size, alloc.policy)
    same = blocks.get(key)
    if same is None:
        blocks[key] = [alloc]
    else:
        same.append(alloc)
    _count += 1
    _bytes += alloc.span
    return True


def flush(link: Link) -> None:
    """Post every waiting free of ``link``'s card (by address)."""
    global _count, _bytes
    blocks = _waiting.pop(link, None)
    if not blocks:
        return
    allocs = sorted((a for same in blocks.values() for a in same), key=_order)
    for alloc in allocs:
        _count -= 1
        _bytes -= alloc.span
    if link.alive():
        for alloc in allocs:
            link.post(Op.FREE, alloc.ptr)


def _order(alloc: Allocation) -> int:
    return alloc.ptr


def _forget(link: Link) -> None:
    """The card is released: its worker reclaims the blocks; nothing is posted."""
    global _count, _bytes
    _checked.pop(link, None)
    for same in _waiting.pop(link, {}).values():
        for alloc in same:
            _count -= 1
            _bytes -= alloc.span


runtime.on_close_device(_forget)
