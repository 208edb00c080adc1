"""2-D copies: ``aclrtMemcpy2d`` and ``aclrtMemcpy2dAsync`` (``height`` rows of ``width``
bytes; rows lie ``spitch`` bytes apart in the source and ``dpitch`` in the destination).

What CANN's documentation allows: the synchronous call copies host to
device or device to host only; the asynchronous one also device to device; any other kind
is ``ACL_ERROR_INVALID_PARAM`` (100000; for the synchronous call the code is our choice, the
doc only says "not supported"); ``height`` is at most 5 Mi rows. Our choices where it is
silent: ``width`` may not exceed either pitch, and ``width`` or ``height`` 0 copies nothing
(both 100000 / no-op as CUDA's 2-D copies do).

How: the synchronous copy is one strided numpy copy between the host buffer and this
process's mapping of the arena (the bytes move once, as ``aclrtMemcpy`` moves them). The
asynchronous copy is one ``aclrtMemcpyAsync`` when both sides are contiguous (each pitch
equals ``width``); otherwise one task on the stream, a host function (``aclrtLaunchHostFunc``)
that makes the same strided copy through the host's mappings when the stream reaches it, so
a copy of any height is one task and nothing is staged. Both sides are checked when the
call is made (device memory in one live allocation, and for device to device the P2P rules
of ``aclrtMemcpyAsync``; host memory mapped). With pageable host memory the call returns
after the copy, as the documentation says; with pinned host memory or device to device at once.
Partial: that task shows as a host function in profiles (not a DMA copy), and a card that
dies during it is reported by the next call that touches the card, not by this task.
Reserved (VMM) ranges are taken by the contiguous form only (else 107000).

Threading model: no state; any thread may call in.
"""

from __future__ import annotations

import ctypes

import numpy as np
from numpy.lib.stride_tricks import as_strided

from npuemu.host.core import callbacks, capture, memory, p2p, runtime, vmm
from npuemu.host.core import stream as streams
from npuemu.shared import address, errors
from npuemu.shared.enums import MemcpyKind

MAX_HEIGHT = 5 * 1024 * 1024
_K = MemcpyKind
_SIDES: dict[int, tuple[bool, bool]] = {
    _K.ACL_MEMCPY_HOST_TO_DEVICE: (False, True), _K.ACL_MEMCPY_DEVICE_TO_HOST: (True, False),
    _K.ACL_MEMCPY_DEVICE_TO_DEVICE: (True, True)}
"""(source on a device, destination on a device) of each kind the 2-D copies take."""
_SYNC_KINDS = (_K.ACL_MEMCPY_HOST_TO_DEVICE, _K.ACL_MEMCPY_DEVICE_TO_HOST)
_ASYNC_KINDS = tuple(_SIDES)


def _invalid(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def _args(dst: object, dpitch: object, src: object, spitch: object, width: object,
          height: object, kind: object, kinds: tuple[int, ...]
          ) -> tuple[int, int, int, int, int, int, int]:
    values = [runtime.index(v, errors.ACL_ERROR_INVALID_PARAM, name) for v, name in
              ((dst, "dst"), (dpitch, "dpitch"), (src, "src"), (spitch, "spitch"),
               (width, "width"), (height, "height"), (kind, "kind"))]
    dst, dpitch, src, spitch, width, height, kind = values
    if kind not in kinds:
        raise _invalid(f"memcpy kind {kind} is not one of {[int(k) for k in kinds]} here")
    if min(dpitch, spitch, width, height) < 0 or height > MAX_HEIGHT:
        raise _invalid(f"height {height} must be in 0..{MAX_HEIGHT}; pitches and width >= 0")
    if width > dpitch or width > spitch:
        raise _invalid(f"width {width} exceeds dpitch {dpitch} or spitch {spitch}")
    if width and height:
        if dst <= 0 or src <= 0:
            raise _invalid("null pointer")
        if (address.is_device_ptr(src), address.is_device_ptr(dst)) != _SIDES[kind]:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"memcpy kind {_K(kind).name} does not match the addresses")
    return dst, dpitch, src, spitch, width, height, kind


def _rows(ptr: int, pitch: int, width: int, height: int, write: bool) -> np.ndarray:
    """The ``height`` rows of ``width`` bytes, ``pitch`` apart, at ``ptr`` as an array over
    this process's memory (its mapping of the arena for device memory), checked: device
    memory inside one live allocation (107000; 507054 on an isolated page), host memory
    mapped (107000)."""
    extent = (height - 1) * pitch + width
    if address.is_device_ptr(ptr):
        flat = np.frombuffer(memory.host_view(ptr, extent), np.uint8)
    else:
        runtime.get().host_maps.check(ptr, extent, write=write)
        flat = np.frombuffer(memoryview((ctypes.c_char * extent).from_address(ptr)), np.uint8)
    return as_strided(flat, (height, width), (pitch, 1), writeable=True)


def memcpy2d(dst: object, dpitch: object, src: object, spitch: object, width: object,
             height: object, kind: object) -> None:
    """Mirrors ``aclrtMemcpy2d`` (synchronous, no stream sync): H2D or D2H only. The device
    side must lie in one live allocation of this process, the host side in this process's
    memory (107000 otherwise)."""
    dst, dpitch, src, spitch, width, height, kind = _args(
        dst, dpitch, src, spitch, width, height, kind, _SYNC_KINDS)
    if not width or not height:
        return
    runtime.get().current()
    capture.check_mode("aclrtMemcpy2d")  # 107030 while a capture's mode forbids it
    np.copyto(_rows(dst, dpitch, width, height, True), _rows(src, spitch, width, height, False))
    dev = dst if kind == _K.ACL_MEMCPY_HOST_TO_DEVICE else src
    memory.find(dev, 1).link.check_alive()  # a card that died meanwhile fails the copy


def memcpy2d_async(dst: object, dpitch: object, src: object, spitch: object, width: object,
                   height: object, kind: object, stream: object) -> None:
    """Mirrors ``aclrtMemcpy2dAsync``: H2D, D2H or D2D queued on ``stream`` (module
    docstring: pageable host memory makes it return after the copy)."""
    dst, dpitch, src, spitch, width, height, kind = _args(
        dst, dpitch, src, spitch, width, height, kind, _ASYNC_KINDS)
    if not width or not height:
        return
    if dpitch == spitch == width:
        n = width * height
        vmm.memcpy_async(dst, n, src, n, kind, stream)
        return
    s = streams.resolve(stream, for_submit=True)
    grids = (_rows(dst, dpitch, width, height, True), _rows(src, spitch, width, height, False))
    p2p.check_copy(s.device, _card(src, s), _card(dst, s))  # as aclrtMemcpyAsync checks
    callbacks.launch_host_func(s.handle, _copy, grids)
    host, pitch = (src, spitch) if kind == _K.ACL_MEMCPY_HOST_TO_DEVICE else (dst, dpitch)
    if kind != _K.ACL_MEMCPY_DEVICE_TO_DEVICE and \
            not memory.is_pinned(s.link, host, (height - 1) * pitch + width):
        seq = s.submitted  # pageable host memory: return after the copy
        s.link.wait_until(lambda: s.done(seq), None)


def _card(ptr: int, stream: streams.Stream) -> int:
    return memory.find(ptr, 1).link.logical if address.is_device_ptr(ptr) else stream.device


def _copy(grids: tuple[np.ndarray, np.ndarray]) -> None:
    np.copyto(*grids)
