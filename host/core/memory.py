"""Memory management (``aclrtMalloc``, ``aclrtMemcpy`` and friends), raising AclError.

Where the bytes move (each byte moves once):

| kind | who copies                                   | how                              |
|------|----------------------------------------------|----------------------------------|
| H2D  | this process, into its mapping of the arena  | ``ctypes.memmove`` (GIL released)|
| D2H  | this process, out of its mapping             | ``ctypes.memmove``               |
| D2D  | the DMA engine (worker) of the current device| one request, ``memmove`` there;  |
|      | (P2P: arena to arena, needs peer access)     | the worker maps the peer's arena |
| D2D  | small (``SMALL_COPY_BYTES``) within the      | ``ctypes.memmove`` between this  |
| small| current card: this process                   | process's mappings of the arena  |
| H2H  | this process                                 | ``ctypes.memmove``               |

(A host<->device copy whose ends sit a few bytes apart modulo 4 KiB, as a numpy buffer and
device memory do, goes through a bounce buffer instead: ``move``, ``shared/memcopy.py``.)

A synchronous copy of at most ``SMALL_COPY_BYTES`` with plain int arguments takes one short
path (``small_copy``): the same checks, made once each (from what an earlier call left
while it still holds), one slice assignment between memoryviews (GIL held: at most 64 KiB)
and no request to the card; a small D2D copy goes that way only while the card has never
had a fault injected (an injected DMA fault or isolated page is the card's to report: such
copies take the request). ``aclrtMemcpy`` does not synchronise with any stream (CANN's
documentation: synchronous, no implicit stream sync), so the short path does not wait for
queued tasks either. It polls the worker's liveness at most every
``LIVENESS_POLL_NS`` per card (the poll is a system call, more than the copy of a few KiB).

Device pointers are checked against this process's live allocations before any byte moves:
unknown, freed, foreign (another process's) and out-of-range pointers give
``ACL_ERROR_RT_PARAM_INVALID`` (107000; our choice, the exact code is not documented).
Host pointers are checked against this process's mappings (``hostmem.HostMaps``).

Threading model: any thread may call in. ``Runtime.lock`` guards ``allocations`` and
``starts`` together (malloc, free, reset); ``find`` reads them without it and tolerates a
concurrent change (a block freed meanwhile is simply not found: 107000). The short path's
memos, ``_polled`` (last liveness poll per card), ``_recent_dst``/``_recent_src`` (last
blocks found) and ``_host_read``/``_host_write`` (last host ranges checked), are read and
replaced without a lock, each in one store: a memo is used only once it is shown still
valid (the block still in ``allocations``, the range's ``HostMaps.cache`` still current), so
a lost update only costs one more lookup or poll. Each thread has its own bounce buffer
(``move``). The pinned and staging pools, host maps and links have their own locks
(``host/driver/``).
"""

from __future__ import annotations

import bisect
import ctypes
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from npuemu.host.core import capture, freebatch, p2p, plog, runtime
from npuemu.host.core import stream as streams
from npuemu.host.core.runtime import Allocation, index
from npuemu.host.driver.interface import Link
from npuemu.shared import address, config, errors, logring, memcopy, shm
from npuemu.shared.enums import MemAttr, MemcpyKind, MemLocationType
from npuemu.shared.protocol import Op

_HOST_LIMIT = 1 << 47
"""No host can pin more than its user address space (47 bits on x86-64 and arm64)."""
_K = MemcpyKind
# kind -> (source is device, destination is device)
_DIRECTIONS: dict[int, tuple[bool, bool]] = {
    _K.ACL_MEMCPY_HOST_TO_HOST: (False, False),
    _K.ACL_MEMCPY_HOST_TO_DEVICE: (False, True),
    _K.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: (False, True),
    _K.ACL_MEMCPY_DEVICE_TO_HOST: (True, False),
    _K.ACL_MEMCPY_DEVICE_TO_DEVICE: (True, True),
    _K.ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: (True, True),
    _K.ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: (True, True),
}


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, detail)


def _check_size(value: object, what: str, allow_zero: bool = False) -> int:
    value = index(value, errors.ACL_ERROR_INVALID_PARAM, what)
    if value < 0 or (value == 0 and not allow_zero):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"{what} {value!r} is invalid")
    return value


def _check_ptr(value: object) -> int:
    value = index(value, errors.ACL_ERROR_INVALID_PARAM, "pointer")
    if value <= 0:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"pointer {value!r} is null")
    return value


# aclrtMalloc / aclrtFree ---------------------------------------------------------------------
Tracer = Callable[[Link, str, int, int, int, str], object]
_tracers: list[Tracer] = []


def on_trace(hook: Tracer) -> None:
    """Call ``hook(link, action, ptr, span, size, stack)`` for each traced malloc
    (``"malloc"``) and free (``"free"``) while ``NPUEMU_TRACK_ALLOC=1`` (the caching
    allocator keeps them as torch's ``device_traces``; this module does not import it)."""
    _tracers.append(hook)


