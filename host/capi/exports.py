"""The table of C functions npuemu implements, and what their bodies share.

An implementation is a Python function named exactly as the C function, registered with
``@export``; it receives cffi cdata (pointers, ints) and returns what the C function returns.
It calls the ``acl`` face (``npuemu.host.acl``) or the runtime core beneath it, so checks,
codes, handles and ``aclGetRecentErrMsg`` are those of the Python programs.

Pointers and handles cross as ints (``addr``): a handle is the same int the ``acl`` face hands
out, cast to a pointer; C never dereferences one, so a NULL, dangling or foreign handle gets
the runtime's code, never a crash. An out-parameter that is NULL gets 100000
(``ACL_ERROR_INVALID_PARAM``), as the ACL layer's checks return.

Threads: C programs call from any thread; cffi gives each C thread its own Python thread state
(kept for the thread's life), so the runtime's per-thread state (current context, last error)
is per C thread. ``_local`` holds each thread's returned strings (valid until that thread's
next call of the same function). ``_IMPLS`` is filled at import, before any C call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from npuemu.host.acl import _wrap
from npuemu.host.core import plog
from npuemu.shared import errors, logring

_IMPLS: dict[str, Callable[..., Any]] = {}
_local = threading.local()
ffi: Any = None
"""libascendcl's cffi ``FFI`` (set by ``boot.attach`` before the first call runs)."""


def export(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``fn`` as the body of the C function of the same name."""
    _IMPLS[fn.__name__] = fn
    return fn


def forward(name: str, fn: Callable[..., int]) -> None:
    """Register the body of the C function ``name`` whose first argument is a handle: ``fn``
    (the ``acl`` face's call) gets it as the int the runtime uses, then the other arguments as
    they came."""

    def call(handle: Any, *args: Any) -> int:
        return fn(addr(handle), *args)

    call.__name__ = call.__qualname__ = name
    _IMPLS[name] = call


def implementation(name: str) -> Callable[..., Any] | None:
    return _IMPLS.get(name)


def addr(p: Any) -> int:
    """A pointer or handle argument as the int the runtime uses (NULL is 0)."""
    return int(ffi.cast("uintptr_t", p))


def text(p: Any) -> str | None:
    """A ``const char *`` argument as str (None for NULL)."""
    return None if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def invalid(func: str, detail: str, code: int = errors.ACL_ERROR_INVALID_PARAM) -> int:
    """Record a failure of ``func`` (its message in ``aclGetRecentErrMsg`` and the host log)
    and return its code (100000 unless told)."""
    return _wrap.fail(errors.error_for(code, f"{func}: {detail}"), func, code)


def kept_string(func: str, value: str | None) -> Any:
    """A ``const char *`` result that stays valid until this thread calls ``func`` again
    (NULL for None)."""
    if value is None:
        return ffi.NULL
    buf = ffi.new("char[]", value.encode())
    setattr(_local, func, buf)
    return buf


def not_emulated(name: str, kind: str, lib_ffi: Any,
                 code: int = errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT) -> Callable[..., Any]:
    """The body of a declared C function npuemu does not emulate: one log line, then
    ``code`` (ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000, for an ``aclError``;
    HCCL_E_NOT_SUPPORT for HCCL) for an int result, else NULL / 0."""
    result: Any = {"int": code, "void": None, "pointer": lib_ffi.NULL}.get(kind, 0)

    def call(*_args: Any) -> Any:
        plog.log(logring.WARNING, f"{name} is not emulated by npuemu (returns {result})",
                 module="ASCENDCL")
        _wrap.fail(errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                    f"{name} is not emulated by npuemu"), name)
        return result

    call.__name__ = name
    return call
