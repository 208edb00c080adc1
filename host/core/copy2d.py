"""2-D copies: ``aclrtMemcpy2d`` and ``aclrtMemcpy2dAsync`` (``height`` rows of ``width``
bytes; rows lie ``spitch`` bytes apart in the source and ``dpitch`` in the destination).

What the reference allows (``hicann/runtime`` docs): the synchronous call copies host to
device or device to host only; the asynchronous one also device to device; any other kind
is ``ACL_ERROR_INVALID_PARAM`` (100000; for the synchronous call the code is UNVERIFIED, the
doc only says "not supported"); ``height`` is at most 5 Mi rows. Our choices where it is
silent: ``width`` may not exceed either pitch, and ``width`` or ``height`` 0 copies nothing
(both 100000 / no-op as CUDA's 2-D copies do).

How: the synchronous copy is one strided numpy copy between the host buffer and this
process's mapping of the arena (the bytes move once, as ``aclrtMemcpy`` moves them). The
asynchronous copy is one ``aclrtMemcpyAsync`` when both sides are contiguous (each pitch
equals ``width``), else one per row, queued in order on the stream, so it inherits that
call's rules: pinned host memory in place, pageable memory staged, P2P checks, the worker's
DMA engine doing device-to-device rows, reserved (VMM) ranges split at mappings. The
synchronous copy takes physical device memory only (a VMM range: 107000).

Threading model: no state; any thread may call in.
"""

from __future__ import annotations

import ctypes

import numpy as np
from numpy.lib.stride_tricks import as_strided

from npuemu.host.core import memory, runtime, vmm
from npuemu.shared import address, errors
from npuemu.shared.enums import MemcpyKind

MAX_HEIGHT = 5 * 1024 * 1024
_K = MemcpyKind
_SYNC_KINDS = (_K.ACL_MEMCPY_HOST_TO_DEVICE, _K.ACL_MEMCPY_DEVICE_TO_HOST)
_ASYNC_KINDS = (*_SYNC_KINDS, _K.ACL_MEMCPY_DEVICE_TO_DEVICE)


def _invalid(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def _args(dst: object, dpitch: object, src: object, spitch: object, width: object,
          height: object, kind: object, kinds: tuple) -> tuple[int, int, int, int, int, int,
                                                                int]:
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
    if width and height and (dst <= 0 or src <= 0):
        raise _invalid("null pointer")
    return dst, dpitch, src, spitch, width, height, kind


def _grid(flat: np.ndarray, pitch: int, width: int, height: int) -> np.ndarray:
    """The ``height`` rows of ``width`` bytes, ``pitch`` apart, of ``flat`` (a view)."""
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
    h2d = kind == _K.ACL_MEMCPY_HOST_TO_DEVICE
    dev, dev_pitch, host, host_pitch = (dst, dpitch, src, spitch) if h2d else \
        (src, spitch, dst, dpitch)
    if not address.is_device_ptr(dev) or address.is_device_ptr(host):
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"memcpy kind {_K(kind).name} does not match the addresses")
    runtime.get().current()
    dev_extent = (height - 1) * dev_pitch + width
    host_extent = (height - 1) * host_pitch + width
    runtime.get().host_maps.check(host, host_extent, write=not h2d)
    view = memory.host_view(dev, dev_extent)  # checks the range: 107000, 507054
    dev_grid = _grid(np.frombuffer(view, np.uint8), dev_pitch, width, height)
    host_grid = _grid(np.frombuffer((ctypes.c_char * host_extent).from_address(host),
                                    np.uint8), host_pitch, width, height)
    if h2d:
        np.copyto(dev_grid, host_grid)
    else:
        np.copyto(host_grid, dev_grid)
    memory.find(dev, dev_extent).link.check_alive()  # a card that died meanwhile fails it


def memcpy2d_async(dst: object, dpitch: object, src: object, spitch: object, width: object,
                   height: object, kind: object, stream: object) -> None:
    """Mirrors ``aclrtMemcpy2dAsync``: H2D, D2H or D2D queued on ``stream`` (module
    docstring); returns as ``aclrtMemcpyAsync`` does for each row (after the copy when the
    host memory is pageable and the direction is D2H)."""
    dst, dpitch, src, spitch, width, height, kind = _args(
        dst, dpitch, src, spitch, width, height, kind, _ASYNC_KINDS)
    if not width or not height:
        return
    if dpitch == spitch == width:
        n = width * height
        vmm.memcpy_async(dst, n, src, n, kind, stream)
        return
    for row in range(height):
        vmm.memcpy_async(dst + row * dpitch, width, src + row * spitch, width, kind, stream)
