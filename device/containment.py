"""Containment of the code a card runs for its users: kernel files at load, kernels at run.

A kernel is Python, and Python code can raise what is not an ``Exception``: ``SystemExit``
(``sys.exit()``), ``KeyboardInterrupt``, ``GeneratorExit``, or a ``BaseExceptionGroup`` of
those. The worker's handlers catch ``Exception``; such an escape would end the engine
thread that ran the kernel (every later task of that engine, from any process, would then
wait for the execution timeout) or, in the loop thread (a kernel file at load, a tiny
kernel run inline), the whole worker. ``user_code`` is the one wrapper put where user code
is called (``with user_code:``): it turns such a BaseException into ``UserExit``, an
``Exception``, so the handler around it fails the task, or the load, with the code it
gives any exception of a kernel (``exec/kernels.py``, ``exec/model.py``).
``RecursionError`` and ``MemoryError`` are ``Exception`` already and go through as they are.

The worker's own stop is kept apart from a kernel's. A node's worker stops through its
control block (``STOPPING``, written by the supervisor) or when the supervisor is gone,
never by an exception; SIGINT is ignored there (the supervisor ignores it and the worker
inherits that). A worker run by hand gets ``install_sigint``: its SIGINT handler marks the
stop (``stopping``), asks the loop to end and raises KeyboardInterrupt in the loop thread;
``is_stop`` tells that KeyboardInterrupt from one a kernel raised, and ``user_code`` and
the loop's handlers let it through (Ctrl-C during an inline kernel still stops the
worker). Engine threads never receive a signal: a KeyboardInterrupt there is always the
kernel's.

Not containable in-process (the README's section on kernel faults): a kernel that calls
``os._exit`` or crashes natively ends the worker (the host sees the card lost); one that
loops forever holding the GIL stops the whole worker, heartbeat included.

Threading model: stateless but for ``_signalled``, a bool written once by the SIGINT
handler (main thread) and read by any thread (a single load).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Literal


class UserExit(Exception):
    """User code (a kernel, or a kernel file at load) raised a BaseException that is not an
    Exception (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, ...); the original
    is its ``__cause__``."""


class _UserCode:
    """``with user_code:`` around a call of user code (see the module docstring)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if kind is None or issubclass(kind, Exception) or is_stop(err):
            return False
        raise UserExit(f"{kind.__name__}({err})" if str(err) else kind.__name__) from err


user_code = _UserCode()
_signalled = False


def is_stop(err: BaseException | None) -> bool:
    """True if ``err`` is the worker's own stop: a KeyboardInterrupt once the worker's
    SIGINT handler has run (anything else is a failure of the code that raised it)."""
    return _signalled and isinstance(err, KeyboardInterrupt)


def stopping() -> bool:
    """True once the worker's SIGINT handler has run."""
    return _signalled


def install_sigint(stop: Callable[[], None]) -> bool:
    """Main thread: if SIGINT has Python's default handler (a worker run by hand), replace it
    with one that marks the stop, calls ``stop`` (the loop ends at its next pass even if the
    exception is lost in a blocking call) and raises KeyboardInterrupt. False if SIGINT is
    ignored or handled otherwise (a node's worker): nothing is installed."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False

    def interrupted(signum: int, frame: FrameType | None) -> None:
        global _signalled
        _signalled = True
        stop()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    return True