def malloc(size: int, policy: int = 0, traced: bool = True) -> int:
    """Mirrors ``aclrtMalloc`` on the current device; one round trip to the worker (blocks
    for ~10 us), none when a free of the same size and policy is still waiting
    (``freebatch.py``). Returns the device pointer. 100000 for size 0, 207001 when out of
    memory. ``traced=False``: the caller (the caching allocator) traces the block itself.
    The ``ACL_MEM_TYPE_HIGH_BAND_WIDTH`` / ``LOW_BAND_WIDTH`` modifiers are accepted for
    compatibility only: a card's HBM is one arena, every block of it alike."""
    if type(size) is not int or size <= 0:
        size = _check_size(size, "size")
    if type(policy) is not int or policy < 0:
        policy = _check_size(policy, "policy", allow_zero=True)
    rt = runtime.get()
    link = rt.current_link()
    with rt.lock:  # a free of the same size still waiting (freebatch.py): no round trip
        again = freebatch.take(link, size, policy)
        if again is None:
            freebatch.flush(link)  # this malloc may need the room they give back
    ptr: int
    if again is None:
        ptr, span, page_class = link.call(Op.MALLOC, size, policy)
    else:
        try:
            freebatch.check_alive(link)  # as the round trip would have found out
        except errors.AclError:
            with rt.lock:
                freebatch.defer(again)  # not ours again; the card is gone anyway
            raise
        ptr, span, page_class = again.ptr, again.span, again.page_class
    # NPUEMU_TRACK_ALLOC=1: record the Python stack (for leak reports; ~20 us a malloc)
    stack = "".join(traceback.format_stack(limit=8)[:-1]) if rt.config.track_alloc else ""
    with rt.lock:
        rt.allocations[ptr] = Allocation(ptr, size, span, page_class, policy, link, stack)
        bisect.insort(rt.starts, ptr)
    if stack and traced:
        for hook in _tracers:
            hook(link, "malloc", ptr, span, size, stack)
    if plog.debug:
        plog.log(logring.DEBUG, f"malloc size={size} policy={policy:#x} ptr=0x{ptr:x} "
                                f"device={link.logical}")
    return ptr


