"""pyACL ``acl.util``: convert between Python buffers, NumPy arrays and raw host pointers.

Mirrors ``python/pyACL/util/{bytes_convert,numpy_convert,thread}.cpp`` of hicann/runtime:
pointers are plain ``int`` addresses, ``ptr_to_numpy`` returns a *view* (no copy), and
``numpy_to_ptr``, ``numpy_contiguous_to_ptr`` and ``ptr_to_numpy`` are deprecated.

Where npuemu differs from the real module (it is stricter than hardware, never looser):

* ``ptr_to_bytes`` and ``ptr_to_numpy`` refuse a null pointer, any range touching the
  emulated device address window (:mod:`npuemu.shared.address`) and any range that is not
  mapped readable in this process (checked against the runtime's view of
  ``/proc/self/maps``, ``hostmem.HostMaps``) with ``ValueError`` naming the address. The real
  module crashes the process on such an address.
* ``bytes_to_ptr`` also takes ``bytearray`` and other contiguous buffer objects (the real one
  only takes ``bytes``).
* The deprecation warnings use ``DeprecationWarning`` (pyACL raises the base ``Warning``).
* ``start_thread`` returns the thread's ``pthread_t`` as pyACL does, which is Python's
  ``Thread.ident`` (``threading.get_ident()`` inside the thread): the id to pass to
  ``acl.rt.subscribe_report``. ``stop_thread`` waits at most :data:`STOP_THREAD_TIMEOUT_S`
  and returns 100000 (``ACL_ERROR_INVALID_PARAM``) for an unknown id.

Lifetime: a pointer from ``bytes_to_ptr``/``numpy_to_ptr`` is only valid while the Python
object it came from is alive (and, for ``bytearray``, not resized). Keep a reference for as long
as the pointer is in use, e.g. until an asynchronous copy reading it has completed.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import math
import operator
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from npuemu.host.core import runtime
from npuemu.shared import address, errors

__all__ = [
    "NPY_TYPES",
    "STOP_THREAD_TIMEOUT_S",
    "bytes_to_ptr",
    "numpy_contiguous_to_ptr",
    "numpy_to_ptr",
    "ptr_to_bytes",
    "ptr_to_numpy",
    "start_thread",
    "stop_thread",
]



def __dir__() -> list[str]:
    """``dir(acl.util)`` lists pyACL's names, not the modules this one imports."""
    return sorted(__all__)


NPY_TYPES: dict[int, np.dtype] = {
    0: np.dtype(np.bool_),
    1: np.dtype(np.int8),
    2: np.dtype(np.uint8),
    3: np.dtype(np.int16),
    4: np.dtype(np.uint16),
    5: np.dtype(np.int32),
    6: np.dtype(np.uint32),
    7: np.dtype(np.int64),
    8: np.dtype(np.uint64),
    11: np.dtype(np.float32),
    12: np.dtype(np.float64),
    23: np.dtype(np.float16),
}
"""NumPy C type numbers (``NPY_TYPES``) accepted by :func:`ptr_to_numpy`."""

STOP_THREAD_TIMEOUT_S = 5.0
"""Longest :func:`stop_thread` waits for the thread to finish."""

_ACL_ERROR_INVALID_PARAM = 100000
_PTR_LIMIT = 1 << 64  # pointers are C ``unsigned long``


_RECENT: collections.deque[object] = collections.deque(maxlen=8)
"""The last objects whose address ``bytes_to_ptr`` gave (see there). deque.append is atomic,
so any thread may call in without a lock."""


def bytes_to_ptr(data: bytes | bytearray | memoryview | Any) -> int:
    """Address of the buffer of ``data`` (``bytes``, ``bytearray`` or a contiguous buffer).

    No copy is made: the object must stay alive (and a ``bytearray`` unresized) for as long as
    the pointer is used. Writing through a pointer to a ``bytes`` object is undefined.
    Programs often pass a temporary straight into a call (``memcpy(dev, n,
    bytes_to_ptr(x.tobytes()), n, kind)``): on pyACL that works because no Python code runs
    between the temporary's release and the C call reading it; here the call is Python, which
    could reuse the freed block first. So the 8 most recent objects are kept alive here (at
    most 8 buffers held longer than the program holds them).
    """
    _RECENT.append(data)
    if type(data) is bytes:
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    if type(data) is bytearray:
        return ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data))
    try:
        view = memoryview(data)
    except TypeError:
        raise ValueError(
            f"bytes_to_ptr needs a bytes-like object, got {type(data).__name__}"
        ) from None
    with view:
        if not view.contiguous:
            raise ValueError("bytes_to_ptr needs a contiguous buffer")
        return int(np.frombuffer(view, dtype=np.uint8).ctypes.data)


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """Copy ``size`` bytes of host memory at ``ptr`` into a new ``bytes`` object."""
    ptr = operator.index(ptr)
    size = operator.index(size)
    if size < 0:
        raise ValueError(f"ptr_to_bytes: size must be >= 0, got {size}")
    _check_host_range("ptr_to_bytes", ptr, size)
    return ctypes.string_at(ptr, size)


