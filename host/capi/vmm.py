"""C bodies of the memory-in-depth calls of ``acl_rt.h``: stream-ordered pools
(``aclrtMemPool*``), virtual memory (``aclrtReserveMemAddress``, ``aclrtMallocPhysical``,
``aclrtMapMem`` ...), shareable handles between processes (``aclrtMem*ShareableHandle``),
peer-access status and topology, and the execution-timeout calls.

Each mirrors the C call of its name through ``acl.rt``; the C records
(``aclrtMemPoolProps``, ``aclrtPhysicalMemProp``) become the dicts the Python face takes.
Pool attribute values (our choice, the header leaves ``void *``): ``int32_t`` for the
REUSE_* switches (1..3), ``uint64_t`` for the sizes (4..8). Reserved and mapped addresses
work with every copy and fill of ``mem.py`` and with kernels. Only ``aclrtMemPoolDestroy``
and the map/unmap/physical calls wait (one round trip, or for a freeing stream to pass).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import rt
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export

_INT_ATTRS = (1, 2, 3)


def _location(loc: Any) -> dict[str, int]:
    return {"type": int(loc.type), "id": int(loc.id)}


def _out(func: str, out: Any, result: tuple, cast: str | None = None) -> int:
    if out == X.ffi.NULL:
        return X.invalid(func, "the output pointer is NULL")
    value, ret = result
    if ret == 0:
        out[0] = X.ffi.cast(cast, value) if cast else value
    return ret


# pools ---------------------------------------------------------------------------------------
@export
def aclrtMemPoolCreate(out: Any, props: Any) -> int:
    if out == X.ffi.NULL or props == X.ffi.NULL:
        return X.invalid("aclrtMemPoolCreate", "memPool or poolProps is NULL")
    desc = {"allocType": props.allocType, "handleType": props.handleType,
            "location": _location(props.location), "maxSize": props.maxSize}
    return _out("aclrtMemPoolCreate", out, rt.mem_pool_create(desc), "void *")


X.forward("aclrtMemPoolDestroy", rt.mem_pool_destroy)


@export
def aclrtMemPoolMallocAsync(out: Any, size: int, pool: Any, s: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclrtMemPoolMallocAsync", "ptr is NULL")
    return _out("aclrtMemPoolMallocAsync", out,
                rt.mem_pool_malloc_async(size, X.addr(pool), X.addr(s)), "void *")


@export
def aclrtMemPoolFreeAsync(ptr: Any, s: Any) -> int:
    return rt.mem_pool_free_async(X.addr(ptr), X.addr(s))


X.forward("aclrtMemPoolTrimTo", rt.mem_pool_trim_to)


def _attr_ptr(attr: int, value: Any) -> Any:
    return X.ffi.cast("int32_t *" if attr in _INT_ATTRS else "uint64_t *", value)


@export
def aclrtMemPoolSetAttr(pool: Any, attr: int, value: Any) -> int:
    if value == X.ffi.NULL:
        return X.invalid("aclrtMemPoolSetAttr", "value is NULL")
    return rt.mem_pool_set_attr(X.addr(pool), attr, _attr_ptr(attr, value)[0])


@export
def aclrtMemPoolGetAttr(pool: Any, attr: int, value: Any) -> int:
    if value == X.ffi.NULL:
        return X.invalid("aclrtMemPoolGetAttr", "value is NULL")
    got, ret = rt.mem_pool_get_attr(X.addr(pool), attr)
    if ret == 0:
        _attr_ptr(attr, value)[0] = got
    return ret


# virtual memory ------------------------------------------------------------------------------
def _prop(prop: Any) -> dict[str, Any]:
    return {"handleType": prop.handleType, "allocationType": prop.allocationType,
            "memAttr": prop.memAttr, "location": _location(prop.location)}


@export
def aclrtMemGetAllocationGranularity(prop: Any, option: int, out: Any) -> int:
    if prop == X.ffi.NULL:
        return X.invalid("aclrtMemGetAllocationGranularity", "prop is NULL")
    return _out("aclrtMemGetAllocationGranularity", out,
                rt.mem_get_allocation_granularity(_prop(prop), option))


@export
def aclrtReserveMemAddress(out: Any, size: int, alignment: int, expect: Any, flags: int) -> int:
    return _out("aclrtReserveMemAddress", out,
                rt.reserve_mem_address(size, alignment, X.addr(expect), flags), "void *")


X.forward("aclrtReleaseMemAddress", rt.release_mem_address)


@export
def aclrtMallocPhysical(out: Any, size: int, prop: Any, flags: int) -> int:
    if prop == X.ffi.NULL:
        return X.invalid("aclrtMallocPhysical", "prop is NULL")
    if out == X.ffi.NULL:
        return X.invalid("aclrtMallocPhysical", "handle is NULL")
    return _out("aclrtMallocPhysical", out, rt.malloc_physical(size, _prop(prop), flags),
                "void *")


X.forward("aclrtFreePhysical", rt.free_physical)


@export
def aclrtMapMem(va: Any, size: int, offset: int, handle: Any, flags: int) -> int:
    return rt.map_mem(X.addr(va), size, offset, X.addr(handle), flags)


X.forward("aclrtUnmapMem", rt.unmap_mem)


@export
def aclrtMemExportToShareableHandle(handle: Any, kind: int, flags: int, out: Any) -> int:
    """Mirrors ``aclrtMemExportToShareableHandle``: ``handleType`` is the share type
    (``ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT``, 1), as the Python face takes it."""
    return _out("aclrtMemExportToShareableHandle", out,
                rt.mem_export_to_shareable_handle(X.addr(handle), kind, flags))


@export
def aclrtMemImportFromShareableHandle(key: int, dev: int, out: Any) -> int:
    return _out("aclrtMemImportFromShareableHandle", out,
                rt.mem_import_from_shareable_handle(key, dev), "void *")


@export
def aclrtMemSetPidToShareableHandle(key: int, pids: Any, n: int) -> int:
    if n and pids == X.ffi.NULL:
        return X.invalid("aclrtMemSetPidToShareableHandle", "pid is NULL")
    return rt.mem_set_pid_to_shareable_handle(key, list(X.ffi.unpack(pids, n)) if n else [])


# peers and timeouts --------------------------------------------------------------------------
@export
def aclrtDevicePeerAccessStatus(dev: int, peer: int, out: Any) -> int:
    return _out("aclrtDevicePeerAccessStatus", out, rt.device_peer_access_status(dev, peer))


@export
def aclrtGetDevicesTopo(dev: int, other: int, out: Any) -> int:
    return _out("aclrtGetDevicesTopo", out, rt.get_devices_topo(dev, other))


@export
def aclrtSetOpExecuteTimeOutV2(timeout: int, actual: Any) -> int:
    return _out("aclrtSetOpExecuteTimeOutV2", actual, rt.set_op_execute_timeout_v2(timeout))


@export
def aclrtGetOpTimeOutInterval(out: Any) -> int:
    return _out("aclrtGetOpTimeOutInterval", out, rt.get_op_timeout_interval())
