"""Memory statistics on the Pythonic face, named as in ``torch.npu`` / ``torch.cuda``.

    >>> import npuemu.host as npu
    >>> npu.memory_stats(0)["reserved_bytes.all.current"]   # cached bytes count as reserved
    >>> npu.empty_cache()                                    # give cached blocks back
    >>> pickle.dump(npu.memory_snapshot(), open("snap.pickle", "wb"))  # pytorch.org/memory_viz

``device`` is a ``Device``, a logical id, or None for the calling thread's device.
``memory_stats``, ``memory_allocated``, ``memory_reserved``, ``memory_snapshot`` and
``empty_cache`` never wait for the device; ``pool_stats`` is one round trip (it blocks).
No threads of its own.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.core import caching as _caching
from npuemu.host.core import memstats as _memstats

__all__ = [
    "empty_cache",
    "leak_report",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "pool_stats",
    "reset_peak_memory_stats",
]


def memory_stats(device: Any = None) -> dict[str, int]:
    """The caching allocator's counters with torch's key names (``allocated_bytes.all.current``,
    ``reserved_bytes.all.peak``, ``num_alloc_retries``, ``num_ooms``, ...)."""
    return _memstats.memory_stats(device)


def memory_allocated(device: Any = None) -> int:
    """Bytes lent to the program by the caching allocator (``torch.npu.memory_allocated``)."""
    return memory_stats(device)["allocated_bytes.all.current"]


def memory_reserved(device: Any = None) -> int:
    """Device bytes the caching allocator holds, lent or cached (``memory_reserved``)."""
    return memory_stats(device)["reserved_bytes.all.current"]


def reset_peak_memory_stats(device: Any = None) -> None:
    """Peaks restart from the current values."""
    _caching.get().reset_peaks(_memstats._link(device)[1])


def empty_cache(device: Any = None) -> int:
    """Give the cached blocks (of ``device``, or of every card when None) back to the device
    (``aclrtFree`` each, queued); the device heap merges them. Returns the bytes released."""
    link = None if device is None else _memstats._link(device)[1]
    return _caching.get().empty_cache(link)


def memory_snapshot() -> dict:
    """``torch.cuda.memory._snapshot()``-shaped dict of this process's device memory."""
    return _memstats.snapshot()


def pool_stats(device: Any = None) -> dict[str, list[_memstats.PoolRow]]:
    """The card's page pools per arena: reserved, used, free, largest free block and
    fragmentation (``1 - largest_free / free``). One round trip."""
    return _memstats.pool_stats(device)


def leak_report() -> list[dict]:
    """Live blocks with the program line that allocated each (``NPUEMU_TRACK_ALLOC=1``)."""
    return _memstats.leak_report()
