"""The Pythonic face of the host runtime: ``Device``, ``DeviceBuffer``, ``DeviceArray``.

One core, two faces: this module and the pyACL-compatible ``acl`` module both call
``host/core/device.py`` and ``host/core/memory.py``. Where ``acl`` returns codes, this module
raises the ``AclError`` subclasses of :mod:`npuemu.shared.errors` (``e.code``, ``e.name``), e.g.
``OutOfMemoryError`` with code 207001 when a device is full. Bad Python-level arguments (a
shape that does not match, a fill byte out of range) raise ``ValueError``/``TypeError``.

    >>> from npuemu.host import Device, DeviceArray
    >>> with Device(0) as dev:                       # aclrtSetDevice ... aclrtResetDevice
    ...     x = DeviceArray.from_numpy(np.arange(6.0).reshape(2, 3))   # malloc + H2D
    ...     y = x.to_numpy()                                            # D2H

Device attachment and lifetime
    ``with Device(n):`` mirrors ``aclrtSetDevice`` / ``aclrtResetDevice`` (reference counted,
    shared with the ``acl`` face). When the count reaches 0, every allocation this process
    has on the device is released, including those of live ``DeviceBuffer`` objects: they
    then report ``freed`` and refuse copies (107000) instead of touching memory that a later
    allocation may own. A call that needs a device which this process has not set (e.g.
    ``DeviceArray.from_numpy`` outside any ``with``) attaches it implicitly, once, and keeps
    it attached until process exit or until the ``acl`` face resets it (like the CUDA
    runtime's primary context); ``retained_devices()`` lists those.

Threading model
    No threads of its own; called from any thread. ``_tls`` (per thread) holds each
    thread's stack of contexts saved by ``with Device``; ``Runtime.lock`` makes a buffer's
    ownership check and its free one step against a concurrent reset. The current
    device/context is per thread, as in CANN. ``with Device(n)`` binds the
    calling thread and, on exit, restores exactly what the thread had before (its previous
    context, or none). Every other method works whatever the calling thread's current device
    is: it makes its device's primary context current for the duration of the call and then
    restores the thread's previous context (``aclrtSetCurrentContext`` twice, no device
    reference taken), so it never disturbs other threads. Objects may be shared between
    threads (each device link serialises its requests); freeing a buffer, or resetting its
    device, while another thread copies through it is an error of the program, as with
    ``aclrtFree``/``aclrtResetDevice`` on hardware.

Blocking
    All copies here are synchronous (``aclrtMemcpy``/``aclrtMemset``): they return once the
    bytes have moved. Buffers come from the host caching allocator (``host/core/caching.py``,
    as torch_npu does): ``malloc`` is one round trip to the device worker (~10 us) unless a
    cached block of its size class is ready (none then); ``free`` keeps the block cached
    (it stays reserved on the card: ``memory_stats()``, ``empty_cache()`` gives it back).

Forked children
    Objects inherited through ``fork`` are inert in the child: ``free`` and ``__del__`` do
    nothing there (the parent still owns the memory); any other call raises 207000.
"""

from __future__ import annotations

import math
import operator
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, NamedTuple

import numpy as np

from npuemu.host.api.memory import (  # memory statistics, torch's names
    empty_cache,
    leak_report,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    pool_stats,
    reset_peak_memory_stats,
)
from npuemu.host.api.prof import Profile, profile
from npuemu.host.core import caching as _caching
from npuemu.host.core import callbacks as _callbacks  # noqa: F401  (starts report threads)
from npuemu.host.core import device as _device
from npuemu.host.core import kernel as _kernel
from npuemu.host.core import memory as _memory
from npuemu.host.core import runtime as _runtime
from npuemu.host.core import stream as _stream
from npuemu.host.core.runtime import Allocation, Context, OpenDevice
from npuemu.shared import errors
from npuemu.shared.enums import DeviceStatus, MemAttr, MemcpyKind
from npuemu.shared.errors import (
    AclError,
    ContextError,
    DeviceError,
    DeviceLostError,
    InvalidDeviceError,
    OutOfMemoryError,
    ParamError,
    ResourceError,
    StorageError,
    SyncTimeoutError,
)

__all__ = [
    "ACL_DDR_MEM",
    "ACL_HBM_MEM",
    "AclError",
    "ContextError",
    "Device",
    "DeviceArray",
    "DeviceBuffer",
    "DeviceError",
    "DeviceLostError",
    "InvalidDeviceError",
    "MemInfo",
    "OutOfMemoryError",
    "ParamError",
    "Profile",
    "ResourceError",
    "StorageError",
    "SyncTimeoutError",
    "current_device",
    "device_count",
    "empty_cache",
    "leak_report",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "pool_stats",
    "profile",
    "reset_peak_memory_stats",
    "retained_devices",
]

