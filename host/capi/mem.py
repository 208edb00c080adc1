"""C bodies of the memory calls of ``acl_rt.h`` (malloc with every policy, host memory,
memset, memcpy and memcpy2d sync and async, memory info and usage, pointer attributes).

Each mirrors the C call of its name through ``acl.rt``. Host pointers from C are plain
addresses, as pyACL's ints are: a copy reads or writes the C buffer in place (the bytes move
once, between the C memory and the card's shared memory). ``aclrtMemcpy`` blocks until the
copy is done; the ``Async`` calls return once queued (with pageable host memory, after the
copy, as the real runtime does).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import _wrap, rt
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export
from npuemu.shared import errors

_NULL: Any = None
_cast: Any = None


def bind(ffi: Any) -> None:
    """The FFI's NULL and cast as module globals: malloc and free are the hottest calls."""
    global _NULL, _cast
    _NULL, _cast = ffi.NULL, ffi.cast


def _malloc(func: str, fn: Any, p: Any, size: int, policy: int) -> int:
    if p == X.ffi.NULL:
        return X.invalid(func, "devPtr is NULL")
    ptr, ret = fn(size, policy)
    if ret == 0:
        p[0] = X.ffi.cast("void *", ptr)
    return ret


# aclrtMalloc and aclrtFree are the hottest calls (the bench compares their pairs with the
# Python face's): they call the function under ``acl.rt``'s return-code wrapper directly and
# turn its AclError into the code as the wrapper does, unless the profiler's API timer has
# replaced ``acl.rt.malloc``/``free`` (then they go through it, to be timed). native.c's
# aclrtMalloc and aclrtFree call hot_malloc and hot_free straight from C; the @export bodies
# below (cffi's, for a NULL pointer or a thread's first call) call them too.
_FACE_MALLOC, _FACE_FREE = rt.malloc, rt.free
_CORE_MALLOC = rt.malloc.__wrapped__  # type: ignore[attr-defined]  # functools.wraps sets it
_CORE_FREE = rt.free.__wrapped__  # type: ignore[attr-defined]


def hot_malloc(size: int, policy: int) -> int:
    """``aclrtMalloc`` of ``size`` bytes: the device address (the runtime's are > 0), or
    minus the code on failure (its message recorded). Returns at once."""
    if rt.malloc is not _FACE_MALLOC:
        ptr, ret = rt.malloc(size, policy)
        return -ret if ret else ptr
    try:
        return _CORE_MALLOC(size, policy)
    except errors.AclError as err:
        return -_wrap.fail(err, "rt.malloc")


def hot_free(ptr: int) -> int:
    """``aclrtFree`` of the device address ``ptr`` (not 0): its code. Returns at once."""
    if rt.free is not _FACE_FREE:
        return rt.free(ptr)
    try:
        _CORE_FREE(ptr)
    except errors.AclError as err:
        return _wrap.fail(err, "rt.free")
    return 0


@export
def aclrtMalloc(p: Any, size: int, policy: int) -> int:
    """Mirrors ``aclrtMalloc`` (every policy and modifier bit, as ``acl.rt.malloc``)."""
    if p == _NULL:
        return X.invalid("aclrtMalloc", "devPtr is NULL")
    ptr = hot_malloc(size, policy)
    if ptr < 0:
        return -ptr
    p[0] = _cast("void *", ptr)
    return 0


@export
def aclrtMallocCached(p: Any, size: int, policy: int) -> int:
    return _malloc("aclrtMallocCached", rt.malloc_cached, p, size, policy)


@export
def aclrtMallocAlign32(p: Any, size: int, policy: int) -> int:
    return _malloc("aclrtMallocAlign32", rt.malloc_align32, p, size, policy)


def _null(func: str, *ptrs: Any) -> int:
    """100000 if a pointer argument is NULL (the ACL layer's check), else 0."""
    return X.invalid(func, "a pointer argument is NULL") if X.ffi.NULL in ptrs else 0


@export
def aclrtFree(ptr: Any) -> int:
    if ptr == _NULL:
        return X.invalid("aclrtFree", "devPtr is NULL")
    return hot_free(int(_cast("uintptr_t", ptr)))