def malloc_align32(size: int, policy: int = 0) -> int:
    """Mirrors ``aclrtMallocAlign32``: like ``malloc`` (one round trip), but the block is
    ``size`` rounded up to 32 bytes, without the 32 bytes of padding ``aclrtMalloc`` adds
    (a block of the NORMAL class still takes a multiple of 64 of the card's memory here)."""
    size = _check_size(size, "size")
    rounded = -(-size // 32) * 32
    ptr = malloc(max(1, rounded - 32), policy)  # the card adds the 32 bytes back
    rt = runtime.get()
    with rt.lock:
        alloc = rt.allocations[ptr]
        alloc.size = min(alloc.span, max(rounded, alloc.size))
    return ptr


def free(ptr: int, traced: bool = True) -> None:
    """Mirrors ``aclrtFree``. Does not wait: the free is queued to the worker in order with
    this process's later requests (blocks up to 1 MiB: batched, ``freebatch.py``). 107000
    if ``ptr`` is not the start of a live block."""
    rt = runtime.get()
    with rt.lock:
        alloc = rt.allocations.pop(ptr, None) if type(ptr) is int else None
        if alloc is None:
            raise _param(f"{ptr!r} is not a live device allocation of this process")
        del rt.starts[bisect.bisect_left(rt.starts, ptr)]
        freebatch.check_alive(alloc.link)  # a lost or stopped card fails as a post would
        deferred = freebatch.defer(alloc)  # posted with the next request that needs it
    if not deferred:
        alloc.link.post(Op.FREE, ptr)
    if alloc.stack and traced:
        stack = "".join(traceback.format_stack(limit=8)[:-1])
        for hook in _tracers:
            hook(alloc.link, "free", ptr, alloc.span, alloc.size, stack)
    if plog.debug:
        plog.log(logring.DEBUG, f"free ptr=0x{ptr:x}")


def flush_frees(link: Link, only_if_waiting: bool = False) -> None:
    """Post the card's batched frees (before a request whose answer depends on them, or a
    kernel launch: its pointers are checked by the worker). ``only_if_waiting``: skip the
    lock when nothing waits (a racing free of another thread is the program's race)."""
    if only_if_waiting and not freebatch.waiting():
        return
    rt = runtime.get()
    with rt.lock:
        freebatch.flush(link)


def leak_report() -> list[dict[str, Any]]:
    """Device allocations this process still holds: ptr, size, policy, device and (with
    ``NPUEMU_TRACK_ALLOC=1``) the Python stack that allocated each."""
    rt = runtime.get()
    with rt.lock:
        return [{"ptr": a.ptr, "size": a.size, "policy": a.policy, "device": a.link.logical,
                 "stack": a.stack} for a in rt.allocations.values()]


USAGE_COMPONENTS: list[Callable[[Link], dict[str, Any] | None]] = []
"""Features add ``fn(link) -> {"name", "curMemSize", "memPeakSize"} | None`` here to show
their own part of this process's usage (e.g. ``host/ops``: "op kernels")."""


def get_mem_usage_info(dev: int) -> list[dict[str, Any]]:
    """Mirrors ``aclrtGetMemUsageInfo``: one entry per component, largest current usage
    first. Components here are the host processes using the card (``"pid <n>"``, from the
    device's per-client accounting), ``"total"``, and the parts features register in
    ``USAGE_COMPONENTS`` (included in their process's figure); names are our choice."""
    link = runtime.get().open_device(dev).link
    flush_frees(link)
    link.call(Op.PING)  # frees queued before are counted
    mem = link.memory_usage()
    entries = [{"name": "total", "curMemSize": mem.hbm_used + mem.ddr_used,
                "memPeakSize": mem.hbm_peak + mem.ddr_peak}]
    entries += [{"name": f"pid {c.pid}", "curMemSize": c.used, "memPeakSize": c.peak}
                for c in link.client_usage()]
    entries += [e for e in (fn(link) for fn in USAGE_COMPONENTS) if e is not None]
    return sorted(entries, key=lambda e: -e["curMemSize"])


def find(ptr: int, count: int) -> Allocation:
    """The live allocation holding ``[ptr, ptr+count)``; 107000 otherwise. Lock-free when
    found; a miss is confirmed under ``Runtime.lock`` (another thread may be changing the
    tables)."""
    rt = runtime.get()
    alloc = _containing(rt, ptr)
    if alloc is None or ptr + count > alloc.ptr + alloc.size:
        with rt.lock:
            alloc = _containing(rt, ptr)
        if alloc is None:
            raise _param(f"0x{ptr:x} is not in a live device allocation of this process")
        if ptr + count > alloc.ptr + alloc.size:
            raise _param(f"0x{ptr:x}+{count} runs past its allocation (0x{alloc.ptr:x}, "
                         f"{alloc.size} bytes)")
    return alloc


def _containing(rt: runtime.Runtime, ptr: int) -> Allocation | None:
    starts = rt.starts
    i = bisect.bisect_right(starts, ptr) - 1
    try:
        alloc = rt.allocations.get(starts[i]) if i >= 0 else None
    except IndexError:  # the list shrank meanwhile (a free in another thread)
        return None
    if alloc is None or not alloc.ptr <= ptr < alloc.ptr + alloc.size:
        return None
    return alloc


def _device_address(ptr: int, count: int) -> tuple[Allocation, int]:
    """Validated allocation and the address of ``ptr`` in this process's arena mapping.
    (The mapping outlives the worker, so the caller checks liveness after the copy.)"""
    alloc = find(ptr, count)
    return alloc, _mapped(alloc, ptr, count)


def _mapped(alloc: Allocation, ptr: int, count: int) -> int:
    """The address in this process of ``[ptr, ptr+count)`` of ``alloc`` (checked by
    ``find``): 507054 if it touches an isolated HBM page; far pages mapped first."""
    link = alloc.link
    if link.poisoned(ptr, count):
        raise errors.error_for(errors.ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR,
                               f"0x{ptr:x}+{count} touches an isolated HBM page")
    rel = ptr - _DEVICE_BASE  # address.decode without the call: the arena bit, the offset
    arena, offset = (rel >> _ARENA_SHIFT) & 1, rel & _OFFSET_MASK
    if offset + count > link.arena_near[arena]:  # a block of far pages (shared/pages.py)
        link.far[arena].ensure_range(offset, count)
    return link.arena_addr[arena] + offset


_ARENA_SHIFT = address.ARENA_STRIDE.bit_length() - 1
_OFFSET_MASK = address.ARENA_STRIDE - 1


def host_view(ptr: int, count: int) -> memoryview:
    """The host's mapping of ``count`` bytes of device memory at ``ptr`` as a writable
    ``memoryview`` (no copy): what host↔device copies read and write. The range is checked
    like a copy's (107000 if it is not inside one live allocation of this process; 507054 if
    it touches an isolated HBM page). No ``aclrt`` counterpart: the emulator's host-side
    access for transports such as MPI (``host/hccl/mpi.py``). Valid until the allocation is
    freed; the caller checks the card is alive after using it. Does not block."""
    if count == 0:
        return memoryview(bytearray(0))
    _alloc, addr = _device_address(ptr, count)
    return memoryview((ctypes.c_char * count).from_address(addr)).cast("B")


def malloc_host(size: int) -> int:
    """Mirrors ``aclrtMallocHost``: pinned host memory (shared memory the devices can map).
    100000 for size 0; 200000 (ACL_ERROR_BAD_ALLOC) when it cannot be had."""
    size = _check_size(size, "size")
    if size > _HOST_LIMIT:
        raise errors.error_for(errors.ACL_ERROR_BAD_ALLOC, f"pinned host memory of {size} bytes")
    rt = runtime.get()
    rt.ensure_node()
    assert rt.pinned is not None
    return rt.pinned.malloc(size)


def free_host(ptr: int) -> None:
    """Mirrors ``aclrtFreeHost``. 107000 for anything but a live ``malloc_host`` block."""
    rt = runtime.get()
    if type(ptr) is not int:
        ptr = index(ptr, errors.ACL_ERROR_RT_PARAM_INVALID, "pointer")
    if rt.pinned is None:
        raise _param(f"{ptr!r} is not a block from malloc_host")
    rt.pinned.free(ptr)
    rt.host_maps.invalidate()
    for od in list(rt.devices.values()):
        if ptr in od.link.pinned:
            od.link.pinned.discard(ptr)
            od.link.post(Op.UNPIN, ptr)


# aclrtMemcpy / aclrtMemset ------------------------------------------------------------------
SMALL_COPY_BYTES = 64 * 1024
"""A synchronous copy of at most this many bytes takes the short path (module docstring)."""


def memcpy(dst: int, dst_max: int, src: int, count: int, kind: int) -> None:
    """Mirrors ``aclrtMemcpy`` (synchronous; no implicit stream sync). The direction comes
    from the addresses, as the real driver does: ``kind`` must be an aclrtMemcpyKind but is
    not checked against them (except ``INNER_DEVICE_TO_DEVICE`` between two cards, refused:
    our choice). ``count > dst_max`` gives 107000, as the rt layer's parameter
    check does (``RT_ERROR_INVALID_VALUE``)."""
    if small_copy(dst, dst_max, src, count, kind):
        return
    _kind(kind)
    dst, src, count, direction = _copy_args(dst, dst_max, src, count, _K.ACL_MEMCPY_DEFAULT,
                                            allow_zero=True)
    if count == 0:
        return
    runtime.get().current()
    capture.check_mode("aclrtMemcpy")  # 107030 while a capture's mode forbids it
    if direction == (True, True):  # INNER_DEVICE_TO_DEVICE across two cards is refused
        _d2d(dst, src, count, kind)
    elif direction == (False, True):
        _h2d(dst, src, count)
    elif direction == (True, False):
        _d2h(dst, src, count)
    else:
        _h2h(dst, src, count)


def _copy_args(dst: object, dst_max: object, src: object, count: object, kind: int,
               allow_zero: bool) -> tuple[int, int, int, tuple[bool, bool]]:
    """The argument checks both memcpy calls make; returns ``(dst, src, count, (source on
    a device, destination on a device))``."""
    dst_max = _check_size(dst_max, "dst_max", allow_zero=True)
    count = _check_size(count, "count", allow_zero=allow_zero)
    if count > dst_max:
        raise _param(f"count {count} exceeds dst_max {dst_max}")
    dst, src = _check_ptr(dst), _check_ptr(src)
    return dst, src, count, _direction(dst, src, kind)


def small_copy(dst: object, dst_max: object, src: object, count: object,
               kind: object) -> bool:
    """The short path of ``memcpy`` (``aclrtMemcpy``; blocks only for the copy itself): True
    once copied; False, nothing done, for what takes the general path: arguments that are
    not plain ints, ``count`` 0 or above ``SMALL_COPY_BYTES`` or ``dst_max``, a kind that is
    not a plain H2D, D2H or D2D one, a pointer that is not of its side (null, virtual, a host
    pointer in the device window), no usable context, or a D2D copy that is not within the
    current card or whose card had a fault injected (the card's DMA engine reports those).

    The general path's checks in its order, each made once, and each from what an earlier
    call left when it still holds (nothing is rebuilt per call): the capture mode; the host
    end's mapping (the range of the last hit in ``HostMaps.cache``, kept while that cache
    is the same); each device end's block (the last block found, kept while the table still
    maps its start to it: a freed block is not); isolated pages; then the copy, one slice
    assignment between memoryviews of the block and of the host range (made once each,
    ``Allocation.view`` and ``_host_memo``: a ``ctypes.memmove`` costs twice as much), and a
    liveness check (at most every ``LIVENESS_POLL_NS``). Any miss takes the general checks,
    with their codes."""
    global _host_read, _host_write, _recent_dst, _recent_src
    if (type(count) is not int or type(dst_max) is not int or type(dst) is not int
            or type(src) is not int or type(kind) is not int
            or not 0 < count <= SMALL_COPY_BYTES or count > dst_max):
        return False
    if kind == _H2D:
        if not (_DEVICE_BASE <= dst < _DEVICE_END) or not (0 < src < _DEVICE_BASE
                                                          or src >= _VIRT_END):
            return False
    elif kind == _D2H:
        if not (_DEVICE_BASE <= src < _DEVICE_END) or not (0 < dst < _DEVICE_BASE
                                                          or dst >= _VIRT_END):
            return False
    elif kind != _D2D or not (_DEVICE_BASE <= src < _DEVICE_END
                              and _DEVICE_BASE <= dst < _DEVICE_END):
        return False
    rt = runtime._runtime or runtime.get()  # the attribute: one call less per copy
    try:
        context: runtime.Context | None = rt.local.ctx
    except AttributeError:
        return False  # the general path raises 107002
    if context is None or context.destroyed or rt.forked:
        return False  # the general path raises 107002 or 207000
    if _CAPTURES[0] or _CAPTURES[1] or _CAPTURES[2]:
        capture.check_mode("aclrtMemcpy")  # 107030 while a capture's mode forbids it
    allocations = rt.allocations
    if kind == _D2D:
        link = rt.devices[context.device].link
        alloc = _recent_dst = _live(_recent_dst, dst, count, allocations)
        src_alloc = _recent_src = _live(_recent_src, src, count, allocations)
        if alloc.link is not link or src_alloc.link is not link or link.faults_injected():
            return False
        view, src_view = alloc.view or _view(alloc), src_alloc.view or _view(src_alloc)
        if view is _FAR or src_view is _FAR:
            _memmove(_mapped(alloc, dst, count), _mapped(src_alloc, src, count), count)
        else:
            words, at = link.poison_word  # one word read while no page is isolated
            if words[at] and (link.poisoned(dst, count) or link.poisoned(src, count)):
                _mapped(alloc, dst, count)  # raises 507054 for the page it names
                _mapped(src_alloc, src, count)
            o, p = dst - alloc.ptr, src - src_alloc.ptr
            view[o : o + count] = src_view[p : p + count]
    else:
        maps = rt.host_maps
        if kind == _H2D:
            dev, host, memo = dst, src, _host_read
            if not (memo[0] <= src and src + count <= memo[1] and memo[2] is maps.cache):
                memo = _host_read = _host_memo(maps, src, count, False)
        else:
            dev, host, memo = src, dst, _host_write
            if not (memo[0] <= dst and dst + count <= memo[1] and memo[2] is maps.cache):
                memo = _host_write = _host_memo(maps, dst, count, True)
        alloc = _recent_dst  # _live, written out (a call is a tenth of a small copy)
        if not (alloc.ptr <= dev and dev + count <= alloc.ptr + alloc.size
                and allocations.get(alloc.ptr) is alloc):
            alloc = _recent_dst = find(dev, count)
        link, view = alloc.link, alloc.view or _view(alloc)
        if view is _FAR:
            addr = _mapped(alloc, dev, count)
            move(addr, host, count) if kind == _H2D else move(host, addr, count)
        else:
            words, at = link.poison_word  # one word read while no page is isolated
            if words[at] and link.poisoned(dev, count):
                _mapped(alloc, dev, count)  # raises 507054 for the page it names
            here = dev + alloc.mapped - alloc.ptr  # the device end's address here
            o, p = dev - alloc.ptr, host - memo[0]
            if kind == _H2D:
                if count < SPLIT_MIN_BYTES or not 0 < (here - host) & 4095 <= _SMALL_WINDOW:
                    view[o : o + count] = memo[3][p : p + count]
                else:
                    _put_aliased(view, o, memo[3], p, count, host)
            elif count < SPLIT_MIN_BYTES or not 0 < (host - here) & 4095 <= _SMALL_WINDOW:
                memo[3][p : p + count] = view[o : o + count]
            else:
                _put_aliased(memo[3], p, view, o, count, here)
    now = _monotonic_ns()  # the liveness poll, at most every LIVENESS_POLL_NS per card
    if link.lost_detail or now - _polled.get(link, 0) >= LIVENESS_POLL_NS:
        link.check_alive()  # a device that died during the copy fails the copy
        _polled[link] = now
    return True


def _live(recent: Allocation, ptr: int, count: int, allocations: dict[int, Allocation]
          ) -> Allocation:
    """``recent`` if it holds ``[ptr, ptr+count)`` and is still live (the table still maps
    its start to it: a freed block is not), else ``find``'s block (raises its codes)."""
    if recent.ptr <= ptr and ptr + count <= recent.ptr + recent.size \
            and allocations.get(recent.ptr) is recent:
        return recent
    return find(ptr, count)


def _put_aliased(dst: memoryview, d: int, src: memoryview, s: int, count: int,
                 src_addr: int) -> None:
    """``dst[d:d+count] = src[s:s+count]`` for a short host<->device copy whose ends alias
    (``memcopy.SMALL_WINDOW``; ``src_addr``: the source's address): in two halves up to
    ``SPLIT_MAX_BYTES``, else through this thread's bounce buffer placed 2 KiB off the
    source's page offset."""
    if count <= SPLIT_MAX_BYTES:  # each half below glibc's ``rep movsb`` threshold
        half = count >> 1
        dst[d : d + half] = src[s : s + half]
        dst[d + half : d + count] = src[s + half : s + count]
    else:
        try:
            base, bounce = _bounce.view
        except AttributeError:
            base, bounce = _bounce_view()
        at = (src_addr + 2048 - base) & 4095
        bounce[at : at + count] = src[s : s + count]
        dst[d : d + count] = bounce[at : at + count]


def _view(alloc: Allocation) -> memoryview:
    """Make ``alloc.mapped`` and ``alloc.view`` (once per block). A block in far pages
    (``shared/pages.py``) has them all mapped here first: they stay at those addresses while
    the block lives (a far page is remapped only once its block is freed and the page used
    again). ``_FAR`` if that fails (such copies take ``_mapped``, which says why)."""
    rel = alloc.ptr - _DEVICE_BASE
    arena, offset = (rel >> _ARENA_SHIFT) & 1, rel & _OFFSET_MASK
    link = alloc.link
    if offset + alloc.span > link.arena_near[arena]:
        try:
            link.far[arena].ensure_range(offset, alloc.span)
        except errors.AclError:
            alloc.mapped, alloc.view = -1, _FAR
            return _FAR
    alloc.mapped = link.arena_addr[arena] + offset
    view: memoryview = _memory_view(alloc.mapped, alloc.span, _WRITABLE)
    alloc.view = view
    return view


def _host_memo(maps: Any, addr: int, count: int,
               write: bool) -> tuple[int, int, object, memoryview]:
    """``(lo, hi, token, view)``: ``HostMaps.covering`` (its checks and codes) of
    ``[addr, addr+count)`` with a memoryview of ``[lo, hi)``; when the maps were reloaded
    meanwhile, just this range with a token that never matches (the next call checks
    again)."""
    lo, hi, token = maps.covering(addr, count, write)
    if token is None:
        lo, hi = addr, addr + count
    return lo, hi, token, _memory_view(lo, hi - lo, _WRITABLE if write else _READ_ONLY)


def _bounce_view() -> tuple[int, memoryview]:
    """This thread's bounce buffer as ``(address, memoryview)``, made once."""
    buf = memcopy.small_buffer()
    view = _bounce.view = (ctypes.addressof(buf), memoryview(buf).cast("B"))
    return view


_memory_view = ctypes.pythonapi.PyMemoryView_FromMemory
_memory_view.restype = ctypes.py_object
_memory_view.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
_READ_ONLY, _WRITABLE = 0x100, 0x200  # PyBUF_READ, PyBUF_WRITE


class _NoBlock:
    """A stand-in for "no block yet" in the short path's recent-block slots: contains
    nothing (``ptr`` 0, ``size`` 0, and 0 is never a device pointer)."""

    ptr = size = 0


_FAR = memoryview(b"")
"""``Allocation.view`` of a block with far pages (falsy, like None: tested by identity)."""
_NO_BLOCK: Any = _NoBlock()
_recent_dst: Allocation = _NO_BLOCK
"""The block the short path last found for the device end of an H2D or D2H copy, or the
destination of a D2D one; any thread reads and replaces it (used only after the table
shows it is still live, so a stale one costs one ``find``)."""
_recent_src: Allocation = _NO_BLOCK
"""Likewise for the source of a D2D copy."""
_host_read: tuple[int, int, object, memoryview] = (0, 0, None, memoryview(b""))
"""``_host_memo`` of the last H2D copy's source (readable)."""
_host_write: tuple[int, int, object, memoryview] = (0, 0, None, memoryview(b""))
"""Likewise for the destination of a D2H copy (writable)."""
_CAPTURES = capture.ACTIVE


LIVENESS_POLL_NS = 200_000
"""The short path asks the link whether its worker lives (``Link.check_alive``: a system
call to poll the worker's process, ~1 us in a VM) at most once per this many ns per card;
between two polls it reads the link's verdict (``lost_detail``) only. A card whose worker
died less than this long ago, unnoticed by any call yet, may still take one small copy into
its memory (the bytes land in this process's mapping of the arena, which outlives the
worker): the next call that polls fails."""
_polled: dict[Link, int] = {}
"""Link -> ``monotonic_ns`` of the short path's last poll of it (any thread reads and
writes it; a lost update only means one more poll)."""


def _forget_link(link: Link) -> None:
    global _recent_dst, _recent_src
    _polled.pop(link, None)
    _recent_dst = _recent_src = _NO_BLOCK  # let the closed link's blocks go


runtime.on_close_device(_forget_link)

SPLIT_MIN_BYTES, SPLIT_MAX_BYTES = 2048, 4096
"""An aliased short copy (``small_copy``; aliased: ``memcopy.SMALL_WINDOW``) of this many
bytes goes in two halves instead of through the bounce buffer, each half below glibc's
``rep movsb`` threshold (2112 bytes on cores with FSRM, more on others), so neither aliases
and no byte is copied twice (measured, 4 KiB D2H into numpy: 1.7 us direct, 0.85 through
the bounce buffer, 0.62 in halves); above it, the bounce buffer."""
_bounce = threading.local()
"""Each thread's memoryview of its bounce buffer (``memcopy.small_buffer``), for
``_put_aliased``."""
move = memcopy.move
"""Host<->device copies: ``memmove`` around 4K aliasing (``shared/memcopy.py``)."""


_memmove = ctypes.memmove
_SMALL_WINDOW = memcopy.SMALL_WINDOW
_monotonic_ns = time.monotonic_ns
_H2D = int(_K.ACL_MEMCPY_HOST_TO_DEVICE)
_D2H = int(_K.ACL_MEMCPY_DEVICE_TO_HOST)
_D2D = int(_K.ACL_MEMCPY_DEVICE_TO_DEVICE)
_DEVICE_BASE, _DEVICE_END = address.DEVICE_VA_BASE, address.DEVICE_VA_END
_VIRT_END = address.VIRT_END


def _h2h(dst: int, src: int, count: int) -> None:
    maps = runtime.get().host_maps
    maps.check(src, count, write=False)
    maps.check(dst, count, write=True)
    ctypes.memmove(dst, src, count)


def _h2d(dst: int, src: int, count: int) -> None:
    runtime.get().host_maps.check(src, count, write=False)
    alloc, dst_addr = _device_address(dst, count)
    move(dst_addr, src, count)
    alloc.link.check_alive()  # a device that died during the copy fails the copy


def _d2h(dst: int, src: int, count: int) -> None:
    runtime.get().host_maps.check(dst, count, write=True)
    alloc, src_addr = _device_address(src, count)
    move(dst, src_addr, count)
    alloc.link.check_alive()


def _d2d(dst: int, src: int, count: int, kind: int) -> None:
    """Run by the current device's DMA engine; between two cards it needs peer access."""
    dst_alloc, src_alloc = find(dst, count), find(src, count)
    rt = runtime.get()
    executor = rt.current().device
    _check_inner(kind, src_alloc, dst_alloc)
    p2p.check_copy(executor, src_alloc.link.logical, dst_alloc.link.logical)
    for alloc in (dst_alloc, src_alloc):
        alloc.link.check_alive()
    try:
        rt.devices[executor].link.call(Op.COPY, dst, src, count)
    except errors.AclError:
        for alloc in (dst_alloc, src_alloc):  # a peer that died mid-copy: device lost
            alloc.link.check_alive()
        raise


def _check_inner(kind: int, src: Allocation, dst: Allocation) -> None:
    if kind == _K.ACL_MEMCPY_INNER_DEVICE_TO_DEVICE and src.link is not dst.link:
        raise _param("ACL_MEMCPY_INNER_DEVICE_TO_DEVICE between two devices")



def memset(ptr: int, max_count: int, value: int, count: int) -> None:
    """Mirrors ``aclrtMemset``: fill ``count`` bytes with ``value & 0xFF``; host or device is
    decided from the address. Synchronous."""
    max_count = _check_size(max_count, "max_count", allow_zero=True)
    count = _check_size(count, "count", allow_zero=True)
    if count > max_count:
        raise _param(f"count {count} exceeds max_count {max_count}")
    ptr = _check_ptr(ptr)
    value = index(value, errors.ACL_ERROR_INVALID_PARAM, "value")
    if count == 0:
        return
    capture.check_mode("aclrtMemset")  # 107030 while a capture's mode forbids it
    if address.is_device_ptr(ptr):
        runtime.get().current()
        alloc, addr = _device_address(ptr, count)
        ctypes.memset(addr, value & 0xFF, count)
        alloc.link.check_alive()
    else:
        runtime.get().host_maps.check(ptr, count, write=True)
        ctypes.memset(ptr, value & 0xFF, count)


# queries --------------------------------------------------------------------------------------
_DDR_AS_MAIN = {MemAttr.ACL_DDR_MEM: MemAttr.ACL_HBM_MEM,
                MemAttr.ACL_DDR_MEM_HUGE: MemAttr.ACL_HBM_MEM_HUGE,
                MemAttr.ACL_DDR_MEM_NORMAL: MemAttr.ACL_HBM_MEM_NORMAL,
                MemAttr.ACL_DDR_MEM_P2P_HUGE: MemAttr.ACL_HBM_MEM_P2P_HUGE,
                MemAttr.ACL_DDR_MEM_P2P_NORMAL: MemAttr.ACL_HBM_MEM_P2P_NORMAL}
"""On a SoC whose main memory is DDR (Ascend310P3, Ascend310B1), CANN's runtime answers the
HBM attributes with the DDR figures: the card has one memory, so both kinds report it. npuemu
keeps that memory in its HBM arena, so there the DDR attributes are answered from it too."""


def get_mem_info(attr: int) -> tuple[int, int]:
    """Mirrors ``aclrtGetMemInfo`` on the current device: ``(free, total)`` bytes. A round
    trip, so frees queued earlier are already counted. On the DDR SoCs the HBM and DDR
    attributes give the same figures, the main memory's (``_DDR_AS_MAIN``)."""
    attr = index(attr, errors.ACL_ERROR_INVALID_PARAM, "attr")
    rt = runtime.get()
    link = rt.current_link()
    if attr in _DDR_AS_MAIN:
        profile = config.soc_profile(rt.node.soc if rt.node is not None else rt.config.soc.name)
        if profile is not None and profile.main_memory == "DDR":
            attr = _DDR_AS_MAIN[MemAttr(attr)]
    flush_frees(link)
    free_bytes, total = link.call(Op.MEM_INFO, attr)
    return free_bytes, total


def pointer_get_attributes(ptr: int) -> dict[str, Any]:
    """Mirrors ``aclrtPointerGetAttributes``: ``{"location": {"type", "id"}, "pageSize"}``.

    Device pointers of this process report DEVICE and the logical device id; pinned blocks
    HOST; other host addresses UNREGISTERED. (The pyACL return shape is our choice.)
    """
    rt = runtime.get()
    ptr = index(ptr, errors.ACL_ERROR_INVALID_PARAM, "pointer")
    if address.is_device_ptr(ptr):
        alloc = find(ptr, 1)
        logical = next(d for d, od in rt.devices.items() if od.link is alloc.link)
        page = (64 * 1024, 2 << 20, 1 << 30)[alloc.page_class]
        return {"location": {"type": MemLocationType.ACL_MEM_LOCATION_TYPE_DEVICE,
                             "id": logical}, "pageSize": page}
    pinned = rt.pinned.find(ptr) if rt.pinned is not None else None
    kind = (MemLocationType.ACL_MEM_LOCATION_TYPE_HOST if pinned is not None
            else MemLocationType.ACL_MEM_LOCATION_TYPE_UNREGISTERED)
    return {"location": {"type": kind, "id": 0}, "pageSize": 4096}


# aclrtMemcpyAsync / aclrtMemsetAsync ---------------------------------------------------------
def memcpy_async(dst: int, dst_max: int, src: int, count: int, kind: int,
                 stream_handle: object) -> None:
    """Mirrors ``aclrtMemcpyAsync``: queue the copy on the stream; the worker's DMA engine
    moves the bytes in stream order. Pinned host memory (``malloc_host``) is used in place,
    truly async. Pageable host memory is staged through a pinned buffer, as the runtime
    does: an H2D call returns once the source is staged, a D2H call returns after the copy.
    Async H2H is 207000 (as in EP mode). ``HOST_TO_BUF_TO_DEVICE`` stages the source at the
    call even when it is pinned, so the caller may reuse it at return (on a capturing
    stream it is read at each replay, as ``HOST_TO_DEVICE``). On a stream that records its
    tasks (``capture.py``) pageable host memory is 107000, as in CANN's runtime; elsewhere a
    pageable copy turns synchronous, which a capture's mode may forbid (107041)."""
    dst, src, count, direction = _copy_args(dst, dst_max, src, count, kind, allow_zero=False)
    if direction == (False, False):
        raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "async host-to-host copy")
    stream = streams.resolve(stream_handle, for_submit=True)
    link = stream.link
    host = (src if direction == (False, True) else dst) if direction != (True, True) else 0
    pinned = bool(host) and is_pinned(link, host, count)  # one lookup for the whole call
    if host and not pinned:
        if stream.recorder is not None:
            raise _param("a copy of pageable host memory cannot be recorded in a model "
                         "runtime instance: use memory of aclrtMallocHost")
        capture.check_mode("aclrtMemcpyAsync of pageable host memory",
                           errors.ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC)
    buffered = kind == _K.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE and stream.recorder is None
    src_alloc = find(src, count) if direction[0] else None
    dst_alloc = find(dst, count) if direction[1] else None
    if src_alloc is not None and dst_alloc is not None:
        _check_inner(kind, src_alloc, dst_alloc)
    p2p.check_copy(stream.device, src_alloc.link.logical if src_alloc else stream.device,
                   dst_alloc.link.logical if dst_alloc else stream.device)
    if direction == (False, True) and (buffered or not pinned):
        runtime.get().host_maps.check(src, count, write=False)
        staged = _stage(link, count)
        move(staged, src, count)
        seq = streams.submit(stream, Op.COPY_ASYNC, dst, staged, count)
        runtime.get().pools()[1].release_after(stream, seq, staged)
    elif direction == (True, False) and not pinned:
        runtime.get().host_maps.check(dst, count, write=True)
        staged = _stage(link, count)
        seq = streams.submit(stream, Op.COPY_ASYNC, staged, src, count)
        link.wait_until(lambda: stream.done(seq), None)
        move(dst, staged, count)
        runtime.get().pools()[1].release_after(stream, seq, staged)
    else:
        streams.submit(stream, Op.COPY_ASYNC, dst, src, count)


