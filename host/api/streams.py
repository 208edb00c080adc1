"""Streams and events on the Pythonic face: ``Stream`` (``aclrtStream``) and ``Event``
(``aclrtEvent``).

Methods that queue work (``record``, ``wait``, ``launch``, ``copy``) return at once; the
``synchronize`` calls block (GIL released) until the work is done or their timeout expires.
No threads of its own; each call makes its device's primary context current for its duration
(``devices.py``).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.api.buffers import DeviceBuffer
from npuemu.host.api.devices import Device, device_or_current
from npuemu.host.api.graph import Graph
from npuemu.host.api.kernels import Kernel
from npuemu.host.core import kernel as _kernel
from npuemu.host.core import memory as _memory
from npuemu.host.core import stream as _stream
from npuemu.shared.enums import MemcpyKind

__all__ = ["Event", "Stream"]

_D2D = MemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE


class Stream:
    """An ``aclrtStream`` on a device: ``Stream(device=None, priority=0, flags=0)``.

    Work queued on it runs in order on the device; methods that queue work return at once.
    Use it as a context manager to destroy it (after its work is done) on exit.
    """

    def __init__(self, device: Device | int | None = None, priority: int = 0,
                 flags: int = 0) -> None:
        self.device = device_or_current(device)
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

    def capture(self, mode: int = 0) -> Graph:
        """``aclmdlRICaptureBegin(self, mode)``: work queued from now on is recorded, not
        run, until the ``with`` block (or ``Graph.end``) ends the capture (``graph.py``)."""
        return Graph(self, mode)

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
        self.device = device_or_current(device)
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
