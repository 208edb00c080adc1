"""Devices and the calling thread's context on the Pythonic face: ``Device``, ``MemInfo``,
``device_count``, ``current_device``, ``retained_devices``.

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
    thread's stack of contexts saved by ``with Device``; ``Runtime.lock`` guards
    ``_retained`` and the implicit attachment, and makes a buffer's ownership check and its
    free one step against a concurrent reset. The current device/context is per thread, as in
    CANN. ``with Device(n)`` binds the calling thread and, on exit, restores exactly what the
    thread had before (its previous context, or none). Every other method works whatever the
    calling thread's current device is: it makes its device's primary context current for the
    duration of the call and then restores the thread's previous context
    (``aclrtSetCurrentContext`` twice, no device reference taken), so it never disturbs other
    threads. Objects may be shared between threads (each device link serialises its
    requests); freeing a buffer, or resetting its device, while another thread copies through
    it is an error of the program, as with ``aclrtFree``/``aclrtResetDevice`` on hardware.

The buffer and array classes build on ``Device``, so this module cannot import them:
``buffers.py`` and ``arrays.py`` set ``Device.buffer_class`` / ``Device.array_class`` when
they load (the package imports both), and ``Device.malloc`` / ``Device.array`` build those.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from npuemu.host.core import callbacks as _callbacks  # noqa: F401  (starts report threads)
from npuemu.host.core import device as _device
from npuemu.host.core import memory as _memory
from npuemu.host.core import runtime as _runtime
from npuemu.host.core.runtime import Context, OpenDevice
from npuemu.shared.enums import DeviceStatus, MemAttr
from npuemu.shared.errors import ContextError

if TYPE_CHECKING:
    from npuemu.host.api.arrays import DeviceArray
    from npuemu.host.api.buffers import DeviceBuffer

__all__ = ["ACL_DDR_MEM", "ACL_HBM_MEM", "Device", "MemInfo", "as_index", "check_not_forked",
           "current_device", "device_count", "device_or_current", "retained_devices"]

ACL_HBM_MEM = MemAttr.ACL_HBM_MEM
ACL_DDR_MEM = MemAttr.ACL_DDR_MEM

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


def as_index(value: object) -> Any:
    """``value`` as an int when it is an integer (numpy ints too); unchanged otherwise, so the
    runtime core rejects it with its own code (bools stay bools: the core refuses them)."""
    if isinstance(value, bool):
        return value
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return value


def check_not_forked(what: str) -> None:
    """Raise 207000 in a forked child (the runtime's fork guard, the only one)."""
    _runtime.get().check_fork(what)


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

    # the classes ``malloc`` and ``array`` build (set by buffers.py and arrays.py on import)
    buffer_class: ClassVar[type[DeviceBuffer]]
    array_class: ClassVar[type[DeviceArray]]

    def __init__(self, id: int | Device) -> None:
        if isinstance(id, Device):
            id = id.id
        dev = as_index(id)
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
    def soc_name(self) -> str | None:
        """``aclrtGetSocName`` (the node's SoC; the same for every card; None if the node
        cannot be reached). Non-blocking once the node is up."""
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
        check_not_forked(repr(self))
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
            check_not_forked(repr(self))
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
            free_bytes, total = _memory.get_mem_info(as_index(attr))
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
        return self.buffer_class(self, nbytes, policy)

    def array(self, shape: int | tuple[int, ...], dtype: Any = np.float32) -> DeviceArray:
        """An uninitialised ``DeviceArray`` on this device (``aclrtMalloc``; blocks)."""
        return self.array_class(shape, dtype, device=self)


def device_or_current(device: Device | int | None) -> Device:
    """``device``, else the calling thread's current device, else device 0."""
    if device is not None:
        return Device(device)
    return current_device() or Device(0)
