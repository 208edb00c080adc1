"""Device allocations on the Pythonic face: ``DeviceBuffer`` (``aclrtMalloc`` bytes).

Blocking
    All copies here are synchronous (``aclrtMemcpy``/``aclrtMemset``): they return once the
    bytes have moved. Buffers come from the host caching allocator (``host/core/caching.py``,
    as torch_npu does): ``malloc`` is one round trip to the device worker (~10 us) unless a
    cached block of its size class is ready (none then); ``free`` keeps the block cached
    (it stays reserved on the card: ``memory_stats()``, ``empty_cache()`` gives it back).

Forked children
    Objects inherited through ``fork`` are inert in the child: ``free`` and ``__del__`` do
    nothing there (the parent still owns the memory); any other call raises 207000.

No threads of its own; what may be shared between threads is said in ``devices.py``.
"""

from __future__ import annotations

import sys
from contextlib import suppress
from typing import Any

import numpy as np

from npuemu.host.api.devices import Device, as_index, check_not_forked
from npuemu.host.core import caching as _caching
from npuemu.host.core import memory as _memory
from npuemu.host.core import runtime as _runtime
from npuemu.host.core.runtime import Allocation
from npuemu.shared import errors
from npuemu.shared.enums import MemcpyKind
from npuemu.shared.errors import DeviceLostError

__all__ = ["DeviceBuffer", "host_view"]

_H2D = MemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE
_D2H = MemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST
_D2D = MemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE


def host_view(data: object, writable: bool) -> tuple[int, int, object]:
    """``(address, nbytes, keepalive)`` of a C-contiguous host buffer (an ndarray, bytes,
    bytearray, memoryview...). ValueError if it is not contiguous or not writable."""
    if isinstance(data, np.ndarray):
        arr = data
    else:
        try:
            view = memoryview(data)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"expected a bytes-like object or ndarray, got "
                            f"{type(data).__name__}") from None
        if not view.c_contiguous:
            raise ValueError("host buffer must be C-contiguous")
        arr = np.frombuffer(view, dtype=np.uint8) if view.nbytes else np.empty(0, np.uint8)
        if writable and view.readonly:
            raise ValueError("host buffer is read-only")
    if not arr.flags.c_contiguous:
        raise ValueError("host array must be C-contiguous (np.ascontiguousarray first)")
    if writable and not arr.flags.writeable:
        raise ValueError("host array is read-only")
    return int(arr.ctypes.data), int(arr.nbytes), arr


