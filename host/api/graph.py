"""Stream capture on the Pythonic face: ``Graph`` (an ``aclmdlRI`` made by capturing a
stream), over ``host/core/capture.py`` and ``model_ri.py``.

    with stream.capture() as graph:   # aclmdlRICaptureBegin ... aclmdlRICaptureEnd
        stream.launch(kernel, 1, x)   # recorded, not run
    graph.replay(stream)              # aclmdlRIExecuteAsync: one stream task
    stream.synchronize()

Leaving the ``with`` block ends the capture (blocks for the card's reply to the
registration); an exception inside it ends the capture and drops it, then propagates.
``replay`` returns at once; ``destroy`` waits (bounded) for queued replays. Errors raise
``AclError`` with the runtime's codes. No threads of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from npuemu.host.core import capture as _capture
from npuemu.host.core import model_ri as _model_ri
from npuemu.shared.enums import CaptureMode
from npuemu.shared.errors import AclError

if TYPE_CHECKING:
    from npuemu.host.api.streams import Stream

__all__ = ["Graph"]


class Graph:
    """A captured stream: ``Graph(stream, mode)`` begins the capture (``stream.capture()``
    says the same); the ``with`` block's end, or ``end()``, ends it."""

    def __init__(self, stream: Stream,
                 mode: int = CaptureMode.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) -> None:
        self.stream = stream
        self._handle = 0
        with stream.device._current():
            _capture.capture_begin(stream.handle, mode)

    @property
    def handle(self) -> int:
        """The int handle the ``acl`` face uses for this instance (0 before the end)."""
        return self._handle

    def end(self) -> Graph:
        """``aclmdlRICaptureEnd``: the recorded tasks go to the card (blocks for its reply)."""
        with self.stream.device._current():
            self._handle = _capture.capture_end(self.stream.handle)
        return self

    def replay(self, stream: Stream | None = None) -> None:
        """``aclmdlRIExecuteAsync`` on ``stream`` (default: the captured one); async."""
        target = stream or self.stream
        with target.device._current():
            _model_ri.execute_async(self._handle, target.handle)

    def describe(self) -> dict[str, Any]:
        """What ``aclmdlRIDebugJsonPrint`` writes (VERBOSE): the streams and their tasks."""
        return _model_ri.describe(self._handle)

    def destroy(self) -> None:
        """``aclmdlRIDestroy``: waits (bounded) for queued replays, then unloads."""
        if self._handle:
            with self.stream.device._current():
                _model_ri.destroy(self._handle)
            self._handle = 0

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        try:
            self.end()
        except AclError:
            if exc_type is None:
                raise
            return  # the body's exception is the one to see
        if exc_type is not None:
            self.destroy()

    def __repr__(self) -> str:
        return f"<npuemu.Graph {self._handle:#x} of stream {self.stream.id}>"
