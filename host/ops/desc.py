"""Tensor descriptors, op attributes and data buffers (``aclCreateTensorDesc``,
``aclopCreateAttr``, ``aclCreateDataBuffer`` and their getters and setters), raising AclError.

These are host objects (the real ones are plain C++ structs): no device is involved, and
handles are pointer-like ints. Every change bumps ``GENERATION`` so the op executor's fast
path (which caches the match and pointers of a tuple of handles) notices it;
handles are never reused, so a destroyed handle can never alias a new object.

Data buffers: helper "pyacl" adds the pyACL data-buffer calls in its own module of
``host/acl``; until that is merged, this minimal version (address + size, no checks at
creation, as ``aclCreateDataBuffer`` does) is what ``acl.op`` uses.

Threading model: the handle tables are dicts mutated under ``_lock``; lookups read them
without a lock (a dict read is atomic under the GIL). Descriptors are not locked: mutating
one while another thread executes an op with it is a program error, as in C.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, SupportsIndex, cast

from npuemu.host.core import hostread
from npuemu.host.ops import types as T

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_DIMS = 128
"""Most dims a descriptor takes: ``ACL_MAX_DIM_CNT`` of the CANN headers (that the real
``aclCreateTensorDesc`` refuses more is our assumption, not documented)."""
_lock = threading.Lock()
_handles = itertools.count(0x7D000040, 0x40)
DESCS: dict[int, TensorDesc] = {}
ATTRS: dict[int, OpAttr] = {}
BUFFERS: dict[int, DataBuffer] = {}
GENERATION = [0]
"""Bumped by every change of a descriptor, attribute or data buffer (and every destroy): the
op executor's fast path is valid only while it is unchanged."""


def _bump() -> None:
    GENERATION[0] += 1


def _new_handle(table: dict, obj: object) -> int:
    with _lock:
        handle = next(_handles)
        table[handle] = obj
    return handle


# tensor descriptors ---------------------------------------------------------------------------
@dataclass(eq=False)
class TensorDesc:
    """An ``aclTensorDesc``. ``dims == (-2,)`` is unknown rank; -1 is a dynamic dim."""

    dtype: int
    dims: tuple[int, ...]
    format: int
    storage_format: int | None = None
    storage_dims: tuple[int, ...] | None = None
    origin_format: int | None = None
    origin_dims: tuple[int, ...] | None = None
    name: str = ""
    shape_range: tuple[tuple[int, int], ...] = ()
    value_range: tuple[tuple[int, int], ...] = ()
    const: bytes | None = None
    memtype: int = T.ACL_MEMTYPE_DEVICE
    dynamic_input: str = ""
    handle: int = 0
    _key: tuple | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple:
        """What the op map hashes of this descriptor (dtype, formats, dims, ranges, const data,
        placement: what the real op map keys on), computed once."""
        if self._key is None:
            self._key = (self.dtype, self.format, self.storage_format, self.dims,
                         self.shape_range, self.const is not None, self.const, self.memtype)
        return self._key

    @property
    def dynamic(self) -> bool:
        return any(d < 0 for d in self.dims)

    @property
    def unused(self) -> bool:
        """``(ACL_DT_UNDEFINED, 0 dims, ACL_FORMAT_UNDEFINED)``: an absent optional tensor."""
        return self.dtype == T.DT_UNDEFINED and self.format == T.ACL_FORMAT_UNDEFINED

    def changed(self) -> None:
        self._key = None
        _bump()

    def element_count(self) -> int:
        """``aclGetTensorDescElementCount``: 1 for a scalar, 0 when a dim is negative or the
        product overflows int64 (the real call returns 0 on overflow)."""
        n = 1
        for d in self.dims:
            if d < 0:
                return 0
            n *= d
        return n if n <= INT64_MAX else 0

    def size(self) -> int:
        """``aclGetTensorDescSize``: element count x data type size, no padding; 0 when that
        product overflows int64 too (never a wrapped or negative size)."""
        size = self.element_count() * T.data_type_size(self.dtype)
        return size if size <= INT64_MAX else 0