class DeviceBuffer:
    """One device allocation (``aclrtMalloc``) of ``nbytes`` bytes at ``ptr`` on ``device``.

    Freed by ``free()`` (idempotent), at the end of a ``with`` block, when garbage collected,
    or implicitly when its device's reference count drops to 0. ``ptr`` stays readable after
    that (for messages); every copy then raises ``ParamError`` 107000.
    """

    def __init__(self, device: Device | int, nbytes: int, policy: int = 0) -> None:
        """``aclrtMalloc(nbytes, policy)`` on ``device``; blocks for one round trip."""
        self._alloc: Allocation | None = None
        self._freed = False
        self.device = device if isinstance(device, Device) else Device(device)
        link = self.device._open().link  # through the host caching allocator
        self._block = _caching.get().malloc(as_index(nbytes), as_index(policy), link)
        self._alloc = self._block.alloc
        self.ptr: int = self._alloc.ptr
        self.nbytes: int = self._block.requested
        self.policy: int = self._alloc.policy

    # lifetime ------------------------------------------------------------------------------
    @property
    def freed(self) -> bool:
        """True once the memory is gone (``free()``, or its device was reset)."""
        if not self._freed and (self._alloc is None or not self._owned()):
            self._freed = True
        return self._freed

    def _owned(self) -> bool:
        """Is our allocation still the live one at ``ptr`` (not released by a reset, and not
        reused by a later allocation at the same address)?"""
        alloc = self._alloc
        return (alloc is not None and _runtime.get().allocations.get(alloc.ptr) is alloc
                and _caching.get().lent(alloc.ptr) is self._block)

    def free(self) -> None:
        """``aclrtFree``: queue the release to the device (does not wait). Idempotent; a
        no-op if the device was reset meanwhile, or in a forked child. A lost device
        (``DeviceLostError``) is not reported here: its memory is gone with it."""
        if self._freed or self._alloc is None:
            return
        self._freed = True
        if _runtime.get().forked:
            return
        with suppress(DeviceLostError):  # a no-op if its card was reset meanwhile
            _caching.get().free_block(self._block)

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __del__(self, _is_shutting_down: Any = sys.is_finalizing) -> None:
        # At interpreter shutdown the runtime's atexit hook has already released everything.
        # A finaliser must never raise.
        if _is_shutting_down():
            return
        with suppress(BaseException):
            self.free()

    def _check(self, what: str) -> None:
        check_not_forked(repr(self))
        if self.freed:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"{what}: {self!r} was freed (or its device was reset)")

    # copies (all synchronous) --------------------------------------------------------------
    def _h2d(self, src: int, count: int, offset: int = 0) -> None:
        self._check("copy to device")
        if count:
            with self.device._current():
                _memory.memcpy(self.ptr + offset, self.nbytes - offset, src, count, _H2D)

    def _d2h(self, dst: int, count: int, offset: int = 0) -> None:
        self._check("copy to host")
        if count:
            with self.device._current():
                _memory.memcpy(dst, count, self.ptr + offset, count, _D2H)

    def copy_from_host(self, data: object) -> None:
        """``aclrtMemcpy`` host-to-device of all of ``data`` (a C-contiguous ndarray or bytes-like
        object) to the start of this buffer. Blocks until done. ValueError if it is larger
        than the buffer or not contiguous."""
        addr, count, keep = host_view(data, writable=False)
        if count > self.nbytes:
            raise ValueError(f"{count} bytes do not fit in {self!r}")
        self._h2d(addr, count)
        del keep

    def copy_to_host(self, out: Any = None) -> Any:
        """``aclrtMemcpy`` device-to-host of the whole buffer. Blocks until done.

        Returns a new ``bytearray`` of ``nbytes``, or ``out`` (a writable C-contiguous buffer
        of at least ``nbytes`` bytes; the first ``nbytes`` are written) if given.
        """
        if out is None:
            out = bytearray(self.nbytes)
        addr, count, keep = host_view(out, writable=True)
        if count < self.nbytes:
            raise ValueError(f"out has {count} bytes, {self!r} needs {self.nbytes}")
        self._d2h(addr, self.nbytes)
        del keep
        return out

    def fill(self, byte: int) -> None:
        """``aclrtMemset``: set every byte to ``byte`` (0..255; ValueError otherwise). Blocks."""
        value = as_index(byte)
        if type(value) is not int or not 0 <= value <= 0xFF:
            raise ValueError(f"fill byte must be an int in 0..255, got {byte!r}")
        self._check("fill")
        with self.device._current():
            _memory.memset(self.ptr, self.nbytes, value, self.nbytes)

    def copy_from(self, other: DeviceBuffer) -> None:
        """``aclrtMemcpy`` device-to-device of all of ``other`` to the start of this buffer
        (one request executed by this buffer's device). Blocks until done. Between two
        devices this device needs peer access to ``other``'s (``ParamError`` 107000
        otherwise). ValueError if ``other`` is larger than this buffer."""
        if not isinstance(other, DeviceBuffer):
            raise TypeError(f"copy_from needs a DeviceBuffer, got {type(other).__name__}")
        if other.nbytes > self.nbytes:
            raise ValueError(f"{other!r} does not fit in {self!r}")
        other._check("copy from")
        self._check("copy to")
        with self.device._current():
            _memory.memcpy(self.ptr, self.nbytes, other.ptr, other.nbytes, _D2D)

    def __repr__(self) -> str:
        if self._alloc is None:
            return "<npuemu.DeviceBuffer (allocation failed)>"
        state = " freed" if self.freed else ""
        return (f"<npuemu.DeviceBuffer {self.nbytes} bytes at 0x{self.ptr:x} on device "
                f"{self.device.id}{state}>")


Device.buffer_class = DeviceBuffer
