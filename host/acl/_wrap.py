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
    _local.message = str(err)
    _local.last = err.code
    plog.log(logring.ERROR, f"acl.rt.{name} failed: {err}")
    return err.code


def last_error(clear: bool) -> int:
    """The calling thread's last failure code (``aclrtPeekAtLastError``/``GetLastError``)."""
    code = getattr(_local, "last", 0)
    if clear:
        _local.last = 0
    return code


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
            return (*out, 0) if isinstance(out, tuple) else (out, 0)

        return call

    return wrap
