"""DVPP descriptors and channels: ``acldvppCreatePicDesc`` and its getters and setters,
batch picture descriptors, channel descriptors and channels, ROI, resize, JPEGE and border
configurations. Nothing here blocks (the first picture descriptor of a process attaches it
to its node and creates a pinned block of records).

A picture descriptor is a ``PIC_DESC`` record (``shared/media.py``) in pinned host memory; its
handle is the record's address. Setters write the record at once; a DVPP task reads it on the
card when it starts and writes back what it found (a decode's width, height, strides; the ret
code), so getters read the card's results after a synchronize, as with the real runtime.
Setters take any value of the C type (``uint32_t``); the rules are checked by the operations
(100000 when a call queues a task, 507018 for the task when the card runs it).

Other descriptors are plain host objects. Every handle is an int; an unknown or destroyed
handle gives 100000 from setters and destroy calls and the C type's default from getters
(0, or ``PIXEL_FORMAT_YUV_400`` for a format), as pyACL's NULL checks do.

Threading model: ``_lock`` guards ``_objects`` (handle -> descriptor) and the record slabs'
free lists; a descriptor's own fields are the caller's (the real runtime does not lock them
either).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, TypeVar

from npuemu.host.core import memory, runtime
from npuemu.host.driver.interface import Link
from npuemu.shared import errors
from npuemu.shared import media as m

_P = m.PIC_DESC
_RECORD = ctypes.c_uint64 * _P.words
SLAB_RECORDS = 1024
U32 = 1 << 32

_lock = threading.Lock()
_objects: dict[int, Any] = {}
_free_records: list[int] = []
_slabs: list[int] = []  # base addresses of the pinned blocks holding records
_handles = itertools.count(0x7D000000, 0x40)  # pointer-like ints for non-record handles


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def _u32(value: object, what: str) -> int:
    number = runtime.index(value, errors.ACL_ERROR_INVALID_PARAM, what)
    if not 0 <= number < U32:
        raise _param(f"{what} {number} is not a uint32_t")
    return number


_T = TypeVar("_T")


def lookup(handle: object, kind: type[_T], what: str) -> _T:
    """The live descriptor of ``kind`` behind ``handle``; 100000 otherwise."""
    obj = _objects.get(handle) if type(handle) is int else None
    if not isinstance(obj, kind):
        raise _param(f"{handle!r} is not a live {what}")
    return obj


def register(obj: Any, handle: int | None = None) -> int:
    """Publish ``obj`` under a new handle (or ``handle``); returns the handle."""
    handle = next(_handles) if handle is None else handle
    with _lock:
        _objects[handle] = obj
    return handle


def _forget(handle: object, kind: type, what: str) -> Any:
    with _lock:
        obj = _objects.get(handle) if type(handle) is int else None
        if not isinstance(obj, kind):
            raise _param(f"{handle!r} is not a live {what}")
        del _objects[handle]  # type: ignore[arg-type]
    return obj


# picture descriptors ---------------------------------------------------------------------
def _take_record() -> int:
    with _lock:
        if _free_records:
            return _free_records.pop()
    rt = runtime.get()
    rt.ensure_node()
    pinned, _staging = rt.pools()
    base = pinned.malloc(SLAB_RECORDS * _P.size)
    with _lock:
        _slabs.append(base)
        _free_records.extend(base + i * _P.size for i in range(SLAB_RECORDS - 1, 0, -1))
    return base


@dataclass(eq=False)
class PicDesc:
    """``acldvppPicDesc``: its record's address and words."""

    addr: int
    words: Any = field(repr=False)
    slab: int = 0
    """Base of the pinned block that holds the record, once ``pin_records`` found it (the
    record never moves)."""

    def get(self, index: int) -> int:
        return int(self.words[index])


def create_pic_desc() -> int:
    """Mirrors ``acldvppCreatePicDesc``: a zeroed record (format 0, sizes 0)."""
    addr = _take_record()
    words = _RECORD.from_address(addr)
    for i in range(_P.words):
        words[i] = 0
    return register(PicDesc(addr, words), addr)


def destroy_pic_desc(handle: object) -> None:
    """Mirrors ``acldvppDestroyPicDesc``. A descriptor of a batch is destroyed with it."""
    pic = lookup(handle, PicDesc, "picture descriptor")
    if any(pic in b.pics for b in list(_objects.values()) if isinstance(b, BatchPicDesc)):
        raise _param(f"picture descriptor {handle} belongs to a batch descriptor")
    _forget(handle, PicDesc, "picture descriptor")
    with _lock:
        _free_records.append(pic.addr)