ACL_HBM_MEM = MemAttr.ACL_HBM_MEM
ACL_DDR_MEM = MemAttr.ACL_DDR_MEM

_H2D = MemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE
_D2H = MemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST
_D2D = MemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE

_FILL_CHUNK_BYTES = 1 << 20  # host staging buffer of DeviceArray.fill (non-byte values)

# Devices this module attached implicitly: logical id -> the OpenDevice it holds a reference
# on. Compared by identity, so a reset through the acl face (a new OpenDevice next time) is
# noticed and the device is attached again.
_retained: dict[int, OpenDevice] = {}

# Per thread: the contexts to restore when the open `with Device(...)` blocks exit (a stack,
# since `with` blocks nest).
_tls = threading.local()


class MemInfo(NamedTuple):
    """``aclrtGetMemInfo`` result, in bytes."""

    free: int
    total: int


def _index(value: object) -> object:
    """``value`` as an int when it is an integer (numpy ints too); unchanged otherwise, so the
    runtime core rejects it with its own code (bools stay bools: the core refuses them)."""
    if isinstance(value, bool):
        return value
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return value


def _check_not_forked(what: str) -> None:
    _runtime.get().check_fork(what)  # the runtime's fork guard, the only one


def device_count() -> int:
    """Number of visible devices (``aclrtGetDeviceCount``; honours
    ``ASCEND_RT_VISIBLE_DEVICES``). Does not start a node unless ``NPUEMU_NODE`` names a
    shared one, which it then attaches to (blocks for one control round trip)."""
    return _device.get_device_count()


def current_device() -> Device | None:
    """The calling thread's current device (``aclrtGetDevice``), or None if it has none."""
    try:
        return Device(_device.get_device())
    except ContextError:
        return None


def retained_devices() -> list[int]:
    """Logical ids of the devices this module attached implicitly and still holds."""
    rt = _runtime.get()
    with rt.lock:
        return sorted(d for d, od in _retained.items() if rt.devices.get(d) is od)


def _thread_context() -> Context | None:
    """The calling thread's live context, if any (``aclrtGetCurrentContext``)."""
    ctx = getattr(_runtime.get().local, "ctx", None)
    return None if ctx is None or ctx.destroyed else ctx


def _swap_context(ctx: Context | None) -> Context | None:
    """Make ``ctx`` (or nothing, also if ``ctx`` was destroyed since) the calling thread's
    context, like ``aclrtSetCurrentContext``; returns the previous live one."""
    prev = _thread_context()
    _runtime.get().local.ctx = ctx if ctx is None or not ctx.destroyed else None
    return prev


