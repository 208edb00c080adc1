"""Stream-ordered memory pools: ``aclrtMemPoolCreate``, ``aclrtMemPoolMallocAsync``,
``aclrtMemPoolFreeAsync``, ``aclrtMemPoolTrimTo``, ``aclrtMemPoolSet/GetAttr``,
``aclrtMemPoolDestroy`` (``acl_rt_memory_soma.h``).

A pool holds device blocks (ordinary ``aclrtMalloc`` allocations of this process, so copies
and kernels check them as usual) of rounded sizes (512 B steps up to 1 MiB, 2 MiB above).
``free_async(ptr, stream)`` returns a block to the pool at the stream's current position:

* the same stream may get it again at once (its later tasks run after every task that was
  queued before the free);
* another stream gets it at once with ``REUSE_FOLLOW_EVENT_DEPENDENCIES`` when it already
  runs after the free: it waits (untimed) on an event recorded on the freeing stream after
  the free, directly or through a chain of such waits (``stream.follows``);
* with ``REUSE_ALLOW_OPPORTUNISTIC``, once the freeing stream has passed the free;
* with ``REUSE_ALLOW_INTERNAL_DEPENDENCIES``, when none of those holds, the newest block of
  the size all the same: the pool inserts the dependency (an internal event recorded on
  the freeing stream, waited on by the allocating one, ``stream.order_after``), so the
  allocating stream's later work waits for all the freeing stream had queued.

In that order; with all three off (or none applying) a miss. Our choice: the defaults (1,
1, 1) follow the CUDA pools this API mirrors, as does the order.

A miss asks the device (one round trip; 207001 when the card, or ``maxSize`` of the pool, is
exhausted). The pool keeps what it got until ``trim_to`` (blocks whose freeing stream has
passed the free), ``destroy``, or a miss while it holds more than ``RELEASE_THRESHOLD`` bytes
(default 0): then ready cached blocks go back first. A difference: the real runtime releases
above the threshold at synchronisation points; here it happens at the next miss.
Attributes 5..8 (reserved/used, current/high) are bytes; the ``*_HIGH`` ones may be set to 0
to restart them. Bad props or attributes: 100000; unknown pools and pointers: 107000;
``destroy`` with blocks still allocated from the pool: 107000 (our choice).

Threading model: any thread may call in. ``MemPool.lock`` guards a pool's free lists, its
lent table and counters; device round trips run outside it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from npuemu.host.core import memory, runtime
from npuemu.host.core import stream as streams
from npuemu.host.core.runtime import Allocation, index
from npuemu.host.driver.interface import Link
from npuemu.shared import errors
from npuemu.shared.enums import MemLocationType, MemPoolAttr

__all__ = ["MemPool", "create", "destroy", "free_async", "get_attr", "malloc_async",
           "set_attr", "trim_to"]

_A = MemPoolAttr
_BOOL_ATTRS = (_A.ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES,
               _A.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC,
               _A.ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
_FOLLOW = int(_A.ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES)
_OPPORTUNISTIC = int(_A.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC)
_INTERNAL = int(_A.ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
_U64 = (1 << 64) - 1
_SMALL_LIMIT, _SMALL_ROUND, _LARGE_ROUND = 1 << 20, 512, 2 << 20


def _invalid(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


class _Block:
    __slots__ = ("alloc", "rounded", "seq", "stream")

    def __init__(self, alloc: Allocation, rounded: int) -> None:
        self.alloc = alloc
        self.rounded = rounded
        self.stream: streams.Stream | None = None  # freeing stream, while cached
        self.seq = 0  # its last task when the block was freed


@dataclass(eq=False)
class MemPool:
    """Host side of an ``aclrtMemPool``."""

    device: int
    link: Link
    max_size: int  # 0: no limit but the card's
    handle: int = 0
    destroyed: bool = False
    attrs: dict[int, int] = field(default_factory=lambda: {
        1: 1, 2: 1, 3: 1, int(_A.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD): 0})
    lock: threading.Lock = field(default_factory=threading.Lock)
    cached: dict[int, list[_Block]] = field(default_factory=dict)  # rounded size -> blocks
    lent: dict[int, _Block] = field(default_factory=dict)  # ptr -> block
    reserved: int = 0
    reserved_high: int = 0
    used: int = 0
    used_high: int = 0


# aclrtMemPoolCreate / Destroy -----------------------------------------------------------------
def create(props: object) -> MemPool:
    """Mirrors ``aclrtMemPoolCreate(&pool, props)``; ``props`` a dict with ``allocType``
    (0, pinned), ``handleType`` (0), ``location`` ``{"type": DEVICE (1), "id": device}`` and
    ``maxSize`` (bytes, 0 = the card's memory). Does not block. Returns the pool."""
    if not isinstance(props, dict):
        raise _invalid(f"pool props must be a dict, got {type(props).__name__}")
    rt = runtime.get()
    alloc_type = index(props.get("allocType", 0), errors.ACL_ERROR_INVALID_PARAM, "allocType")
    handle_type = index(props.get("handleType", 0), errors.ACL_ERROR_INVALID_PARAM,
                        "handleType")
    if alloc_type != 0 or handle_type != 0:
        raise _invalid(f"allocType {alloc_type} / handleType {handle_type}: only 0 (pinned, "
                       "no shareable handle) is supported")
    location = props.get("location", {})
    if not isinstance(location, dict):
        raise _invalid("location must be a dict {'type': ..., 'id': ...}")
    kind = index(location.get("type", MemLocationType.ACL_MEM_LOCATION_TYPE_DEVICE),
                 errors.ACL_ERROR_INVALID_PARAM, "location type")
    if kind != MemLocationType.ACL_MEM_LOCATION_TYPE_DEVICE:
        raise _invalid(f"location type {kind}: pools live in device memory (type 1)")
    dev = index(location.get("id", 0), errors.ACL_ERROR_INVALID_PARAM, "location id")
    if not 0 <= dev < len(rt.visible()):
        raise _invalid(f"location id {dev} is not a device")
    max_size = index(props.get("maxSize", 0), errors.ACL_ERROR_INVALID_PARAM, "maxSize")
    if max_size < 0:
        raise _invalid(f"maxSize {max_size} is negative")
    link = rt.open_device(dev).link
    return rt.register(MemPool(dev, link, max_size))


def lookup(handle: object) -> MemPool:
    return runtime.lookup(runtime.get().handles, handle, MemPool, "memory pool")


def destroy(handle: object) -> None:
    """Mirrors ``aclrtMemPoolDestroy``: gives every cached block back to the device (waiting,
    bounded by the card's liveness, for each freeing stream to pass its free). 107000 while
    blocks are still allocated from the pool."""
    pool = lookup(handle)
    with pool.lock:
        if pool.lent:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"memory pool {handle} still has {len(pool.lent)} blocks "
                                   "allocated (free them with mem_pool_free_async first)")
        pool.destroyed = True
    _release(pool, 0, wait=True)
    with runtime.get().lock:
        runtime.get().handles.pop(pool.handle, None)


