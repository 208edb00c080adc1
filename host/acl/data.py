"""Data buffers and data-type sizes of the top-level ``acl`` module (``aclCreateDataBuffer``,
``aclDataTypeSize`` and friends), shared by ``acl.op`` and ``acl.mdl``.

An ``aclDataBuffer`` only describes memory (an address and a size); it never owns or checks
it, as in the reference. Handles are ints; a null or unknown handle behaves like a null
``aclDataBuffer*``: getters return 0, ``destroy``/``update`` return ACL_ERROR_INVALID_PARAM
(100000) (hardware would dereference it: stricter, never looser). Nothing here blocks.

Threading model: ``_lock`` guards ``_buffers`` (handle -> buffer); a buffer's fields are
replaced as one tuple, so a reader sees either the old or the new (address, size).
"""

from __future__ import annotations

import itertools
import operator
import threading
from dataclasses import dataclass

from npuemu.shared import errors
from npuemu.shared.enums import DATA_TYPE_SIZES

_SIZE_LIMIT = 1 << 64  # size_t
_HANDLE_BASE = 0x5B000000


@dataclass
class DataBuffer:
    """``aclDataBuffer``: ``(address, size)`` of memory owned by the caller."""

    handle: int
    span: tuple[int, int]


_lock = threading.Lock()
_buffers: dict[int, DataBuffer] = {}
_handles = itertools.count(_HANDLE_BASE, 0x20)


def _uint(value: object, what: str) -> int:
    """``value`` as a ``size_t``-range int; TypeError for a non-integer (as pyACL's parser
    raises), OverflowError out of range (as its parser does for C ints)."""
    if isinstance(value, bool):
        return int(value)
    number = operator.index(value)
    if not 0 <= number < _SIZE_LIMIT:
        raise OverflowError(f"{what} {number} is out of range for an unsigned 64-bit value")
    return number


def create(data: int, size: int) -> int:
    """Mirrors ``aclCreateDataBuffer``: a handle describing ``size`` bytes at ``data``
    (0, 0 is allowed: an empty buffer). pyACL returns the handle alone."""
    span = (_uint(data, "data"), _uint(size, "size"))
    with _lock:
        buf = DataBuffer(next(_handles), span)
        _buffers[buf.handle] = buf
    return buf.handle


def _find(handle: object) -> DataBuffer | None:
    if type(handle) is not int:
        return None
    with _lock:
        return _buffers.get(handle)


def destroy(handle: int) -> int:
    """Mirrors ``aclDestroyDataBuffer`` (the memory itself is not freed); returns ``ret``."""
    with _lock:
        buf = _buffers.pop(handle, None) if type(handle) is int else None
    return 0 if buf is not None else errors.ACL_ERROR_INVALID_PARAM


def get_addr(handle: int) -> int:
    """Mirrors ``aclGetDataBufferAddr``: the address, 0 for a null or unknown handle."""
    buf = _find(handle)
    return 0 if buf is None else buf.span[0]


def get_size(handle: int) -> int:
    """Mirrors ``aclGetDataBufferSizeV2`` (and the older ``aclGetDataBufferSize``, which
    returns a ``uint32_t``: see :func:`get_size_u32`); 0 for a null or unknown handle."""
    buf = _find(handle)
    return 0 if buf is None else buf.span[1]


def get_size_u32(handle: int) -> int:
    """Mirrors ``aclGetDataBufferSize``: the size truncated to 32 bits, as its C type is."""
    return get_size(handle) & 0xFFFFFFFF


def update(handle: int, data: int, size: int) -> int:
    """Mirrors ``aclUpdateDataBuffer``: point the buffer at other memory; returns ``ret``."""
    span = (_uint(data, "data"), _uint(size, "size"))
    buf = _find(handle)
    if buf is None:
        return errors.ACL_ERROR_INVALID_PARAM
    buf.span = span
    return 0


def type_size(data_type: int) -> int:
    """Mirrors ``aclDataTypeSize``: bytes per element of an ``aclDataType``; 0 for
    ``ACL_STRING``, ``ACL_DT_UNDEFINED``, sub-byte and unknown types."""
    return DATA_TYPE_SIZES.get(operator.index(data_type), 0)


def live_count() -> int:
    """Data buffers not yet destroyed (``aclFinalize`` reports them, as the reference's
    resource statistics do)."""
    with _lock:
        return len(_buffers)