def _dims(dims: object) -> tuple[int, ...]:
    """The dims as ``int64_t`` values: TypeError for a non-list or a non-integer dim,
    OverflowError for a dim outside int64 (C cannot hold it)."""
    if not isinstance(dims, list | tuple):
        raise TypeError(f"dims must be a list of ints, not {type(dims).__name__}")
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, SupportsIndex):
            raise TypeError(f"dim {d!r} is not an int")
        value = operator.index(d)
        if not INT64_MIN <= value <= INT64_MAX:
            raise OverflowError(f"dim {value} is out of range for int64")
        out.append(value)
    return tuple(out)


def _int64(value: object) -> int:
    """One ``int64_t`` (a dim, a range bound): TypeError / OverflowError otherwise."""
    return _dims([value])[0]


def _c_int(value: object) -> int | None:
    """``value`` as a C ``int`` (an ``aclDataType`` or ``aclFormat``), None if it is not."""
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        return None
    number = operator.index(value)
    return number if -(1 << 31) <= number < 1 << 31 else None


def create_tensor_desc(dtype: int, dims: object, fmt: int) -> TensorDesc | None:
    """``aclCreateTensorDesc(dtype, numDims, dims, format)``; ``None`` (pyACL: 0) for bad
    dims: below -2, -2 with other dims, outside int64, more than :data:`MAX_DIMS`, or a
    dtype or format that is not a C int (a non-list raises TypeError, as pyACL's parser
    does). ``[]`` is a scalar."""
    try:
        shape = _dims(dims)
    except OverflowError:
        return None
    kind, layout = _c_int(dtype), _c_int(fmt)
    if kind is None or layout is None or len(shape) > MAX_DIMS:
        return None
    if any(d < -2 for d in shape) or (-2 in shape and shape != (-2,)):
        return None
    desc = TensorDesc(kind, shape, layout)
    desc.handle = _new_handle(DESCS, desc)
    return desc


def desc_of(handle: object) -> TensorDesc | None:
    return DESCS.get(handle) if type(handle) is int else None


def need_desc(handle: object, what: str = "tensor desc") -> TensorDesc:
    desc = desc_of(handle)
    if desc is None:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"{what} {handle!r} is not a live descriptor")
    return desc


def destroy_tensor_desc(handle: object) -> None:
    """``aclDestroyTensorDesc`` (void; an unknown handle is ignored)."""
    with _lock:
        if DESCS.pop(handle, None) is not None:  # type: ignore[call-overload]
            _bump()


def set_shape_range(desc: TensorDesc, ranges: object) -> None:
    """``aclSetTensorShapeRange``: replaces the list; no validation, as the real call."""
    if not isinstance(ranges, list | tuple):
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, "shape range must be a list of [lo, hi]")
    try:
        desc.shape_range = tuple((_int64(lo), _int64(hi)) for lo, hi in ranges)
    except (TypeError, ValueError, OverflowError) as err:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"bad shape range {ranges!r}") from err
    desc.changed()


def set_const(desc: TensorDesc, ptr: int, size: int) -> None:
    """``aclSetTensorConst``: marks the input const. The real call keeps a non-owning
    pointer; we copy the host bytes now (they are part of the cache key). 100000 unless
    ``[ptr, ptr + size)`` is readable host memory (checked before the copy)."""
    desc.const = hostread.read(ptr, size, "tensor const data", empty_ok=True)
    desc.changed()


def dim_range(desc: TensorDesc, idx: int, n: int) -> list[int]:
    """``aclGetTensorDescDimRange``: ``[lo, hi]`` of dim ``idx``; 100000 past the list."""
    if type(idx) is not int or n < 2 or not 0 <= idx < len(desc.shape_range):
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"no shape range for dim {idx}")
    return list(desc.shape_range[idx])


# op attributes --------------------------------------------------------------------------------
ATTR_TYPES = ("bool", "int", "float", "string", "list_bool", "list_int", "list_float",
              "list_string", "list_list_int", "data_type", "list_data_type")