# aclrtMemPoolMallocAsync / FreeAsync ----------------------------------------------------------
def malloc_async(size: object, handle: object, stream_handle: object) -> int:
    """Mirrors ``aclrtMemPoolMallocAsync(&ptr, size, pool, stream)``: a block usable by work
    queued on ``stream`` from now on. No round trip when the pool has a block it may reuse
    (module docstring). 100000 for size 0, 207001 when full."""
    if type(size) is not int or size <= 0:
        size = memory._check_size(size, "size")
    handles = runtime.get().handles
    pool = handles.get(handle) if type(handle) is int else None
    if type(pool) is not MemPool or pool.destroyed:
        pool = lookup(handle)  # raises what it raises
    stream = handles.get(stream_handle) if type(stream_handle) is int else None
    if type(stream) is not streams.Stream or stream.destroyed:
        stream = streams.resolve(stream_handle)  # the default stream, or the error
    if stream.link is not pool.link:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"stream of device {stream.device} used with a pool of "
                               f"device {pool.device}")
    rounded = (((size + _SMALL_ROUND - 1) & -_SMALL_ROUND) if size <= _SMALL_LIMIT
               else ((size + _LARGE_ROUND - 1) & -_LARGE_ROUND))
    block = freeing = None
    with pool.lock:
        blocks = pool.cached.get(rounded)
        if blocks:
            block = blocks[-1]
            if block.stream is stream and \
                    runtime.get().allocations.get(block.alloc.ptr) is block.alloc:
                blocks.pop()  # freed on this stream: reusable at once (the common case)
                return _lend(pool, block)
            block, freeing = _reusable(pool, blocks, stream)
            if freeing is None and block is not None:
                return _lend(pool, block)
    if block is not None and freeing is not None:  # (a block with none was lent above)
        # insert the dependency outside the pool's lock (it takes the link's)
        try:
            streams.order_after(stream, freeing)
        except BaseException:
            with pool.lock:
                pool.cached.setdefault(rounded, []).append(block)
            raise
        with pool.lock:
            return _lend(pool, block)
    if pool.max_size and pool.reserved + rounded > pool.max_size:
        _release(pool, pool.max_size - rounded, wait=False)
        if pool.reserved + rounded > pool.max_size:
            raise errors.error_for(errors.ACL_ERROR_RT_MEMORY_ALLOCATION,
                                   f"memory pool {pool.handle}: {rounded} more bytes exceed its "
                                   f"maxSize {pool.max_size} ({pool.reserved} reserved)")
    threshold = pool.attrs[int(_A.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD)]
    if pool.reserved > threshold:
        _release(pool, threshold, wait=False)
    ptr = _device_malloc(pool, rounded)
    block = _Block(runtime.get().allocations[ptr], rounded)
    with pool.lock:
        pool.reserved += block.alloc.span
        pool.reserved_high = max(pool.reserved_high, pool.reserved)
        return _lend(pool, block)


