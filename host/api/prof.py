"""Profiling on the Pythonic face: ``with profile("out") as prof:`` records every task.

    >>> from npuemu.host.api import profile
    >>> with profile("prof_out", devices=[0]) as prof:
    ...     with prof.range("step 1"):
    ...         ...                                  # streams, copies, kernels
    >>> prof.outputs["timeline"]                     # .../mindstudio_profiler_output/msprof_*.json

Mirrors ``aclprofInit`` + ``aclprofStart`` on entry and ``aclprofStop`` + ``aclprofFinalize``
on exit (which blocks while the last records are drained and the run is exported; the
export happens even when the block raises, so a failing program leaves its trace). Raises
``AclError`` 100042 if this process already profiles. Host API calls of the ``acl`` face
are not timed here (use ``acl.prof`` with ``ACL_PROF_ACL_API`` or ``npuemu msprof``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from npuemu.host.prof import export as _export
from npuemu.host.prof import session as _session


class Profile:
    """One profiling run; use it as a context manager (``profile(...)``)."""

    def __init__(self, output: str, devices: list[int] | None = None,
                 data_types: int = _session.ACL_PROF_TASK_TIME | _session.ACL_PROF_MSPROFTX,
                 export: bool = True) -> None:
        self.output, self.devices, self.data_types = output, devices, data_types
        self.export = export
        self.session: _session.Session | None = None
        self.outputs: dict[str, str] = {}

    @property
    def dir(self) -> str:
        """The run's ``PROF_*`` directory (once entered)."""
        if self.session is None:
            raise RuntimeError("the profile has not started")
        return self.session.dir

    def __enter__(self) -> Profile:
        self.session = _session.Session(self.output, self.data_types, self.devices)
        _session.activate(self.session)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.session is not None
        _session.deactivate(self.session)
        if self.export:
            self.outputs = _export.export(self.session.dir)

    def mark(self, message: str) -> None:
        """An instant msproftx mark on the calling thread."""
        if self.session is not None and self.session.running:
            self.session.tx({"kind": "mark", "message": message,
                             "tid": threading.get_ident(), "start_ns": time.monotonic_ns(),
                             "end_ns": 0})

    @contextmanager
    def range(self, message: str) -> Iterator[None]:
        """An msproftx range around the ``with`` block."""
        begin = time.monotonic_ns()
        try:
            yield
        finally:
            if self.session is not None and self.session.running:
                self.session.tx({"kind": "range", "message": message,
                                 "tid": threading.get_ident(), "start_ns": begin,
                                 "end_ns": time.monotonic_ns()})


def profile(output: str, devices: list[int] | None = None, *, export: bool = True) -> Profile:
    """``with profile(dir):`` records every task of this process on ``devices`` (all by
    default) into a new ``dir/PROF_*`` and exports it on exit."""
    return Profile(output, devices, export=export)