def numpy_to_ptr(arr: np.ndarray) -> int:
    """Address of the data of ``arr`` (deprecated: use :func:`bytes_to_ptr`).

    ``arr`` must outlive the pointer's use. A non C-contiguous array gets a ``UserWarning``
    because the pointer then does not describe the array's logical layout.
    """
    warnings.warn(
        "acl.util.numpy_to_ptr will be deprecated. Please use acl.util.bytes_to_ptr instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"numpy_to_ptr needs an ndarray as argument, got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        warnings.warn(
            "The input ndarray is discontiguous. Please use acl.util.bytes_to_ptr instead.",
            UserWarning,
            stacklevel=2,
        )
    return int(arr.ctypes.data)


def numpy_contiguous_to_ptr(arr: np.ndarray) -> tuple[int, np.ndarray]:
    """``(ptr, arr2)``: ``arr2`` is ``arr`` made C-contiguous (``arr`` itself if it already is).

    The caller must keep ``arr2`` alive while ``ptr`` is in use. Deprecated in pyACL like
    :func:`numpy_to_ptr`, so it warns too.
    """
    warnings.warn(
        "acl.util.numpy_contiguous_to_ptr will be deprecated. "
        "Please use acl.util.bytes_to_ptr instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    if not isinstance(arr, np.ndarray):
        raise ValueError(
            f"numpy_contiguous_to_ptr needs an ndarray as argument, got {type(arr).__name__}"
        )
    # np.ascontiguousarray would turn a 0-d array into 1-d; PyArray_GETCONTIGUOUS does not.
    arr2 = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    return int(arr2.ctypes.data), arr2


def ptr_to_numpy(ptr: int, shape: tuple[int, ...], npy_type: int) -> np.ndarray:
    """Writable ndarray of ``shape`` and NumPy type number ``npy_type`` VIEWING host ``ptr``.

    No copy: the memory must stay valid while the array (or any view of it) is used.
    Deprecated (use :func:`ptr_to_bytes`). Type numbers are listed in :data:`NPY_TYPES`.
    """
    warnings.warn(
        "acl.util.ptr_to_numpy will be deprecated. Please use acl.util.ptr_to_bytes instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    ptr = operator.index(ptr)
    if not isinstance(shape, tuple):
        raise TypeError(f"ptr_to_numpy: shape must be a tuple of int, got {type(shape).__name__}")
    dims: list[int] = []
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer):
            raise TypeError(f"ptr_to_numpy: shape must be a tuple of int, got {shape!r}")
        if dim < 0:
            raise ValueError(f"ptr_to_numpy: negative dimension in shape {shape!r}")
        dims.append(int(dim))
    npy_type = operator.index(npy_type)
    dtype = NPY_TYPES.get(npy_type)
    if dtype is None:
        known = ", ".join(f"{code} {dt.name}" for code, dt in NPY_TYPES.items())
        raise ValueError(f"ptr_to_numpy: unknown npy_type {npy_type} (known: {known})")
    count = math.prod(dims)
    nbytes = count * dtype.itemsize
    _check_host_range("ptr_to_numpy", ptr, nbytes)
    raw = (ctypes.c_char * nbytes).from_address(ptr)
    return np.frombuffer(memoryview(raw), dtype=dtype, count=count).reshape(dims)


def _check_host_range(what: str, ptr: int, size: int) -> None:
    """ValueError unless ``[ptr, ptr + size)`` is a non-null host range outside device memory."""
    if ptr == 0:
        raise ValueError(f"{what}: null pointer 0x0")
    if ptr < 0 or ptr + size > _PTR_LIMIT:
        raise ValueError(f"{what}: 0x{ptr:x} (+{size} bytes) is not a valid host address")
    if address.is_device_ptr(ptr) or (
        ptr < address.DEVICE_VA_END and ptr + size > address.DEVICE_VA_BASE
    ):
        raise ValueError(
            f"{what}: 0x{ptr:x} (+{size} bytes) is a device address; the host cannot "
            "dereference device memory (copy it to the host with acl.rt.memcpy first)"
        )
    if size:
        try:
            runtime.get().host_maps.check(ptr, size, write=False)
        except errors.AclError:
            raise ValueError(f"{what}: 0x{ptr:x} (+{size} bytes) is not readable memory of "
                             "this process") from None


@dataclass
class _Worker:
    thread: threading.Thread
    errors: list[str]  # messages of exceptions raised by the thread function


_workers: dict[int, _Worker] = {}
_workers_lock = threading.Lock()


def _run(errors: list[str], fn: Callable[..., Any], args: Any) -> None:
    try:
        # Like pyACL's ThrFunc: fn(args), or fn() when args is None.
        if args is None:
            fn()
        else:
            fn(args)
    except BaseException as exc:
        traceback.print_exception(exc, file=sys.stderr)
        errors.append(f"exception={type(exc).__name__},msg=thread call failed")


def _positional(name: str, args: tuple, kwargs: dict, count: int) -> None:
    """The TypeError pyACL's argument parsing (CPython's ``PyArg_ParseTuple`` of a
    positional-only C function) raises for ``args``/``kwargs``, in its words."""
    if kwargs:
        raise TypeError(f"{name}() takes no keyword arguments")
    if len(args) != count:
        noun = "argument" if count == 1 else "arguments"
        raise TypeError(f"function takes exactly {count} {noun} ({len(args)} given)")


def start_thread(*call: Any, **kwargs: Any) -> tuple[int, int]:
    """``start_thread(fn, args)``: run ``fn(args)`` (``fn()`` if ``args`` is None) in a new
    daemon thread.

    Returns ``(tid, ret)``: ``tid`` is the thread's pthread id (``Thread.ident``), to pass to
    :func:`stop_thread` and ``acl.rt.subscribe_report`` (typically the thread calls
    ``acl.rt.process_report``); ``ret`` is 0, or ``EAGAIN`` with ``tid`` 0 if no thread could
    be started. Exactly two positional arguments, else pyACL's TypeError texts
    ("function takes exactly 2 arguments (0 given)", "parameter must be callable").
    """
    _positional("start_thread", call, kwargs, 2)
    fn, args = call
    if not callable(fn):
        raise TypeError("parameter must be callable")
    errors: list[str] = []
    thread = threading.Thread(
        target=_run, args=(errors, fn, args), name="acl.util.thread", daemon=True
    )
    try:
        thread.start()
    except RuntimeError:
        return 0, errno.EAGAIN
    tid = thread.ident
    assert tid is not None
    with _workers_lock:
        # A finished thread that was never stopped may have had this id: replace it.
        _workers[tid] = _Worker(thread, errors)
    return tid, 0


def stop_thread(*call: Any, **kwargs: Any) -> int:
    """``stop_thread(tid)``: join the thread started by :func:`start_thread`; returns ``ret``.

    0 once it has finished; 100000 (``ACL_ERROR_INVALID_PARAM``) for an unknown ``tid``;
    ``EDEADLK`` when called from that thread; ``ETIMEDOUT`` if it is still running after
    :data:`STOP_THREAD_TIMEOUT_S` (it stays registered). Like pyACL, raises ``RuntimeError``
    describing the exception(s) if the thread function raised, and its argument parsing's
    TypeError for anything but one int ("argument 1 must be int, not str").
    """
    _positional("stop_thread", call, kwargs, 1)
    (tid,) = call
    if not isinstance(tid, int):
        raise TypeError(f"argument 1 must be int, not {type(tid).__name__}")
    tid = int(tid) & (_PTR_LIMIT - 1)  # pyACL reads it as unsigned long long, masked
    with _workers_lock:
        worker = _workers.get(tid)
        if worker is None:
            return _ACL_ERROR_INVALID_PARAM
        if worker.thread is threading.current_thread():
            return errno.EDEADLK
        del _workers[tid]
    worker.thread.join(STOP_THREAD_TIMEOUT_S)
    if worker.thread.is_alive():
        with _workers_lock:
            _workers.setdefault(tid, worker)
        return errno.ETIMEDOUT
    if worker.errors:
        raise RuntimeError("".join(f"{msg};" for msg in worker.errors))
    return 0
