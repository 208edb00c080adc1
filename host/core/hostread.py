"""Reading host memory the user names by ``(ptr, size)``, checked before a byte is read.

Calls such as ``aclmdlLoadFromMem``, ``aclmdlQuerySizeFromMem``, ``aclmdlGetDescFromMem``,
``aclopLoad`` and ``aclSetTensorConst`` take a host pointer and a size from the user. The
real runtime dereferences them and crashes the process on a bad one; npuemu refuses them
with ``ACL_ERROR_INVALID_PARAM`` (100000), stricter than hardware, never looser:

* a pointer or size that is not an integer (a ``bool`` is not), a null pointer, a size that
  is not positive (or negative where an empty read is allowed), a range past 2**64;
* any range touching the emulated device address window (:mod:`npuemu.shared.address`):
  the host cannot dereference device memory;
* a range not mapped readable in this process, a range touching a kernel mapping that
  faults on a plain read (``[vvar]``: SIGBUS), or a file mapping past the end of its file
  (SIGBUS too). The mappings are read from ``/proc/self/maps`` for every check (the
  runtime's cache, ``hostmem.HostMaps``, could still list a buffer freed since, e.g. a large
  NumPy array glibc unmapped, and does not measure mapped files), so a check costs one
  read of that file: these calls are rare and slow anyway.

What cannot be closed in-process: another thread of the caller unmapping (or a process
truncating a mapped file) between the check and the copy; a mapped file that can be measured
neither through ``/proc/self/map_files`` nor by its name is taken as backed. No thread is
started here and no state is kept.
"""

from __future__ import annotations

import ctypes
import operator
import os
from typing import SupportsIndex

from npuemu.shared import address, errors

_PTR_LIMIT = 1 << 64  # pointers and sizes are C ``void*`` / ``size_t``
_PAGE = os.sysconf("SC_PAGE_SIZE")


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
    if not _readable(ptr, size):
        raise _param(f"{what}: {ptr:#x} (+{size} bytes) is not readable memory of this "
                     "process")
    return ptr, size


def _readable(ptr: int, size: int) -> bool:
    """Whether ``[ptr, ptr + size)`` lies in readable mappings of this process, read now
    from ``/proc/self/maps``: none of them a kernel page that faults on a plain read
    (``[vvar]``), none a file mapping past the end of its file (a read there is SIGBUS)."""
    end, at = ptr + size, ptr
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(None, 5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if hi <= at:
                continue
            if lo > at:  # the maps are sorted: nothing is mapped at ``at``
                return False
            if fields[1][0] != "r" or not _backed(fields, lo, min(hi, end)):
                return False
            at = hi
            if at >= end:
                return True
    return False


def _backed(fields: list[str], lo: int, end: int) -> bool:
    """A mapping's pages up to ``end`` are backed: not a special kernel mapping, and for a
    file that still exists, within its size (rounded to the page)."""
    name = fields[5].strip() if len(fields) > 5 else ""
    if name.startswith("[vvar") or name == "[vsyscall]":
        return False
    if not name.startswith("/"):
        return True  # anonymous memory
    size = None
    for path in (f"/proc/self/map_files/{fields[0]}", name):  # the first sees deleted files
        try:
            size = os.stat(path).st_size
            break
        except OSError:
            continue
    if size is None:
        return True  # a file that can no longer be measured
    file_end = int(fields[2], 16) + (end - lo)
    return file_end <= -(-size // _PAGE) * _PAGE


def read(ptr: object, size: object, what: str, empty_ok: bool = False) -> bytes:
    """A copy of ``size`` bytes at ``ptr`` after :func:`check`; AclError 100000 if refused."""
    start, count = check(ptr, size, what, empty_ok)
    return ctypes.string_at(start, count) if count else b""