@export
def aclrtFreeWithDevSync(ptr: Any) -> int:
    return _null("aclrtFreeWithDevSync", ptr) or rt.free_with_dev_sync(X.addr(ptr))


@export
def aclrtMallocHost(p: Any, size: int) -> int:
    """Mirrors ``aclrtMallocHost``: pinned host memory (64-byte aligned)."""
    if p == X.ffi.NULL:
        return X.invalid("aclrtMallocHost", "hostPtr is NULL")
    ptr, ret = rt.malloc_host(size)
    if ret == 0:
        p[0] = X.ffi.cast("void *", ptr)
    return ret


@export
def aclrtFreeHost(ptr: Any) -> int:
    return _null("aclrtFreeHost", ptr) or rt.free_host(X.addr(ptr))


@export
def aclrtMemset(ptr: Any, max_count: int, value: int, count: int) -> int:
    return _null("aclrtMemset", ptr) or rt.memset(X.addr(ptr), max_count, value, count)


@export
def aclrtMemsetAsync(ptr: Any, max_count: int, value: int, count: int, s: Any) -> int:
    return (_null("aclrtMemsetAsync", ptr)
            or rt.memset_async(X.addr(ptr), max_count, value, count, X.addr(s)))


@export
def aclrtMemcpy(dst: Any, dst_max: int, src: Any, count: int, kind: int) -> int:
    return (_null("aclrtMemcpy", dst, src)
            or rt.memcpy(X.addr(dst), dst_max, X.addr(src), count, kind))


@export
def aclrtMemcpyAsync(dst: Any, dst_max: int, src: Any, count: int, kind: int, s: Any) -> int:
    return (_null("aclrtMemcpyAsync", dst, src)
            or rt.memcpy_async(X.addr(dst), dst_max, X.addr(src), count, kind, X.addr(s)))


@export
def aclrtMemcpy2d(dst: Any, dpitch: int, src: Any, spitch: int, width: int, height: int,
                  kind: int) -> int:
    return rt.memcpy2d(X.addr(dst), dpitch, X.addr(src), spitch, width, height, kind)


@export
def aclrtMemcpy2dAsync(dst: Any, dpitch: int, src: Any, spitch: int, width: int, height: int,
                       kind: int, s: Any) -> int:
    return rt.memcpy2d_async(X.addr(dst), dpitch, X.addr(src), spitch, width, height, kind,
                             X.addr(s))


@export
def aclrtGetMemInfo(attr: int, free: Any, total: Any) -> int:
    """Mirrors ``aclrtGetMemInfo`` on the current device."""
    if free == X.ffi.NULL or total == X.ffi.NULL:
        return X.invalid("aclrtGetMemInfo", "free or total is NULL")
    free_b, total_b, ret = rt.get_mem_info(attr)
    if ret == 0:
        free[0], total[0] = free_b, total_b
    return ret


@export
def aclrtGetMemUsageInfo(dev: int, arr: Any, input_num: int, output_num: Any) -> int:
    """Mirrors ``aclrtGetMemUsageInfo``: at most ``inputNum`` entries, largest current
    usage first; ``*outputNum`` is how many were written."""
    if arr == X.ffi.NULL or output_num == X.ffi.NULL or input_num == 0:
        return X.invalid("aclrtGetMemUsageInfo", "memUsageInfo/outputNum NULL or inputNum 0")
    entries, ret = rt.get_mem_usage_info(dev)
    if ret:
        return ret
    entries = entries[:input_num]
    for i, entry in enumerate(entries):
        arr[i].name = entry["name"].encode()[:31]
        arr[i].curMemSize = entry["curMemSize"]
        arr[i].memPeakSize = entry["memPeakSize"]
    output_num[0] = len(entries)
    return 0


@export
def aclrtPointerGetAttributes(ptr: Any, attrs: Any) -> int:
    """Mirrors ``aclrtPointerGetAttributes`` (NULL pointer or record: 100000)."""
    if ptr == X.ffi.NULL or attrs == X.ffi.NULL:
        return X.invalid("aclrtPointerGetAttributes", "ptr or attributes is NULL")
    found, ret = rt.pointer_get_attributes(X.addr(ptr))
    if ret == 0:
        attrs.location.id = found["location"]["id"]
        attrs.location.type = found["location"]["type"]
        attrs.pageSize = found["pageSize"]
    return ret