@dataclass(eq=False)
class OpAttr:
    """An ``aclopAttr``: name -> (type, value); setting a name again overwrites it."""

    values: dict[str, tuple[str, object]] = field(default_factory=dict)
    handle: int = 0
    _digest: tuple | None = None

    @property
    def digest(self) -> tuple:
        """The whole attribute map as one hashable value (the real op map's attr digest)."""
        if self._digest is None:
            self._digest = tuple(sorted(self.values.items()))
        return self._digest

    def get(self, name: str, default: object) -> object:
        found = self.values.get(name)
        return default if found is None else found[1]

    def set(self, kind: str, name: object, value: object) -> None:
        if not isinstance(name, str) or not name:
            raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"attribute name {name!r}")
        self.values[name] = (kind, _attr_value(kind, value))
        self._digest = None
        _bump()


def _attr_value(kind: str, value: object) -> object:
    scalar = {"bool": bool, "int": int, "float": float, "data_type": int}
    items = cast("Iterable[Any]", value)  # for the list kinds: a non-iterable is a TypeError
    try:
        if kind in scalar:
            if value is None or (kind != "bool" and isinstance(value, str)):
                raise TypeError(kind)
            return scalar[kind](value)
        if kind == "string":
            if not isinstance(value, str):
                raise TypeError("string")
            return value
        if kind == "list_list_int":
            return tuple(tuple(int(v) for v in row) for row in items)
        if kind == "list_string":
            if not all(isinstance(v, str) for v in items):
                raise TypeError("list_string")
            return tuple(items)
        base = scalar[kind[5:]]
        return tuple(base(v) for v in items)
    except (TypeError, ValueError, KeyError) as err:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM,
                     f"{value!r} is not a valid {kind} attribute value") from err


def create_attr() -> OpAttr:
    """``aclopCreateAttr``."""
    attr = OpAttr()
    attr.handle = _new_handle(ATTRS, attr)
    return attr


def attr_of(handle: object) -> OpAttr | None:
    """The attribute object, or None for 0/None (no attributes); 100000 for a dead handle."""
    if not handle:
        return None
    attr = ATTRS.get(handle) if type(handle) is int else None
    if attr is None:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"attr {handle!r} is not a live aclopAttr")
    return attr


def destroy_attr(handle: object) -> None:
    """``aclopDestroyAttr`` (void)."""
    with _lock:
        if ATTRS.pop(handle, None) is not None:  # type: ignore[call-overload]
            _bump()


# data buffers ---------------------------------------------------------------------------------
@dataclass(eq=False)
class DataBuffer:
    """An ``aclDataBuffer``: a device address and a size, nothing checked at creation."""

    addr: int
    size: int
    handle: int = 0


def create_data_buffer(ptr: int, size: int) -> DataBuffer:
    """``aclCreateDataBuffer``: ``(0, 0)`` is legal (an absent optional tensor); 100000 for
    an address or size outside ``size_t`` (never a negative or wrapped size)."""
    buf = DataBuffer(*_span(ptr, size))
    buf.handle = _new_handle(BUFFERS, buf)
    return buf


def buffer_of(handle: object) -> DataBuffer | None:
    return BUFFERS.get(handle) if type(handle) is int else None


def destroy_data_buffer(handle: object) -> None:
    """``aclDestroyDataBuffer``: 100000 for an unknown handle; the memory is not freed."""
    with _lock:
        if BUFFERS.pop(handle, None) is None:  # type: ignore[call-overload]
            raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"{handle!r} is not a data buffer")
        _bump()


def update_data_buffer(handle: object, ptr: int, size: int) -> None:
    """``aclUpdateDataBuffer``: overwrites both fields; 100000 for an unknown handle."""
    buf = buffer_of(handle)
    if buf is None:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"{handle!r} is not a data buffer")
    buf.addr, buf.size = _span(ptr, size)
    _bump()


def _span(ptr: object, size: object) -> tuple[int, int]:
    """``(ptr, size)`` as ``void*`` / ``size_t`` values; 100000 otherwise."""
    values = []
    for value in (ptr, size):
        if isinstance(value, bool) or not isinstance(value, SupportsIndex) or not (
                0 <= operator.index(value) < 1 << 64):
            raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"data buffer {ptr!r}, {size!r}: not a "
                                                    "pointer and size_t size")
        values.append(operator.index(value))
    return values[0], values[1]
