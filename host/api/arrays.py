"""Typed n-d arrays in device memory on the Pythonic face: ``DeviceArray`` (one
``DeviceBuffer``). Copies are synchronous, as those of ``buffers.py``; no threads of its own.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from npuemu.host.api.buffers import DeviceBuffer
from npuemu.host.api.devices import Device, current_device
from npuemu.host.core import memory as _memory

__all__ = ["DeviceArray"]

_FILL_CHUNK_BYTES = 1 << 20  # host staging buffer of DeviceArray.fill (non-byte values)


def _as_shape(shape: object) -> tuple[int, ...]:
    dims = (shape,) if not isinstance(shape, tuple | list) else tuple(shape)
    out = []
    for dim in dims:
        if isinstance(dim, bool):
            raise TypeError(f"shape must be ints, got {shape!r}")
        try:
            value = operator.index(dim)
        except TypeError:
            raise TypeError(f"shape must be ints, got {shape!r}") from None
        if value < 0:
            raise ValueError(f"negative dimension in shape {shape!r}")
        out.append(value)
    return tuple(out)


def _as_dtype(dtype: object) -> np.dtype:
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    if dt.hasobject:
        raise TypeError(f"dtype {dt} holds Python objects; device memory cannot")
    if dt.itemsize == 0:
        raise TypeError(f"dtype {dt} has no fixed size")
    return dt


class DeviceArray:
    """A C-contiguous n-d array of a NumPy ``dtype`` in device memory (one ``DeviceBuffer``).

    Moves data only when asked: ``from_numpy``/``copy_from_numpy`` (H2D), ``to_numpy`` (D2H).
    There is deliberately no ``__array__``: ``np.asarray(device_array)`` would otherwise be a
    hidden synchronous device-to-host copy of the whole array, and writes to the result would
    never reach the device. Call ``to_numpy()`` where the copy is meant. (Without it NumPy
    treats the object as an opaque scalar: ``np.asarray(x)`` is a 0-d object array.)

    Zero-size arrays are allowed: ``aclrtMalloc`` refuses size 0, so they hold a 1-byte
    allocation and copy nothing.
    """

    def __init__(self, shape: int | tuple[int, ...], dtype: Any = np.float32,
                 device: Device | int | None = None) -> None:
        """Uninitialised array: ``aclrtMalloc`` on ``device`` (default: the calling thread's
        current device, else 0). Blocks for one round trip."""
        self._shape = _as_shape(shape)
        self._dtype = _as_dtype(dtype)
        self._nbytes = math.prod(self._shape) * self._dtype.itemsize
        if device is None:
            device = current_device() or Device(0)
        self._buffer = DeviceBuffer(device, max(self._nbytes, 1))

    @classmethod
    def from_numpy(cls, arr: Any, device: Device | int | None = None) -> DeviceArray:
        """A device copy of ``arr`` (made C-contiguous on the host first if needed):
        ``aclrtMalloc`` + ``aclrtMemcpy`` H2D. Blocks until the bytes are on the device."""
        arr = np.asarray(arr)
        out = cls(arr.shape, arr.dtype, device)
        try:
            out.copy_from_numpy(arr)
        except BaseException:
            out.free()
            raise
        return out

    # attributes ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def device(self) -> Device:
        return self._buffer.device

    @property
    def buffer(self) -> DeviceBuffer:
        """The underlying allocation (may be larger than ``nbytes`` for zero-size arrays)."""
        return self._buffer

    @property
    def ptr(self) -> int:
        """Device address of element 0."""
        return self._buffer.ptr

    @property
    def freed(self) -> bool:
        return self._buffer.freed

    # copies (all synchronous) --------------------------------------------------------------
    def to_numpy(self) -> np.ndarray:
        """A new host ndarray holding the data (``aclrtMemcpy`` D2H; blocks)."""
        out = np.empty(self._shape, self._dtype)
        self._buffer._d2h(int(out.ctypes.data), self._nbytes)
        return out

    def copy_from_numpy(self, arr: Any) -> None:
        """Overwrite the data from ``arr`` (``aclrtMemcpy`` H2D; blocks). ``arr`` must have
        exactly this shape and dtype (ValueError otherwise; no casting, no broadcasting)."""
        arr = np.asarray(arr)
        if arr.shape != self._shape or arr.dtype != self._dtype:
            raise ValueError(f"cannot copy an array of shape {arr.shape} and dtype {arr.dtype} "
                             f"into {self!r}")
        src = np.ascontiguousarray(arr)
        self._buffer._h2d(int(src.ctypes.data), self._nbytes)
        del src

    def fill(self, value: Any) -> None:
        """Set every element to ``value`` (cast to ``dtype`` as NumPy does). Blocks.

        When every byte of the element is the same (0, -1, 0.0, ``uint8`` values...), this is
        one ``aclrtMemset`` done in place. Otherwise the pattern is staged in a host buffer
        of at most 1 MiB and copied H2D in as many ``aclrtMemcpy`` calls as needed.
        """
        raw = np.array(value, dtype=self._dtype).tobytes()
        self._buffer._check("fill")
        if raw == raw[:1] * len(raw):
            if self._nbytes:
                with self.device._current():
                    _memory.memset(self.ptr, self._nbytes, raw[0], self._nbytes)
            return
        per_chunk = max(1, _FILL_CHUNK_BYTES // self._dtype.itemsize)
        chunk = np.full(min(self.size, per_chunk), value, dtype=self._dtype)
        done = 0
        while done < self._nbytes:
            count = min(chunk.nbytes, self._nbytes - done)
            self._buffer._h2d(int(chunk.ctypes.data), count, offset=done)
            done += count

    # lifetime ------------------------------------------------------------------------------
    def free(self) -> None:
        """``aclrtFree`` of the buffer (idempotent; does not wait)."""
        self._buffer.free()

    def __enter__(self) -> DeviceArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __repr__(self) -> str:
        state = " freed" if self.freed else ""
        return (f"<npuemu.DeviceArray shape={self._shape} dtype={self._dtype} "
                f"device={self.device.id} ptr=0x{self.ptr:x}{state}>")



Device.array_class = DeviceArray
