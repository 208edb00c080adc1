"""How the pyACL face turns the runtime's exceptions into return codes."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from npuemu.host.core import plog
from npuemu.shared import errors, logring

_local = threading.local()


def recent_message() -> str:
    """The detail of the calling thread's most recent failure (``aclGetRecentErrMsg``)."""
    return getattr(_local, "message", "")


def _failed(err: errors.AclError, name: str) -> int:
    return fail(err, f"rt.{name}")


def fail(err: errors.AclError, name: str, code: int | None = None) -> int:
    """Record ``err`` as the calling thread's last failure (``get_recent_err_msg``, the
    host plog) and return its code, or ``code`` when the face reports another one."""
    code = err.code if code is None else code
    _local.message = str(err)
    _local.last = code
    plog.log(logring.ERROR, f"acl.{name} failed: {err}")
    return code


def last_error(clear: bool) -> int:
    """The calling thread's last failure code (``aclrtPeekAtLastError``/``GetLastError``)."""
    code = getattr(_local, "last", 0)
    if clear:
        _local.last = 0
    return code


def _plain(value: Any) -> Any:
    """Enum members (IntEnum, IntFlag) as plain ints, as pyACL returns them."""
    return int(value) if isinstance(value, int) and type(value) not in (int, bool) else value


def no_args(fn: Callable[[], Any]) -> Callable[..., Any]:
    """For calls without parameters: extra arguments are accepted and ignored, as pyACL's
    ``METH_VARARGS`` functions that never parse them do."""

    @functools.wraps(fn)
    def call(*_ignored: Any) -> Any:
        return fn()

    return call


def ret_only(fn: Callable[..., Any]) -> Callable[..., int]:
    """For calls that return just ``ret``."""

    @functools.wraps(fn)
    def call(*args: Any) -> int:
        try:
            fn(*args)
        except errors.AclError as err:
            return _failed(err, fn.__name__)
        return 0

    return call


def with_result(*defaults: Any) -> Callable[[Callable[..., Any]], Callable[..., tuple]]:
    """For calls returning ``(out..., ret)``; ``defaults`` are the outputs on failure."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., tuple]:
        @functools.wraps(fn)
        def call(*args: Any) -> tuple:
            try:
                out = fn(*args)
            except errors.AclError as err:
                return (*defaults, _failed(err, fn.__name__))
            if type(out) is int:  # the commonest result (a pointer, a status), as it is
                return out, 0
            return (*map(_plain, out), 0) if isinstance(out, tuple) else (_plain(out), 0)

        return call

    return wrap
