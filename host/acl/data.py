"""Data buffers and data-type sizes of the top-level ``acl`` module (``aclCreateDataBuffer``,
``aclDataTypeSize`` and friends), shared by ``acl.op`` and ``acl.mdl``.

An ``aclDataBuffer`` only describes memory (an address and a size); it never owns or checks
it, as in the real runtime. Handles are ints; a null or unknown handle behaves like a null
``aclDataBuffer*``: getters return 0, ``destroy``/``update`` return ACL_ERROR_INVALID_PARAM
(100000) (hardware would dereference it: stricter, never looser). Nothing here blocks.

The buffers themselves live in one table, ``npuemu.host.ops.desc.BUFFERS`` (``acl.op`` and
``acl.mdl`` look them up there, and every change bumps the op executor's generation); this
module adds pyACL's argument rules on top.

Threading model: the table and its lock belong to ``host/ops/desc.py``; nothing here holds
state of its own.
"""

from __future__ import annotations

import operator

from npuemu.host.ops import desc as _store
from npuemu.host.ops import types as _types
from npuemu.shared import errors

_SIZE_LIMIT = 1 << 64  # size_t


def _uint(value: object, what: str) -> int:
    """``value`` as a ``size_t``-range int; TypeError for a non-integer (as pyACL's parser
    raises), OverflowError out of range (as its parser does for C ints)."""
    if isinstance(value, bool):
        return int(value)
    number = operator.index(value)  # type: ignore[arg-type]  # its TypeError is the answer
    if not 0 <= number < _SIZE_LIMIT:
        raise OverflowError(f"{what} {number} is out of range for an unsigned 64-bit value")
    return number


def create(data: int, size: int) -> int:
    """Mirrors ``aclCreateDataBuffer``: a handle describing ``size`` bytes at ``data``
    (0, 0 is allowed: an empty buffer). pyACL returns the handle alone."""
    return _store.create_data_buffer(_uint(data, "data"), _uint(size, "size")).handle


def destroy(handle: int) -> int:
    """Mirrors ``aclDestroyDataBuffer`` (the memory itself is not freed); returns ``ret``."""
    try:
        _store.destroy_data_buffer(handle)
    except errors.AclError as err:
        return err.code
    return 0


def get_addr(handle: int) -> int:
    """Mirrors ``aclGetDataBufferAddr``: the address, 0 for a null or unknown handle."""
    buf = _store.buffer_of(handle)
    return 0 if buf is None else buf.addr


def get_size(handle: int) -> int:
    """Mirrors ``aclGetDataBufferSizeV2`` (and the older ``aclGetDataBufferSize``, which
    returns a ``uint32_t``: see :func:`get_size_u32`); 0 for a null or unknown handle."""
    buf = _store.buffer_of(handle)
    return 0 if buf is None else buf.size


def get_size_u32(handle: int) -> int:
    """Mirrors ``aclGetDataBufferSize``: the size truncated to 32 bits, as its C type is."""
    return get_size(handle) & 0xFFFFFFFF


def update(handle: int, data: int, size: int) -> int:
    """Mirrors ``aclUpdateDataBuffer``: point the buffer at other memory; returns ``ret``."""
    span = (_uint(data, "data"), _uint(size, "size"))
    try:
        _store.update_data_buffer(handle, *span)
    except errors.AclError as err:
        return err.code
    return 0


def type_size(data_type: int) -> int:
    """Mirrors ``aclDataTypeSize``: bytes per element of an ``aclDataType``, as the
    real runtime's switch gives them (``ACL_DT_UNDEFINED``/``ACL_STRING`` 0, the sub-byte
    ``ACL_INT4``/``ACL_UINT1`` 1, and 8 from its default branch for any unlisted value).
    A value outside a C ``int`` is OverflowError, as pyACL's argument parser raises."""
    value = operator.index(data_type)
    if not -(2**31) <= value < 2**31:
        raise OverflowError(f"data type {value} is out of range for a C int")
    return _types.data_type_size(value)


def live_count() -> int:
    """Data buffers not yet destroyed (``aclFinalize`` reports them, as the real runtime's
    resource statistics do)."""
    return len(_store.BUFFERS)