def _device_malloc(pool: MemPool, rounded: int) -> int:
    rt = runtime.get()
    if pool.device not in rt.devices:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"memory pool {pool.handle}: its device was reset")
    saved = getattr(rt.local, "ctx", None)
    rt.local.ctx = rt.devices[pool.device].primary if saved is None or \
        saved.device != pool.device else saved
    try:
        try:
            return memory.malloc(rounded, 0)
        except errors.AclError as err:
            if err.code != errors.ACL_ERROR_RT_MEMORY_ALLOCATION:
                raise
            _release(pool, 0, wait=False)  # give back what is ready, then try once more
            return memory.malloc(rounded, 0)
    finally:
        rt.local.ctx = saved


def _reusable(pool: MemPool, blocks: list[_Block], stream: streams.Stream
              ) -> tuple[_Block | None, streams.Stream | None]:
    """A block ``stream`` may have (module docstring), newest first, and the freeing stream
    it must be ordered after (None: no dependency to insert). Under ``pool.lock``."""
    attrs, allocations = pool.attrs, runtime.get().allocations
    for i in range(len(blocks) - 1, -1, -1):
        block = blocks[i]
        if allocations.get(block.alloc.ptr) is not block.alloc:  # its device was reset
            del blocks[i]
            continue
        freed = block.stream
        assert freed is not None  # a cached block keeps its freeing stream
        if freed is stream or (attrs[_FOLLOW] and streams.follows(stream, freed, block.seq)) \
                or (attrs[_OPPORTUNISTIC] and freed.done(block.seq)):
            del blocks[i]
            return block, None
    if attrs[_INTERNAL] and blocks:
        block = blocks.pop()
        assert block.stream is not None
        if not block.stream.destroyed:
            return block, block.stream
        return block, None  # a destroyed stream's tasks all ran before its handle went
    return None, None


def _lend(pool: MemPool, block: _Block) -> int:
    ptr = block.alloc.ptr
    pool.lent[ptr] = block
    _owners[ptr] = pool
    block.stream = None
    used = pool.used + block.rounded
    pool.used = used
    if used > pool.used_high:
        pool.used_high = used
    return ptr


def free_async(ptr: object, stream_handle: object) -> None:
    """Mirrors ``aclrtMemPoolFreeAsync(ptr, stream)``: the block returns to its pool once the
    work queued on ``stream`` so far is done (no round trip; nothing waits). 107000 if
    ``ptr`` is not a block allocated from a live pool."""
    stream = runtime.get().handles.get(stream_handle) if type(stream_handle) is int else None
    if type(stream) is not streams.Stream or stream.destroyed:
        stream = streams.resolve(stream_handle)  # the default stream, or the error
    pool = _owners.get(ptr) if type(ptr) is int else None
    if type(ptr) is not int or pool is None or pool.link is not stream.link:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"{ptr!r} is not a block of a memory pool on the stream's device")
    with pool.lock:
        block = pool.lent.pop(ptr, None)
        if block is None:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{ptr:x} was already freed")
        del _owners[ptr]
        block.stream, block.seq = stream, stream.submitted
        pool.used -= block.rounded
        same = pool.cached.get(block.rounded)
        if same is None:
            pool.cached[block.rounded] = [block]
        else:
            same.append(block)


