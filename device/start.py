"""Starting a device worker process, two ways: ``python -m npuemu.device`` (a worker run by
hand, ``device/__main__.py``) and ``fork_worker`` (the node supervisor's way).

``prepare`` runs before numpy is first imported in the process: the BLAS library is limited
to one thread (unless the environment already says otherwise: each engine is one thread of
the card, and a multi-threaded BLAS under every engine thread and beside the other cards'
workers oversubscribes the host's cores), and numpy's floating-point warnings are silenced (a
card computes inf and NaN without a word, and a worker's stderr is the user's terminal).

``fork_worker``: the supervisor imports the worker's modules once (at its first spawn, after
``prepare``) and forks each worker from itself, so a card starts in milliseconds instead of
an interpreter start and a third of a second of imports per card. The modules include what
the op kernels import (numpy, ``shared/conv.py`` for Conv2D, ``shared/pool.py`` for
pooling): a card's first kernel binary (``OP_LOAD``) would otherwise import numpy in the
card's loop, about 0.1 s, inside the first op launch or model load of every process. The
supervisor is single-threaded, and with the BLAS limited before numpy loads it has no
library threads either, so the fork copies one thread and no held lock. The child, before it runs
``worker.main``, does what an ``exec`` would: SIGTERM back to its default (SIGINT stays
ignored, as the supervisor's ignored disposition survives an exec), stdin on /dev/null, every
other inherited descriptor (the control socket, its connections, the selector, pidfds)
closed, and its title (``/proc/PID/cmdline``, what ``ps`` shows) set to the command line it
would have had, ``python -m npuemu.device --node N --dev D ...``. The objects of the
supervisor the child inherits are frozen out of the garbage collector (``gc.freeze``) and
stay referenced from the forking frame, so none is finalized in the child (none closes a
descriptor number the worker reuses); the child ends with ``os._exit``, running no
supervisor ``atexit`` or finalizer. ``WorkerProc`` is the supervisor's handle on the child
(the part of ``subprocess.Popen`` it uses).
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable
from typing import NoReturn

import setproctitle

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def prepare() -> None:
    """Before numpy loads: one BLAS thread (unless set), numpy's FP warnings silenced."""
    for var in BLAS_VARS:
        os.environ.setdefault(var, "1")
    warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero|underflow) "
                            r"encountered", RuntimeWarning)


class WorkerProc:
    """A forked worker, as the supervisor sees it: ``pid``, ``poll``, ``wait``, ``kill``
    (``subprocess.Popen``'s meanings: the exit code, or minus the signal that ended it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code if the worker has ended (reaped now), else None; never blocks."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until the worker ends (at most ``timeout`` s: ``subprocess.TimeoutExpired``
        after it); its exit code."""
        if self.returncode is None and timeout is not None:
            fd = os.pidfd_open(self.pid)
            try:
                ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
            finally:
                os.close(fd)
            if not ready:
                raise subprocess.TimeoutExpired(f"device worker {self.pid}", timeout)
        if self.returncode is None:
            _pid, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL, unless it was already reaped."""
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def fork_worker(argv: list[str]) -> WorkerProc:
    """Fork a device worker running ``worker.main(argv)`` (``argv`` as ``python -m
    npuemu.device`` takes it); returns at once in the supervisor. Raises OSError if the
    fork fails."""
    prepare()
    from npuemu.device import worker  # once per supervisor: every fork shares the import
    from npuemu.shared import conv, pool  # noqa: F401  (the kernels' runtime: module doc)

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:
        gc.unfreeze()
        raise
    if pid:
        gc.unfreeze()
        return WorkerProc(pid)
    _child(worker.main, argv)


def _child(main: Callable[[list[str]], int], argv: list[str]) -> NoReturn:
    """The forked child: made to look exec'd (see the module docstring), then the worker."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        sys.argv = ["npuemu.device", *argv]
        setproctitle.setproctitle(" ".join([sys.executable, "-m", "npuemu.device", *argv]))
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or broken terminal
                stream.flush()
        os._exit(code)