def memset_async(ptr: int, max_count: int, value: int, count: int,
                 stream_handle: object) -> None:
    """Mirrors ``aclrtMemsetAsync`` on device memory of the stream's card or on pinned host
    memory (``malloc_host``): queued on the stream."""
    max_count = _check_size(max_count, "max_count", allow_zero=True)
    count = _check_size(count, "count")
    if count > max_count:
        raise _param(f"count {count} exceeds max_count {max_count}")
    ptr = _check_ptr(ptr)
    value = index(value, errors.ACL_ERROR_INVALID_PARAM, "value")
    stream = streams.resolve(stream_handle, for_submit=True)
    if address.is_device_ptr(ptr):
        if find(ptr, count).link is not stream.link:
            raise _param(f"0x{ptr:x} is not memory of the stream's device")
    elif not is_pinned(stream.link, ptr, count):
        raise _param(f"0x{ptr:x}+{count} is neither device memory nor pinned host memory")
    streams.submit(stream, Op.MEMSET_ASYNC, ptr, value & 0xFF, count)


def _kind(kind: object) -> int:
    """``kind`` as an int; 107000 unless it is an aclrtMemcpyKind value."""
    kind = index(kind, errors.ACL_ERROR_RT_PARAM_INVALID, "memcpy kind")
    if kind != _K.ACL_MEMCPY_DEFAULT and kind not in _DIRECTIONS:
        raise _param(f"memcpy kind {kind!r} is not an aclrtMemcpyKind")
    return kind