def set_pic_field(handle: object, index: int, value: object, what: str) -> None:
    """One setter of ``acldvppSetPicDesc*`` (data is a pointer: any u64; the rest u32)."""
    pic = lookup(handle, PicDesc, "picture descriptor")
    if index == _P.DATA:
        number = runtime.index(value, errors.ACL_ERROR_INVALID_PARAM, what)
        if not 0 <= number < 1 << 64:
            raise _param(f"{what} {number} is not a pointer")
    else:
        number = _u32(value, what)
    pic.words[index] = number


def get_pic_field(handle: object, index: int) -> int:
    """One getter of ``acldvppGetPicDesc*``; 0 for an unknown handle."""
    pic = _objects.get(handle) if type(handle) is int else None
    return pic.get(index) if isinstance(pic, PicDesc) else 0


def pin_records(link: Link, pics: list[PicDesc]) -> None:
    """Let ``link``'s card read and write these records (maps their slab once per card)."""
    rt = runtime.get()
    assert rt.pinned is not None
    for pic in pics:
        if pic.slab in link.pinned:  # mapped by this card before
            continue
        seg = rt.pinned.find(pic.addr)
        if seg is None:
            raise _param(f"picture descriptor 0x{pic.addr:x} has no pinned record")
        memory.pin(link, seg.address, seg)
        pic.slab = seg.address


@dataclass(eq=False)
class BatchPicDesc:
    """``acldvppBatchPicDesc``: ``batch_size`` picture descriptors."""

    pics: list[PicDesc]
    handles: list[int]


def create_batch_pic_desc(batch_size: object) -> int:
    """Mirrors ``acldvppCreateBatchPicDesc`` (1 to 256 pictures; 0 for another size)."""
    n = _u32(batch_size, "batch size")
    if not 1 <= n <= 256:
        raise _param(f"batch size {n} not in [1, 256]")
    handles = [create_pic_desc() for _ in range(n)]
    pics = [lookup(h, PicDesc, "picture descriptor") for h in handles]
    return register(BatchPicDesc(pics, handles))


def get_pic_desc(batch: object, index: object) -> int:
    """Mirrors ``acldvppGetPicDesc``: the index-th picture of a batch (0 if out of range)."""
    b = _objects.get(batch) if type(batch) is int else None
    if not isinstance(b, BatchPicDesc) or type(index) is not int or not 0 <= index < len(b.pics):
        return 0
    return b.handles[index]


def destroy_batch_pic_desc(handle: object) -> None:
    """Mirrors ``acldvppDestroyBatchPicDesc`` (with its pictures)."""
    batch = _forget(handle, BatchPicDesc, "batch picture descriptor")
    for h, pic in zip(batch.handles, batch.pics, strict=True):
        with _lock:
            _objects.pop(h, None)
            _free_records.append(pic.addr)


# channels ----------------------------------------------------------------------------------
@dataclass(eq=False)
class ChannelDesc:
    """``acldvppChannelDesc``: its mode mask and, once created, its channel id; the values of
    ``acldvppSetChannelDescParam`` (``set_channel_param``)."""

    mode: int = m.ALL_CHANNEL_MODES | m.PNGD_MODE
    channel_id: int = 0
    created: bool = False
    csc_matrix: int = 0
    height: int = m.JPEGE_MAX
    width: int = m.JPEGE_MAX
    precision_mode: int = m.JpegdPrecisionMode.ACL_YUVOUT_ALIGN_DOWN_COMPAT


_channel_ids = itertools.count(0)


def create_channel_desc() -> int:
    return register(ChannelDesc())


def destroy_channel_desc(handle: object) -> None:
    _forget(handle, ChannelDesc, "channel descriptor")


def set_channel_desc_mode(handle: object, mode: object) -> None:
    """Mirrors ``acldvppSetChannelDescMode``: an OR of ``acldvppChannelMode`` (1 to 7)."""
    chan = lookup(handle, ChannelDesc, "channel descriptor")
    value = _u32(mode, "channel mode")
    if not 1 <= value <= m.ALL_CHANNEL_MODES:
        raise _param(f"channel mode {value} is not an OR of acldvppChannelMode (1, 2, 4)")
    if chan.created:
        raise _param("the channel mode is set before acldvppCreateChannel")
    chan.mode = value


def create_channel(handle: object) -> None:
    """Mirrors ``acldvppCreateChannel`` (100000 for a channel already created)."""
    chan = lookup(handle, ChannelDesc, "channel descriptor")
    if chan.created:
        raise _param(f"channel descriptor {handle} already has a channel")
    runtime.get().current()  # a channel belongs to a context (107002 without one)
    chan.channel_id, chan.created = next(_channel_ids), True


