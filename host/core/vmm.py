"""Virtual memory: ``aclrtReserveMemAddress``, ``aclrtMallocPhysical``, ``aclrtMapMem``,
``aclrtUnmapMem``, ``aclrtFreePhysical``, ``aclrtReleaseMemAddress``,
``aclrtMemGetAllocationGranularity``.

Address space: reserved ranges live in their own window of the emulated address space,
``shared/address.py`` ``VIRT_BASE`` (2**45) up to 2**45 + 2**44, so a pointer says by itself
whether it is virtual (``address.is_virtual``) or a card's physical memory. A physical handle
is one device allocation of this process (``aclrtMalloc`` with the page policy of its
``memAttr``: NORMAL -> NORMAL_ONLY, HUGE -> HUGE_ONLY, HUGE1G -> HUGE1G_ONLY, P2P forms
alike), sized in whole granules. ``map_mem`` backs ``[va, va+size)`` of a reservation with a
whole handle; a reservation may be backed piecewise by several handles, even of different
cards.

Copies and fills through mapped ranges: ``aclrtMemcpy``, ``aclrtMemset``,
``aclrtMemcpyAsync`` and ``aclrtMemsetAsync`` translate virtual addresses on the host and
split the request at mapping boundaries (one request per piece; async pieces are queued in
order on the same stream). A byte that is not mapped gives 107000. Kernels see a reserved
range as the card's MMU shows it: each ``map_mem`` also maps the handle's pages into the
card worker's window of that reservation (``Op.VMM_MAP``, ``device/memory/windows.py``), so
a kernel argument pointing into a mapped range is passed as it is and a tensor may span
several mappings, as on hardware (checked at launch: the pointer itself must be mapped and
readable, :func:`kernel_args`; by the card: every byte the kernel touches, 507053 at the
launch's synchronize). A mapping of another card's memory, or of a NORMAL-page handle that
is not page-aligned in its arena, is not joined to its neighbours (a tensor inside it alone
still works).

Our choices where CANN's documentation is silent: granularity 2 MiB (1 GiB for HUGE1G
attributes), minimum = recommended; ``expectPtr`` is honoured when it is a free,
granule-aligned address of the virtual window, else 107000 (the 16T-24T window documented
for it is where this emulator's physical cards live); freeing a mapped handle, releasing a range
that still has mappings and mapping over a mapping are 107000; ``offset`` and ``flags`` must
be 0 (100000 otherwise). ``aclrtMemSetAccess`` sets per-mapping flags that copies and
fills through the range obey (kernels are not checked).

Threading model: any thread may call in. ``_lock`` guards the reservations, the mapping
tables and the next free virtual address; device round trips run outside it.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from npuemu.host.core import memory, runtime
from npuemu.host.core.runtime import Allocation, index
from npuemu.host.driver.interface import Link
from npuemu.shared import address, errors
from npuemu.shared.enums import MemAttr, MemLocationType
from npuemu.shared.protocol import Op

__all__ = ["free_physical", "get_access", "granularity", "malloc_physical", "map_mem",
           "release_mem_address", "reserve_mem_address", "set_access", "unmap_mem"]

ACCESS_NONE, ACCESS_READ, ACCESS_READWRITE = 0, 1, 3  # aclrtMemAccessFlags
GRANULE = 2 << 20
GRANULE_1G = 1 << 30
_M = MemAttr
_POLICY: dict[int, int] = {_M.ACL_MEM_NORMAL: 2, _M.ACL_MEM_HUGE: 1, _M.ACL_MEM_HUGE1G: 6,
                           _M.ACL_MEM_P2P_NORMAL: 5, _M.ACL_MEM_P2P_HUGE: 4,
                           _M.ACL_MEM_P2P_HUGE1G: 7}
_HUGE1G = (_M.ACL_MEM_HUGE1G, _M.ACL_MEM_P2P_HUGE1G)


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, detail)


def _invalid(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


@dataclass(eq=False)
class Physical:
    """Host side of an ``aclrtDrvMemHandle``."""

    alloc: Allocation
    size: int
    link: Link
    handle: int = 0
    destroyed: bool = False
    mapped: int = 0  # how many mappings use it
    imported: bool = False  # from another process (host/core/ipc.py)
    access: int = 3  # aclrtMemAccessFlags of its current mapping (READWRITE until set)


@dataclass
class _Range:
    size: int
    maps: dict[int, Physical] = field(default_factory=dict)  # offset -> handle
    starts: list[int] = field(default_factory=list)  # sorted offsets of maps


_lock = threading.Lock()
_ranges: dict[int, _Range] = {}  # va -> reservation
_range_starts: list[int] = []
_next_va = address.VIRT_BASE


# granularity / physical handles ----------------------------------------------------------------
def _prop(prop: object) -> tuple[int, int]:
    """``(memAttr, device)`` of an aclrtPhysicalMemProp dict; 100000 if it is not one."""
    if not isinstance(prop, dict):
        raise _invalid(f"physical memory props must be a dict, got {type(prop).__name__}")
    if index(prop.get("handleType", 0), errors.ACL_ERROR_INVALID_PARAM, "handleType") not in (0, 2):
        raise _invalid("handleType must be NONE (0) or POSIX (2)")
    if index(prop.get("allocationType", 0), errors.ACL_ERROR_INVALID_PARAM, "allocationType"):
        raise _invalid("allocationType must be PINNED (0)")
    attr = index(prop.get("memAttr", _M.ACL_MEM_HUGE), errors.ACL_ERROR_INVALID_PARAM, "memAttr")
    if attr not in _POLICY:
        raise _invalid(f"memAttr {attr} is not ACL_MEM_NORMAL/HUGE/HUGE1G (or a P2P form)")
    location = prop.get("location", {})
    if not isinstance(location, dict):
        raise _invalid("location must be a dict {'type': 1, 'id': device}")
    if index(location.get("type", MemLocationType.ACL_MEM_LOCATION_TYPE_DEVICE),
             errors.ACL_ERROR_INVALID_PARAM, "location type") != \
            MemLocationType.ACL_MEM_LOCATION_TYPE_DEVICE:
        raise _invalid("physical memory lives on a device (location type 1)")
    dev = index(location.get("id", 0), errors.ACL_ERROR_INVALID_PARAM, "location id")
    if not 0 <= dev < len(runtime.get().visible()):
        raise _invalid(f"location id {dev} is not a device")
    return attr, dev


def granularity(prop: object, option: object = 0) -> int:
    """Mirrors ``aclrtMemGetAllocationGranularity(prop, option, &g)``: 2 MiB (1 GiB for the
    HUGE1G attributes) for MINIMUM (0) and RECOMMENDED (1). Does not block."""
    attr, _dev = _prop(prop)
    option = index(option, errors.ACL_ERROR_INVALID_PARAM, "option")
    if option not in (0, 1):
        raise _invalid(f"granularity option {option} is not MINIMUM (0) or RECOMMENDED (1)")
    return GRANULE_1G if attr in _HUGE1G else GRANULE


def malloc_physical(size: object, prop: object, flags: object = 0) -> Physical:
    """Mirrors ``aclrtMallocPhysical(&handle, size, prop, flags)``: ``size`` rounded up to the
    granularity, on the prop's device. One round trip. 207001 when the card is full."""
    size = memory._check_size(size, "size")
    attr, dev = _prop(prop)
    if index(flags, errors.ACL_ERROR_INVALID_PARAM, "flags"):
        raise _invalid("flags must be 0")
    g = GRANULE_1G if attr in _HUGE1G else GRANULE
    size = -(-size // g) * g
    rt = runtime.get()
    od = rt.open_device(dev)
    saved = getattr(rt.local, "ctx", None)
    rt.local.ctx = od.primary if saved is None or saved.device != dev else saved
    # aclrtMalloc pads by 32 bytes; a physical handle is whole granules: ask 32 bytes less
    # (1 GiB pages get no padding) and let the handle use its whole span
    ask = size if attr in _HUGE1G else size - 32
    try:
        ptr = memory.malloc(ask, _POLICY[attr])
    finally:
        rt.local.ctx = saved
    with rt.lock:
        alloc = rt.allocations[ptr]
        alloc.size = alloc.span
    assert alloc.span == size, (alloc.span, size)
    return rt.register(Physical(alloc, size, od.link))


def lookup_physical(handle: object) -> Physical:
    """The live physical handle behind ``handle`` (107000 otherwise)."""
    return runtime.lookup(runtime.get().handles, handle, Physical, "physical memory handle")


_physical = lookup_physical


def free_physical(handle: object) -> None:
    """Mirrors ``aclrtFreePhysical``: 107000 while the handle is mapped (our choice)."""
    phys = _physical(handle)
    with _lock:
        if phys.mapped:
            raise _param(f"physical handle {handle} is still mapped ({phys.mapped} mappings)")
        phys.destroyed = True
    rt = runtime.get()
    with rt.lock:
        rt.handles.pop(phys.handle, None)
    if phys.imported:  # close the import; the memory stays its exporter's
        close_import(phys)
    elif rt.allocations.get(phys.alloc.ptr) is phys.alloc:
        memory.free(phys.alloc.ptr)


def _no_imports(phys: Physical) -> None:
    raise AssertionError(f"physical handle {phys.handle} is imported but ipc is not loaded")


close_import: Callable[[Physical], None] = _no_imports
"""Closes an imported handle; ``host/core/ipc.py`` (the only maker of imported handles, and a
module that imports this one) sets it when it loads, so the two modules form no import cycle."""


# reservations -------------------------------------------------------------------------------
def reserve_mem_address(size: object, alignment: object = 0, expect: object = 0,
                        flags: object = 0) -> int:
    """Mirrors ``aclrtReserveMemAddress(&va, size, alignment, expectPtr, flags)``: a range of
    the virtual window, ``size`` a multiple of 2 MiB. No device work; does not block."""
    size = memory._check_size(size, "size")
    alignment = index(alignment, errors.ACL_ERROR_INVALID_PARAM, "alignment")
    expect = index(expect, errors.ACL_ERROR_INVALID_PARAM, "expectPtr")
    if index(flags, errors.ACL_ERROR_INVALID_PARAM, "flags"):
        raise _invalid("flags must be 0")
    if size % GRANULE:
        raise _invalid(f"size {size} is not a multiple of the granularity ({GRANULE})")
    if alignment < 0 or (alignment and (alignment & (alignment - 1) or alignment % GRANULE)):
        raise _invalid(f"alignment {alignment} is not 0 or a power of two >= 2 MiB")
    align = max(alignment, GRANULE)
    global _next_va
    with _lock:
        if expect:
            if expect % align or not address.is_virtual(expect) or \
                    not address.is_virtual(expect + size - 1) or _overlaps(expect, size):
                raise _param(f"expectPtr 0x{expect:x} is not a free, aligned address of the "
                             f"virtual window (0x{address.VIRT_BASE:x}..)")
            va = expect
        else:
            va = -(-_next_va // align) * align
            if not address.is_virtual(va + size - 1):
                raise errors.error_for(errors.ACL_ERROR_RT_MEMORY_ALLOCATION,
                                       "virtual address window exhausted")
        _next_va = max(_next_va, va + size)
        _ranges[va] = _Range(size)
        bisect.insort(_range_starts, va)
    return va


def _overlaps(va: int, size: int) -> bool:
    i = bisect.bisect_right(_range_starts, va + size - 1) - 1
    return i >= 0 and _range_starts[i] + _ranges[_range_starts[i]].size > va


def release_mem_address(va: object) -> None:
    """Mirrors ``aclrtReleaseMemAddress``: 107000 unless ``va`` starts a reservation with no
    mappings left."""
    with _lock:
        if type(va) is not int or (rng := _ranges.get(va)) is None:
            raise _param(f"{va!r} is not a reserved address range")
        if rng.maps:
            raise _param(f"0x{va:x}: unmap its {len(rng.maps)} mappings first")
        del _ranges[va]
        del _range_starts[bisect.bisect_left(_range_starts, va)]


def _range_of(va: int) -> tuple[int, _Range] | None:
    i = bisect.bisect_right(_range_starts, va) - 1
    if i < 0:
        return None
    base = _range_starts[i]
    rng = _ranges[base]
    return (base, rng) if va < base + rng.size else None


# map / unmap --------------------------------------------------------------------------------
def map_mem(va: object, size: object, offset: object, handle: object, flags: object = 0) -> None:
    """Mirrors ``aclrtMapMem(va, size, offset, handle, flags)``: back ``[va, va+size)`` of a
    reservation with the whole handle (``size`` = its size, ``offset`` 0). One round trip
    to the handle's card (its kernels' window of the reservation)."""
    va = index(va, errors.ACL_ERROR_INVALID_PARAM, "va")
    size = memory._check_size(size, "size")
    if index(offset, errors.ACL_ERROR_INVALID_PARAM, "offset") or \
            index(flags, errors.ACL_ERROR_INVALID_PARAM, "flags"):
        raise _invalid("offset and flags must be 0")
    phys = _physical(handle)
    if size != phys.size:
        raise _invalid(f"size {size} differs from the physical handle's size {phys.size}")
    with _lock:
        found = _range_of(va)
        if found is None or va % GRANULE or va + size > found[0] + found[1].size:
            raise _param(f"0x{va:x}+{size} is not an aligned part of a reserved range")
        base, rng = found
        off = va - base
        i = bisect.bisect_right(rng.starts, off + size - 1) - 1
        if i >= 0 and rng.starts[i] + rng.maps[rng.starts[i]].size > off:
            raise _param(f"0x{va:x}+{size} overlaps a mapping")
        rng.maps[off] = phys
        bisect.insort(rng.starts, off)
        phys.mapped += 1
    try:
        phys.link.call(Op.VMM_MAP, base, rng.size, off, phys.alloc.ptr, size)
    except BaseException:
        with _lock:
            _forget_mapping(rng, off)
        raise


def _forget_mapping(rng: _Range, off: int) -> Physical:
    phys = rng.maps.pop(off)
    del rng.starts[bisect.bisect_left(rng.starts, off)]
    phys.mapped -= 1
    phys.access = ACCESS_READWRITE
    return phys


def unmap_mem(va: object) -> None:
    """Mirrors ``aclrtUnmapMem``: 107000 unless ``va`` starts a mapping. One round trip to
    the handle's card (none if it is gone). Kernels still queued that use the range then
    fail (on a card, unmapping memory queued work uses is the program's error)."""
    with _lock:
        if type(va) is not int or (found := _range_of(va)) is None \
                or va - found[0] not in found[1].maps:
            raise _param(f"{va!r} is not the start of a mapping")
        base, rng = found
        phys = _forget_mapping(rng, va - base)
    if phys.link.alive():
        phys.link.call(Op.VMM_UNMAP, base, va - base)


# access --------------------------------------------------------------------------------------
def _mappings(va: int, size: int) -> list[Physical]:
    """The mappings covering ``[va, va+size)`` with no gap (107000 otherwise)."""
    out, pos, end = [], va, va + size
    while pos < end:
        found = _range_of(pos)
        phys = None
        if found is not None:
            base, rng = found
            i = bisect.bisect_right(rng.starts, pos - base) - 1
            if i >= 0 and pos - base < rng.starts[i] + rng.maps[rng.starts[i]].size:
                phys = rng.maps[rng.starts[i]]
                nxt = base + rng.starts[i] + phys.size
        if phys is None:
            raise _param(f"0x{pos:x} in 0x{va:x}+{size} is not mapped")
        out.append(phys)
        pos = nxt
    return out


def set_access(va: object, size: object, descs: object) -> None:
    """Mirrors ``aclrtMemSetAccess(va, size, desc, count)``: ``descs`` a list of
    ``{"flags": NONE 0 | READ 1 | READWRITE 3, "location": {"type": 1, "id": dev}}``; the
    range must be fully mapped. The flags apply to the mappings of ``dev``'s memory in it
    and are checked by copies and fills through the range (READ refuses writes, NONE both:
    107000). A mapping starts READWRITE (our choice of default). Does not block."""
    va = index(va, errors.ACL_ERROR_INVALID_PARAM, "va")
    size = memory._check_size(size, "size")
    if not isinstance(descs, list | tuple) or not descs:
        raise _invalid("desc must be a non-empty list of access descriptors")
    wanted = {}
    for desc in descs:
        if not isinstance(desc, dict) or not isinstance(desc.get("location"), dict):
            raise _invalid(f"bad access descriptor {desc!r}")
        flags = index(desc.get("flags"), errors.ACL_ERROR_INVALID_PARAM, "flags")
        if flags not in (ACCESS_NONE, ACCESS_READ, ACCESS_READWRITE):
            raise _invalid(f"access flags {flags} are not NONE/READ/READWRITE")
        loc = desc["location"]
        if index(loc.get("type", 1), errors.ACL_ERROR_INVALID_PARAM, "location type") != 1:
            raise _invalid("access is set for device locations (type 1)")
        wanted[index(loc.get("id", 0), errors.ACL_ERROR_INVALID_PARAM, "location id")] = flags
    rt = runtime.get()
    with _lock:
        for phys in _mappings(va, size):
            dev = next((d for d, od in rt.devices.items() if od.link is phys.link), None)
            if dev in wanted:
                phys.access = wanted[dev]


def get_access(va: object, location: object) -> int:
    """Mirrors ``aclrtMemGetAccess(va, location, &flags)``: the flags of the mapping at
    ``va`` (for the card holding it; another card's location reads NONE)."""
    va = index(va, errors.ACL_ERROR_INVALID_PARAM, "va")
    if not isinstance(location, dict):
        raise _invalid("location must be a dict {'type': 1, 'id': device}")
    dev = index(location.get("id", 0), errors.ACL_ERROR_INVALID_PARAM, "location id")
    rt = runtime.get()
    with _lock:
        (phys,) = _mappings(va, 1)
    od = rt.devices.get(dev)
    return phys.access if od is not None and od.link is phys.link else ACCESS_NONE


# translation ---------------------------------------------------------------------------------
def _piece(va: int, write: bool) -> tuple[int, int]:
    """``(physical pointer, bytes left in this mapping)`` for a mapped virtual byte that may
    be read (and written, if ``write``) under its access flags."""
    found = _range_of(va)
    if found is not None:
        base, rng = found
        off = va - base
        i = bisect.bisect_right(rng.starts, off) - 1
        if i >= 0:
            start = rng.starts[i]
            phys = rng.maps[start]
            if off < start + phys.size and not phys.destroyed and \
                    runtime.get().allocations.get(phys.alloc.ptr) is phys.alloc:
                if phys.access != ACCESS_READWRITE and (write or phys.access == ACCESS_NONE):
                    raise _param(f"0x{va:x}: access flags {phys.access} forbid this "
                                 f"{'write' if write else 'read'}")
                return phys.alloc.ptr + off - start, start + phys.size - off
    raise _param(f"0x{va:x} is not mapped")


def kernel_args(values: list[object]) -> list[object]:
    """Kernel arguments of ``aclrtLaunchKernel``, checked: a virtual address must be
    mapped, and not with access NONE (107000 now). They are passed as they are: the card
    resolves them through its windows (module docstring), so a tensor may span mappings.
    READ-only mappings are not enforced for kernels. Costs nothing while this process has
    no reservation."""
    if not _ranges:
        return values
    with _lock:
        for value in values:
            if type(value) is int and address.VIRT_BASE <= value < address.VIRT_END:
                _piece(value, False)
    return values


def pieces(dst: int, src: int | None, count: int) -> list[tuple[int, int | None, int]]:
    """``[(dst, src, n), ...]``: the request split where either side changes mapping, with
    virtual addresses translated (others kept)."""
    out: list[tuple[int, int | None, int]] = []
    s: int | None
    with _lock:
        while count > 0:
            d, left = _piece(dst, True) if address.is_virtual(dst) else (dst, count)
            if src is not None and address.is_virtual(src):
                s, left_s = _piece(src, False)
                left = min(left, left_s)
            else:
                s = src
            n = min(left, count)
            out.append((d, s, n))
            dst, count = dst + n, count - n
            if src is not None:
                src += n
    return out


def copy(fn: Callable[..., None], dst: int, dst_max: int, src: int, count: int,
         *rest: object) -> None:
    """``fn(dst, n, src, n, *rest)`` per piece (memcpy and memcpy_async)."""
    count = memory._check_size(count, "count", allow_zero=True)
    if count > memory._check_size(dst_max, "dst_max", allow_zero=True):
        raise _param(f"count {count} exceeds dst_max {dst_max}")
    for d, s, n in pieces(dst, src, count):
        fn(d, n, s, n, *rest)


def fill(fn: Callable[..., None], ptr: int, max_count: int, value: int, count: int,
         *rest: object) -> None:
    """``fn(ptr, n, value, n, *rest)`` per piece (memset and memset_async)."""
    count = memory._check_size(count, "count", allow_zero=True)
    if count > memory._check_size(max_count, "max_count", allow_zero=True):
        raise _param(f"count {count} exceeds max_count {max_count}")
    for d, _s, n in pieces(ptr, None, count):
        fn(d, n, value, n, *rest)


# the acl face's copies and fills: virtual addresses go through the pieces above --------------
def _virtual(ptr: object, other: object = None) -> bool:
    """True if ``ptr`` or ``other`` is a virtual address (two plain tests, no generator:
    this runs on every copy and fill)."""
    return ((type(ptr) is int and _VIRT_BASE <= ptr < _VIRT_END)
            or (type(other) is int and _VIRT_BASE <= other < _VIRT_END))


_VIRT_BASE, _VIRT_END = address.VIRT_BASE, address.VIRT_END


def memcpy(dst: int, dst_max: int, src: int, count: int, kind: int) -> None:
    """``aclrtMemcpy`` that also takes virtual addresses (split per mapping)."""
    if _virtual(dst, src):
        copy(memory.memcpy, dst, dst_max, src, count, kind)
    else:
        memory.memcpy(dst, dst_max, src, count, kind)


def memcpy_async(dst: int, dst_max: int, src: int, count: int, kind: int,
                 stream: object) -> None:
    """``aclrtMemcpyAsync`` that also takes virtual addresses (one task per piece)."""
    if _virtual(dst, src):
        copy(memory.memcpy_async, dst, dst_max, src, count, kind, stream)
    else:
        memory.memcpy_async(dst, dst_max, src, count, kind, stream)


def memset(ptr: int, max_count: int, value: int, count: int) -> None:
    """``aclrtMemset`` that also takes virtual addresses."""
    if _virtual(ptr):
        fill(memory.memset, ptr, max_count, value, count)
    else:
        memory.memset(ptr, max_count, value, count)


def memset_async(ptr: int, max_count: int, value: int, count: int, stream: object) -> None:
    """``aclrtMemsetAsync`` that also takes virtual addresses (one task per piece)."""
    if _virtual(ptr):
        fill(memory.memset_async, ptr, max_count, value, count, stream)
    else:
        memory.memset_async(ptr, max_count, value, count, stream)