def _direction(dst: int, src: int, kind: int) -> tuple[bool, bool]:
    kind = _kind(kind)
    src_dev, dst_dev = address.is_device_ptr(src), address.is_device_ptr(dst)
    expected = (src_dev, dst_dev) if kind == _K.ACL_MEMCPY_DEFAULT else _DIRECTIONS.get(kind)
    if expected is None:
        raise _param(f"memcpy kind {kind!r} is not an aclrtMemcpyKind")
    if expected != (src_dev, dst_dev):
        raise _param(f"memcpy kind {_K(kind).name} does not match the addresses "
                     f"(src on {'device' if src_dev else 'host'}, "
                     f"dst on {'device' if dst_dev else 'host'})")
    return expected


def is_pinned(link: Link, ptr: int, count: int) -> bool:
    """True (after making sure the device has mapped it) if ``[ptr, ptr+count)`` is inside a
    pinned block."""
    rt = runtime.get()
    block = rt.pinned.span(ptr) if rt.pinned is not None else None
    if block is None or ptr + count > block[1]:
        return False
    if block[0] not in link.pinned:
        pin(link, block[0], block[2])
    return True


def pin(link: Link, base: int, seg: shm.Segment) -> None:
    """Let ``link``'s worker map a pinned block (one round trip, once per block and link)."""
    if base not in link.pinned:
        link.call(Op.PIN, base, seg.size, seg.name)
        link.pinned.add(base)


def _stage(link: Link, count: int) -> int:
    pinned, staging = runtime.get().pools()
    addr = staging.take(count)
    seg = pinned.find(addr)
    assert seg is not None  # staging buffers are pinned blocks
    pin(link, addr, seg)
    return addr