class Device:
    """One logical device (an ``aclrtSetDevice`` id), cheap to create: ``Device(0)``.

    Creating it only checks the id (``InvalidDeviceError``, 107001); nothing is attached
    until the device is used. Two ``Device`` objects with the same id are equal.
    """

    __slots__ = ("_id",)

    def __init__(self, id: int) -> None:
        if isinstance(id, Device):
            id = id.id
        dev = _index(id)
        if type(dev) is not int:
            raise TypeError(f"device id must be an int, got {type(id).__name__}")
        _runtime.get().check_device_id(dev)
        self._id: int = dev

    # identity -----------------------------------------------------------------------------
    @property
    def id(self) -> int:
        """The logical device id."""
        return self._id

    @property
    def soc_name(self) -> str:
        """``aclrtGetSocName`` (the node's SoC; the same for every card). Non-blocking."""
        return _device.soc_name()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other._id == self._id

    def __hash__(self) -> int:
        return hash((Device, self._id))

    def __index__(self) -> int:
        return self._id

    def __repr__(self) -> str:
        return f"<npuemu.Device {self._id} {self.soc_name}>"

    # set / reset ---------------------------------------------------------------------------
    def __enter__(self) -> Device:
        """``aclrtSetDevice(id)``: attach (the first time: blocks until the device worker is
        up), take a reference and bind the calling thread to the device."""
        _check_not_forked(repr(self))
        prev = _thread_context()
        _device.set_device(self._id)
        _tls.__dict__.setdefault("saved", []).append(prev)
        return self

    def __exit__(self, *exc: object) -> None:
        """``aclrtResetDevice(id)``, then the thread's previous context (or none) is current
        again. At reference count 0 every allocation of this process on the device goes."""
        saved = _tls.__dict__.get("saved")
        prev = saved.pop() if saved else None
        try:
            _device.reset_device(self._id)
        finally:
            _swap_context(prev)

    def _open(self) -> OpenDevice:
        """This process's attachment to the device, attaching (and retaining) it if needed."""
        rt = _runtime.get()
        if rt.forked:
            _check_not_forked(repr(self))
        od = rt.devices.get(self._id)  # attached already: no lock (a dict read)
        if od is not None:
            return od
        with rt.lock:
            od = rt.devices.get(self._id)
            if od is not None:
                return od
            prev = _swap_context(None)
            try:
                _device.set_device(self._id)  # blocks until the worker is up
            finally:
                _swap_context(prev)
            od = rt.devices[self._id]
            _retained[self._id] = od
            return od

    @contextmanager
    def _current(self) -> Iterator[OpenDevice]:
        """Make this device's primary context current for one call, then restore."""
        od = self._open()
        prev = _swap_context(od.primary)
        try:
            yield od
        finally:
            _swap_context(prev)

    # queries -------------------------------------------------------------------------------
    def mem_info(self, attr: int = ACL_HBM_MEM) -> MemInfo:
        """``aclrtGetMemInfo(attr)`` on this device: ``MemInfo(free, total)`` in bytes.
        Blocks for one round trip to the worker (so earlier frees are already counted)."""
        with self._current():
            free_bytes, total = _memory.get_mem_info(_index(attr))
        return MemInfo(free_bytes, total)

    def synchronize(self) -> None:
        """``aclrtSynchronizeDevice``: blocks until every stream of this process on the
        device is done; raises the first unreported task failure."""
        with self._current():
            _device.synchronize_device()

    def status(self) -> DeviceStatus:
        """``aclrtQueryDeviceStatus``: NORMAL, or ABNORMAL once this process saw the device
        lost. Non-blocking; does not attach the device."""
        return DeviceStatus(_device.query_device_status(self._id))

    # allocation ----------------------------------------------------------------------------
    def malloc(self, nbytes: int, policy: int = 0) -> DeviceBuffer:
        """``aclrtMalloc(nbytes, policy)``: a new ``DeviceBuffer`` (uninitialised). Blocks for
        one round trip. ``ParamError`` 100000 for ``nbytes <= 0``, ``OutOfMemoryError``
        207001 when the device cannot hold it."""
        return DeviceBuffer(self, nbytes, policy)

    def array(self, shape: int | tuple[int, ...], dtype: Any = np.float32) -> DeviceArray:
        """An uninitialised ``DeviceArray`` on this device (``aclrtMalloc``; blocks)."""
        return DeviceArray(shape, dtype, device=self)


def _host_view(data: object, writable: bool) -> tuple[int, int, object]:
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
        self._block = _caching.get().malloc(_index(nbytes), _index(policy), link)  # type: ignore[arg-type]
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
        _check_not_forked(repr(self))
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
        addr, count, keep = _host_view(data, writable=False)
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
        addr, count, keep = _host_view(out, writable=True)
        if count < self.nbytes:
            raise ValueError(f"out has {count} bytes, {self!r} needs {self.nbytes}")
        self._d2h(addr, self.nbytes)
        del keep
        return out

    def fill(self, byte: int) -> None:
        """``aclrtMemset``: set every byte to ``byte`` (0..255; ValueError otherwise). Blocks."""
        value = _index(byte)
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


def _as_shape(shape: object) -> tuple[int, ...]:
    dims = (shape,) if not isinstance(shape, tuple | list) else tuple(shape)
    out = []
    for dim in dims:
        if isinstance(dim, bool):
            raise TypeError(f"shape must be ints, got {shape!r}")
        try:
            value = operator.index(dim)  # type: ignore[arg-type]
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



# streams, events, kernels ---------------------------------------------------------------------
def _device_or_current(device: Device | int | None) -> Device:
    """``device``, else the calling thread's current device, else device 0."""
    if device is not None:
        return Device(device)
    return current_device() or Device(0)


