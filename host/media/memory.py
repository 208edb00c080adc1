"""DVPP memory: ``acldvppMalloc`` (``acldvppMallocWithCfg``) / ``acldvppFree``.

A DVPP block is device memory of the current card (HBM, the default policy), requested as
``acldvppMalloc`` does: the size rounded up to 32 bytes plus 32 more (``aclrtMalloc``'s own
rule here, so the card sets aside ``dvpp_block_size(size)``). Its address is 128-byte aligned
(the card's allocator gives at least that). The blocks are listed in memory usage info as
the component ``"dvpp"`` (``acl.rt.get_mem_usage_info``). Partial: real DVPP memory comes
from a dedicated address range of limited size on some products; here it is ordinary HBM.

Threading model: ``_lock`` guards ``_blocks`` (pointer -> requested size); each call holds it
only around the table update, never across a round trip.
"""

from __future__ import annotations

import threading
from typing import Any

from npuemu.host.core import memory
from npuemu.host.driver.interface import Link
from npuemu.shared import errors, media

_lock = threading.Lock()
_blocks: dict[int, tuple[int, Link]] = {}
_peak: dict[Link, int] = {}


def dvpp_malloc(size: int) -> int:
    """Mirrors ``acldvppMalloc``: one round trip to the card (blocks ~10 us). 100000 for a
    size that is not a positive integer, 207001 when the card is out of memory."""
    return _malloc(size, 0, "dvpp_malloc")


def dvpp_malloc_with_cfg(size: int, policy: object, cfg: object) -> int:
    """Mirrors ``acldvppMallocWithCfg`` (pyACL's ``dvpp_malloc_with_cfg(size, policy,
    cfg)``): ``acldvppMalloc`` with an ``aclrtMemMallocPolicy`` (as ``aclrtMalloc`` takes
    it, an unknown page policy included: CANN then picks huge pages from 2 MiB) and an
    ``aclrtMallocConfig`` (pyACL's dict, ``{}`` or None for none: its attributes change
    nothing here, our choice; anything else is 100000). Blocks for one round trip."""
    if cfg is not None and not isinstance(cfg, dict):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               f"dvpp_malloc_with_cfg cfg {cfg!r} must be a dict")
    if type(policy) is not int or not 0 <= policy < 1 << 32:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               f"dvpp_malloc_with_cfg policy {policy!r} is not a uint32_t")
    return _malloc(size, policy, "dvpp_malloc_with_cfg")


def _malloc(size: int, policy: int, what: str) -> int:
    if type(size) is not int or size <= 0:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               f"{what} size {size!r} must be a positive integer")
    ptr = memory.malloc(size, policy)
    link = memory.find(ptr, 1).link
    with _lock:
        _blocks[ptr] = (media.dvpp_block_size(size), link)
        used = sum(n for n, lk in _blocks.values() if lk is link)
        _peak[link] = max(_peak.get(link, 0), used)
    return ptr


def dvpp_free(ptr: int) -> None:
    """Mirrors ``acldvppFree`` (does not wait, as ``aclrtFree``). 100000 unless ``ptr`` is a
    live block of ``dvpp_malloc``."""
    with _lock:
        entry = _blocks.pop(ptr, None) if type(ptr) is int else None
    if entry is None:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               f"{ptr!r} is not a live block of dvpp_malloc")
    memory.free(ptr)


def is_dvpp(ptr: int) -> bool:
    """Whether ``ptr`` is the start of a live DVPP block."""
    return ptr in _blocks


def _usage(link: Link) -> dict[str, Any] | None:
    with _lock:
        used = sum(n for n, lk in _blocks.values() if lk is link)
        peak = _peak.get(link, 0)
    if not peak:
        return None
    return {"name": "dvpp", "curMemSize": used, "memPeakSize": peak}


memory.USAGE_COMPONENTS.append(_usage)