def destroy_channel(handle: object) -> None:
    chan = lookup(handle, ChannelDesc, "channel descriptor")
    if not chan.created:
        raise _param(f"channel descriptor {handle} has no channel")
    chan.created = False


_CPT = m.ChannelDescParamType
CSC_MATRICES = 6
"""Values of ``acldvppCscMatrix`` (0 to 5)."""
_PARAM_BYTES: dict[int, int] = {
    _CPT.ACL_DVPP_CSC_MATRIX_UINT32: 4, _CPT.ACL_DVPP_MODE_UINT32: 4,
    _CPT.ACL_DVPP_CHANNEL_ID_UINT64: 8, _CPT.ACL_DVPP_CHANNEL_HEIGHT_UINT32: 4,
    _CPT.ACL_DVPP_CHANNEL_WIDTH_UINT32: 4, _CPT.ACL_DVPP_JPEGD_PRECISION_MODE_ENUM: 4}
"""Bytes of each ``acldvppChannelDescParamType``'s value (its C type)."""


def _param_type(param_type: object) -> int:
    value = runtime.index(param_type, errors.ACL_ERROR_INVALID_PARAM, "param type")
    if value not in _PARAM_BYTES:
        raise _param(f"{value} is not an acldvppChannelDescParamType (0 to 5)")
    return value


def set_channel_param(handle: object, param_type: object, value: object) -> None:
    """Mirrors ``acldvppSetChannelDescParam`` (does not block): the CSC matrix
    (``acldvppCscMatrix``, 0 to 5; kept, read back: VPC converts colour by BT.601 as
    ``cv2.cvtColor`` does whatever it says), the mode (as ``acldvppSetChannelDescMode``), the
    channel height and width (JPEGE's; 32 to 8192, the default and the most on this SoC, so
    they change nothing here) and the JPEGD precision mode (``ALIGN_DOWN`` and the default
    ``ALIGN_DOWN_COMPAT``, what JPEGD does; ``ALIGN_UP`` is 200006: not emulated, our
    choice). The channel id is the runtime's (``acldvppCreateChannel`` gives it): setting it
    is 100000 (our choice), as is an unknown type or a value out of range."""
    chan = lookup(handle, ChannelDesc, "channel descriptor")
    kind = _param_type(param_type)
    if kind == _CPT.ACL_DVPP_CHANNEL_ID_UINT64:
        raise _param("the channel id is given by acldvppCreateChannel; it cannot be set")
    if kind == _CPT.ACL_DVPP_MODE_UINT32:
        set_channel_desc_mode(handle, value)
        return
    number = _u32(value, "channel parameter")
    if kind == _CPT.ACL_DVPP_CSC_MATRIX_UINT32:
        if number >= CSC_MATRICES:
            raise _param(f"csc matrix {number} is not an acldvppCscMatrix (0 to 5)")
        chan.csc_matrix = number
    elif kind == _CPT.ACL_DVPP_JPEGD_PRECISION_MODE_ENUM:
        if number not in tuple(m.JpegdPrecisionMode):
            raise _param(f"{number} is not an acldvppJpegdPrecisionMode (0 to 2)")
        if number == m.JpegdPrecisionMode.ACL_YUVOUT_ALIGN_UP:
            raise errors.error_for(errors.ACL_ERROR_FEATURE_UNSUPPORTED,
                                   "JPEGD rounds odd sides down only (ALIGN_UP not emulated)")
        chan.precision_mode = number
    else:
        if not m.JPEGE_MIN <= number <= m.JPEGE_MAX:
            raise _param(f"channel side {number} not in [{m.JPEGE_MIN}, {m.JPEGE_MAX}]")
        setattr(chan, "height" if kind == _CPT.ACL_DVPP_CHANNEL_HEIGHT_UINT32 else "width",
                number)


def get_channel_param(handle: object, param_type: object) -> tuple[int, int]:
    """Mirrors ``acldvppGetChannelDescParam`` (does not block): ``(bytes of the value, the
    value)``: what was set or the default (CSC matrix 0, the mode mask as set, the channel
    id once created else 0, height and width 8192, precision mode 2)."""
    chan = lookup(handle, ChannelDesc, "channel descriptor")
    kind = _param_type(param_type)
    values: dict[int, int] = {
        _CPT.ACL_DVPP_CSC_MATRIX_UINT32: chan.csc_matrix,
        _CPT.ACL_DVPP_MODE_UINT32: chan.mode & m.ALL_CHANNEL_MODES,
        _CPT.ACL_DVPP_CHANNEL_ID_UINT64: chan.channel_id if chan.created else 0,
        _CPT.ACL_DVPP_CHANNEL_HEIGHT_UINT32: chan.height,
        _CPT.ACL_DVPP_CHANNEL_WIDTH_UINT32: chan.width,
        _CPT.ACL_DVPP_JPEGD_PRECISION_MODE_ENUM: chan.precision_mode}
    return _PARAM_BYTES[kind], values[kind]