class Stream:
    """An ``aclrtStream`` on a device: ``Stream(device=None, priority=0, flags=0)``.

    Work queued on it runs in order on the device; methods that queue work return at once.
    Use it as a context manager to destroy it (after its work is done) on exit.
    """

    def __init__(self, device: Device | int | None = None, priority: int = 0,
                 flags: int = 0) -> None:
        self.device = _device_or_current(device)
        with self.device._current():
            self._stream = _stream.create_stream(priority, flags)

    @property
    def handle(self) -> int:
        """The int handle the ``acl`` face uses for this stream."""
        return self._stream.handle

    @property
    def id(self) -> int:
        """``aclrtStreamGetId``: the device-wide stream id."""
        return self._stream.sid

    def synchronize(self, timeout_ms: int = -1) -> None:
        """``aclrtSynchronizeStream(WithTimeout)``: blocks (GIL released) until queued work
        is done; raises the first unreported failure, ``SyncTimeoutError`` 507046 on expiry."""
        _stream.synchronize_stream(self.handle, timeout_ms)

    def done(self) -> bool:
        """``aclrtStreamQuery``: True when all queued work is complete. Non-blocking."""
        return _stream.stream_query(self.handle) == 0

    def record(self, event: Event | None = None) -> Event:
        """``aclrtRecordEvent`` on this stream; returns the (new, if not given) event."""
        event = event or Event(self.device)
        with self.device._current():
            _stream.record_event(event.handle, self.handle)
        return event

    def wait(self, event: Event) -> None:
        """``aclrtStreamWaitEvent``: later work on this stream waits for ``event``."""
        with self.device._current():
            _stream.stream_wait_event(self.handle, event.handle)

    def launch(self, kernel: Kernel, blocks: int, *args: Any) -> None:
        """``aclrtLaunchKernel``: queue ``blocks`` blocks of ``kernel`` with ``args``."""
        with self.device._current():
            _kernel.launch_kernel(kernel.handle, blocks, list(args), self.handle)

    def copy(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None = None) -> None:
        """``aclrtMemcpyAsync`` device to device (async, in stream order)."""
        count = src.nbytes if nbytes is None else nbytes
        with self.device._current():
            _memory.memcpy_async(dst.ptr, dst.nbytes, src.ptr, count, _D2D, self.handle)

    def destroy(self) -> None:
        """``aclrtDestroyStream``: waits for queued work, then releases the stream."""
        if not self._stream.destroyed:
            with self.device._current():
                _stream.destroy_stream(self.handle)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def __repr__(self) -> str:
        return f"<npuemu.Stream {self.id} on device {self.device.id}>"


class Event:
    """An ``aclrtEvent`` (with a timestamp unless ``flags`` says otherwise)."""

    def __init__(self, device: Device | int | None = None, flags: int | None = None) -> None:
        self.device = _device_or_current(device)
        with self.device._current():
            self._event = (_stream.create_event() if flags is None
                           else _stream.create_event(flags))

    @property
    def handle(self) -> int:
        return self._event.handle

    def synchronize(self, timeout_ms: int = -1) -> None:
        """``aclrtSynchronizeEvent(WithTimeout)``: blocks until the latest record is done."""
        _stream.synchronize_event(self.handle, timeout_ms)

    def done(self) -> bool:
        """``aclrtQueryEvent``: True when the latest record is complete. Non-blocking."""
        return _stream.query_event(self.handle) == 0

    def elapsed_ms(self, end: Event) -> float:
        """``aclrtEventElapsedTime(self, end)`` in milliseconds (device timestamps)."""
        return _stream.event_elapsed_time(self.handle, end.handle)

    def destroy(self) -> None:
        if not self._event.destroyed:
            _stream.destroy_event(self.handle)


class Kernel:
    """A kernel of a loaded binary (``aclrtBinaryGetFunction``)."""

    def __init__(self, handle: int, name: str, engine: str) -> None:
        self.handle, self.name, self.engine = handle, name, engine

    def __repr__(self) -> str:
        return f"<npuemu.Kernel {self.name} on {self.engine}>"


def load_kernels(path: str | None = None, device: Device | int | None = None) -> dict[str, Kernel]:
    """``aclrtBinaryLoadFromFile`` + ``aclrtBinaryGetFunction`` for every kernel of the file
    (default: the ready library: add, mul, matmul, relu, softmax, cast, fill, reduce_sum)."""
    dev = _device_or_current(device)
    with dev._current():
        binary = _kernel.binary_load_from_file(path or _kernel.LIBRARY)
        return {name: Kernel(_kernel.binary_get_function(binary.handle, name).handle, name,
                             engine) for name, engine in binary.kernels.items()}

# the feature faces (ops, models, collectives) need DeviceArray above
from npuemu.host.api import hccl  # noqa: E402
from npuemu.host.api.models import Model as Model  # noqa: E402
from npuemu.host.api.ops import op_cache_stats as op_cache_stats  # noqa: E402
from npuemu.host.api.ops import run_op as run_op  # noqa: E402
from npuemu.host.api.ops import set_max_op_queue_num as set_max_op_queue_num  # noqa: E402

__all__ += ["hccl"]