def _forget(link: Link) -> None:
    """The card is released (runtime close hook, under ``Runtime.lock``): its pools' blocks
    go with it, without leak reports."""
    allocations = runtime.get().allocations
    for ptr, pool in list(_owners.items()):
        if pool.link is link:
            del _owners[ptr]
    for obj in list(runtime.get().handles.values()):
        if type(obj) is MemPool and obj.link is link:
            with obj.lock:
                for block in [*obj.lent.values(),
                              *(b for bl in obj.cached.values() for b in bl)]:
                    allocations.pop(block.alloc.ptr, None)
                obj.lent.clear()
                obj.cached.clear()
                obj.reserved = obj.used = 0


_owners: dict[int, MemPool] = {}  # ptr -> pool, of blocks lent (dict ops are atomic)
runtime.on_close_device(_forget)


# aclrtMemPoolTrimTo / attributes -------------------------------------------------------------
def trim_to(handle: object, keep: object) -> None:
    """Mirrors ``aclrtMemPoolTrimTo(pool, minBytesToKeep)``: give cached blocks whose
    freeing stream has passed the free back to the device until the pool reserves at most
    ``max(keep, used)`` bytes. Does not wait."""
    pool = lookup(handle)
    keep = index(keep, errors.ACL_ERROR_INVALID_PARAM, "minBytesToKeep")
    if keep < 0:
        raise _invalid(f"minBytesToKeep {keep} is negative")
    _release(pool, keep, wait=False)


def _release(pool: MemPool, keep: int, wait: bool) -> None:
    """Free cached blocks (largest first) until ``reserved <= keep``; ``wait``: also those
    whose freeing stream has not passed the free yet (waiting for it, bounded)."""
    victims = []
    with pool.lock:
        for rounded in sorted(pool.cached, reverse=True):
            blocks = pool.cached[rounded]
            for block in list(blocks):
                if pool.reserved <= keep:
                    break
                if wait or block.stream is None or block.stream.done(block.seq) or \
                        block.stream.destroyed:
                    blocks.remove(block)
                    pool.reserved -= block.alloc.span
                    victims.append(block)
    allocations = runtime.get().allocations
    for block in victims:
        s = block.stream
        if wait and s is not None and not s.destroyed:
            pool.link.wait_until(streams.done_or_hung(s, block.seq), None)
        if allocations.get(block.alloc.ptr) is block.alloc:
            memory.free(block.alloc.ptr)
    if victims:
        memory.flush_frees(pool.link)


def set_attr(handle: object, attr: object, value: object) -> None:
    """Mirrors ``aclrtMemPoolSetAttr``: the REUSE_* switches (0/1), RELEASE_THRESHOLD
    (bytes), and RESERVED_MEM_HIGH / USED_MEM_HIGH (0 only: restart). 100000 otherwise."""
    pool = lookup(handle)
    attr = index(attr, errors.ACL_ERROR_INVALID_PARAM, "attr")
    value = index(value, errors.ACL_ERROR_INVALID_PARAM, "value")
    with pool.lock:
        if attr in _BOOL_ATTRS:
            if value not in (0, 1):
                raise _invalid(f"attribute {attr} takes 0 or 1, got {value}")
            pool.attrs[attr] = value
        elif attr == _A.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD:
            if not 0 <= value <= _U64:
                raise _invalid(f"release threshold {value} is not a u64")
            pool.attrs[attr] = value
        elif attr in (_A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH,
                      _A.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH):
            if value != 0:
                raise _invalid(f"attribute {attr} can only be reset to 0")
            if attr == _A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH:
                pool.reserved_high = pool.reserved
            else:
                pool.used_high = pool.used
        else:
            raise _invalid(f"attribute {attr} cannot be set")


def get_attr(handle: object, attr: object) -> int:
    """Mirrors ``aclrtMemPoolGetAttr``: the value of an aclrtMemPoolAttr (100000 if unknown)."""
    pool = lookup(handle)
    attr = index(attr, errors.ACL_ERROR_INVALID_PARAM, "attr")
    with pool.lock:
        if attr in pool.attrs:
            return pool.attrs[attr]
        values: dict[int, int] = {
            _A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT: pool.reserved,
            _A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH: pool.reserved_high,
            _A.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT: pool.used,
            _A.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH: pool.used_high}
    if attr not in values:
        raise _invalid(f"{attr} is not an aclrtMemPoolAttr")
    return values[attr]