def channel_for(handle: object, mode: int, what: str) -> ChannelDesc:
    """The created channel behind ``handle`` serving ``mode``; 100000 otherwise."""
    chan = lookup(handle, ChannelDesc, "channel descriptor")
    if not chan.created:
        raise _param(f"{what}: channel descriptor {handle} has no channel "
                     "(acldvppCreateChannel)")
    if not chan.mode & mode:
        raise _param(f"{what}: the channel was created for mode {chan.mode}, not {mode}")
    return chan


# configurations ------------------------------------------------------------------------------
@dataclass(eq=False)
class RoiConfig:
    """``acldvppRoiConfig``: inclusive offsets (left and top even, right and bottom odd)."""

    left: int
    right: int
    top: int
    bottom: int

    def area(self) -> list[int]:
        return [self.left, self.right, self.top, self.bottom]


def create_roi_config(left: object, right: object, top: object, bottom: object) -> int:
    return register(RoiConfig(_u32(left, "left"), _u32(right, "right"), _u32(top, "top"),
                               _u32(bottom, "bottom")))


def set_roi_field(handle: object, name: str, value: object) -> None:
    setattr(lookup(handle, RoiConfig, "ROI config"), name, _u32(value, name))


@dataclass(eq=False)
class ResizeConfig:
    """``acldvppResizeConfig``: the interpolation (``Interpolation``)."""

    interpolation: int = 0


def set_resize_interpolation(handle: object, value: object) -> None:
    """Mirrors ``acldvppSetResizeConfigInterpolation`` (0, 1 or 2 here; 100000 otherwise)."""
    cfg = lookup(handle, ResizeConfig, "resize config")
    number = _u32(value, "interpolation")
    if number not in tuple(m.Interpolation):
        raise _param(f"interpolation {number} is not 0 (default), 1 (bilinear) or 2 (nearest)")
    cfg.interpolation = number


@dataclass(eq=False)
class JpegeConfig:
    """``acldvppJpegeConfig``: the encoding level, 0 to 100 (0 encodes as 100; our default
    is 100, CANN documents none)."""

    level: int = 100


def set_jpege_level(handle: object, value: object) -> None:
    cfg = lookup(handle, JpegeConfig, "JPEGE config")
    number = _u32(value, "level")
    if number > 100:
        raise _param(f"JPEGE level {number} not in [0, 100]")
    cfg.level = number


@dataclass(eq=False)
class BorderConfig:
    """``acldvppBorderConfig``: border type, the four widths and four values."""

    border_type: int = 0
    top: int = 0
    bottom: int = 0
    left: int = 0
    right: int = 0
    values: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])


def set_border_value(handle: object, index: object, value: object) -> None:
    cfg = lookup(handle, BorderConfig, "border config")
    i = _u32(index, "index")
    if i >= 4 or not isinstance(value, int | float) or isinstance(value, bool):
        raise _param(f"border value {value!r} at index {i}: index 0 to 3 and a number")
    if not 0 <= value <= 255:
        raise _param(f"border value {value} not in [0, 255]")
    cfg.values[i] = float(value)


def set_border_type(handle: object, value: object) -> None:
    cfg = lookup(handle, BorderConfig, "border config")
    number = _u32(value, "border type")
    if number not in tuple(m.BorderType):
        raise _param(f"border type {number} is not an acldvppBorderType")
    cfg.border_type = number


def set_border_side(handle: object, name: str, value: object) -> None:
    setattr(lookup(handle, BorderConfig, "border config"), name, _u32(value, name))


def create(kind: type) -> int:
    """A new configuration of ``kind`` with its defaults."""
    return register(kind())


def destroy(handle: object, kind: type, what: str) -> None:
    _forget(handle, kind, what)


def getter(handle: object, kind: type, name: str, default: Any = 0) -> Any:
    """A field of a live configuration; ``default`` for an unknown handle."""
    obj = _objects.get(handle) if type(handle) is int else None
    return getattr(obj, name) if isinstance(obj, kind) else default
