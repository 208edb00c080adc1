"""Host rows for programs on the Pythonic API (``npuemu.host.api``), as ``acl.prof``'s
``ApiTimer`` gives them to pyACL programs: while a profiling session with the API bits runs
(``npuemu msprof --ascendcl=on``), every public method of ``Device``, ``DeviceArray``,
``DeviceBuffer``, ``Stream`` and ``Event`` and the module's public functions report
``(name, thread, start, end)`` to the session, named ``Device.malloc``, ``Stream.synchronize``
... (the Pythonic names: these calls have no single C API name). Only the outermost call of
a thread is timed (``Device.array`` calling ``DeviceArray`` methods is one row).

Threads: any thread calls the wrapped methods; the nesting depth is per thread
(``threading.local``). ``install``/``uninstall`` run in the thread that starts and stops the
session, before and after the program runs.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from types import FunctionType, ModuleType
from typing import Any

CLASSES = ("Device", "DeviceArray", "DeviceBuffer", "Stream", "Event")
"""The classes of ``npuemu.host.api`` whose public methods are timed."""


class PythonicApiTimer:
    """Wraps the Pythonic API's public methods and functions with timers reporting to the
    session (``install``); ``uninstall`` restores them. A function the program bound to its
    own name before the start is not timed."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []
        self.depth = threading.local()

    def install(self, run: Any) -> None:
        from npuemu.host import api

        for cls_name in CLASSES:
            cls = getattr(api, cls_name)
            for name, member in list(vars(cls).items()):
                if name.startswith("_") or not isinstance(member, FunctionType):
                    continue
                self._wrap(cls, name, member, f"{cls_name}.{name}", run)
        for name in getattr(api, "__all__", ()):
            member = getattr(api, name, None)
            if isinstance(member, FunctionType) and not inspect.isclass(member):
                self._wrap(api, name, member, name, run)

    def _wrap(self, owner: type | ModuleType, name: str, fn: Any, label: str,
              run: Any) -> None:
        self.saved.append((owner, name, fn))
        setattr(owner, name, self._timed(fn, label, run))

    def _timed(self, fn: Any, label: str, run: Any) -> Any:
        clock, depth = time.monotonic_ns, self.depth

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            level = getattr(depth, "n", 0)
            depth.n = level + 1
            begin = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                depth.n = level
                if level == 0:
                    run.api(label, begin, clock())

        return timed

    def uninstall(self) -> None:
        while self.saved:
            owner, name, fn = self.saved.pop()
            setattr(owner, name, fn)
