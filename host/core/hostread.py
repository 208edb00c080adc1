"""Reading host memory the user names by ``(ptr, size)``, checked before a byte is read.

Calls such as ``aclmdlLoadFromMem``, ``aclmdlQuerySizeFromMem``, ``aclmdlGetDescFromMem``,
``aclopLoad`` and ``aclSetTensorConst`` take a host pointer and a size from the user. The
real runtime dereferences them and crashes the process on a bad one; npuemu refuses them
with ``ACL_ERROR_INVALID_PARAM`` (100000), stricter than hardware, never looser:

* a pointer or size that is not an integer (a ``bool`` is not), a null pointer, a size that
  is not positive (or negative where an empty read is allowed), a range past 2**64;
* any range touching the emulated device address window (:mod:`npuemu.shared.address`):
  the host cannot dereference device memory;
* a range not mapped readable in this process. The mappings are re-read from
  ``/proc/self/maps`` for every check (the runtime's cache, ``hostmem.HostMaps``, would
  still list a buffer freed since, e.g. a large NumPy array glibc unmapped), so the
  check costs one read of that file: these calls are rare and slow anyway.

What cannot be closed in-process: another thread of the caller unmapping the range between
the check and the copy. No thread is started here and no state is kept.
"""

from __future__ import annotations

import ctypes
import operator
from typing import SupportsIndex

from npuemu.host.core import runtime
from npuemu.shared import address, errors

_PTR_LIMIT = 1 << 64  # pointers and sizes are C ``void*`` / ``size_t``


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def _int(value: object, name: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise _param(f"{what}: the {name} {value!r} is not an integer")
    return operator.index(value)


def check(ptr: object, size: object, what: str, empty_ok: bool = False) -> tuple[int, int]:
    """``(ptr, size)`` as ints once the range may be read; AclError 100000 otherwise.
    ``empty_ok``: a size of 0 is allowed (nothing is read; the pointer may then be 0)."""
    ptr, size = _int(ptr, "pointer", what), _int(size, "size", what)
    if size < 0 or (size == 0 and not empty_ok):
        raise _param(f"{what}: size {size} must be {'>= 0' if empty_ok else '> 0'}")
    if size == 0:
        return ptr, 0
    if ptr <= 0 or ptr + size > _PTR_LIMIT:
        raise _param(f"{what}: {ptr:#x} (+{size} bytes) is not a valid host address")
    if address.is_device_ptr(ptr) or (
            ptr < address.DEVICE_VA_END and ptr + size > address.DEVICE_VA_BASE):
        raise _param(f"{what}: {ptr:#x} (+{size} bytes) is device memory; it must be in "
                     "host memory")
    maps = runtime.get().host_maps
    maps.invalidate()  # re-read: the cache may still list memory unmapped since
    try:
        maps.check(ptr, size, write=False)
    except errors.AclError:
        raise _param(f"{what}: {ptr:#x} (+{size} bytes) is not readable memory of this "
                     "process") from None
    return ptr, size


def read(ptr: object, size: object, what: str, empty_ok: bool = False) -> bytes:
    """A copy of ``size`` bytes at ``ptr`` after :func:`check`; AclError 100000 if refused."""
    start, count = check(ptr, size, what, empty_ok)
    return ctypes.string_at(start, count) if count else b""
