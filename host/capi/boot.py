"""What runs inside a C program when it first calls one of npuemu's C libraries.

cffi starts an interpreter in the C process on the first call into ``libascendcl.so`` or
``libhccl.so`` and runs the library's init code (``build._init_code``), which calls
``attach``. The library names the interpreter before it starts (``native.c``: the program
name is the Python that built the library, so its standard library, site-packages and
virtual environment are found, whatever ``python3`` is first on the C program's ``PATH``);
``attach`` also sets ``sys.executable`` to it, so nodes and their workers start with the
right interpreter. ``attach`` gives every function the library
declares its body: the ``@export`` implementation of that name, or the not-emulated body
(207000 and a log line). libascendcl's hot calls (``build.ASCENDCL.hot``) are C functions of
``native.c``, which ``attach`` binds last (``npuemu_bind_hot``: the Python functions they
call, and ``_on_error`` for their failures); cffi's body of each (``npuemu_py_<name>``) gets
the ``@export`` implementation of ``<name>``.

An embedded interpreter is never finalized, so the runtime's exit hooks (atexit teardown, a
Python SIGTERM handler that could run only when the C program next entered Python) are not
installed: the C program keeps its own signal behaviour, and when it exits, with or without
``aclFinalize``, its node connection closes and the node cleans up (as for ``kill -9``).
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

from npuemu.host.capi import exports
from npuemu.host.core import plog, runtime
from npuemu.host.hccl.types import HcclResult
from npuemu.shared import errors, logring

_ERROR = errors.ACL_ERROR_INTERNAL_ERROR
HCCL_NOT_SUPPORT = int(HcclResult.HCCL_E_NOT_SUPPORT)
HCCL_INTERNAL = int(HcclResult.HCCL_E_INTERNAL)
HOT_PREFIX = "npuemu_py_"


def _on_error(exc_type: type, exc: BaseException, tb: Any) -> None:
    """An implementation raised (a bug of npuemu, never the C program's): log it; the C
    call returns ACL_ERROR_INTERNAL_ERROR (500000; HCCL_E_INTERNAL for HCCL), or NULL / 0."""
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    plog.log(logring.ERROR, f"npuemu C ABI internal error: {text}", module="ASCENDCL")
    print(f"npuemu: internal error in a C call:\n{text}", file=sys.stderr)


def _kind(ctype: Any) -> str:
    res = ctype.result
    if res.kind == "pointer":
        return "pointer"
    if res.kind == "void":
        return "void"
    return "int" if res.cname == "int" or res.kind == "enum" else "other"


def attach(soname: str, ffi: Any, lib: Any, python: str) -> None:
    """Give every function of ``lib`` its body (called once per library, by its init).
    ``python`` is the interpreter that built the library; in a C program it becomes
    ``sys.executable`` (nodes are spawned with it). Loaded into a Python process (ctypes),
    the process's own interpreter and exit hooks are left as they are."""
    if not lib.npuemu_host_is_python():
        sys.executable = python
        runtime.without_exit_hooks()
    code, internal = errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, _ERROR
    if soname == "libhccl.so":
        code, internal = HCCL_NOT_SUPPORT, HCCL_INTERNAL
        face = "hccl"
    elif soname == "libacl_dvpp.so":  # its own FFI: libascendcl's stays exports.ffi
        face = "dvpp"
    else:
        exports.ffi = ffi
        face = "ascendcl"
    module = importlib.import_module(f"npuemu.host.capi.{face}")  # the library's calls only
    if hasattr(module, "bind"):
        module.bind(ffi)
    for name in dir(lib):
        obj = getattr(lib, name)
        c_name = name.removeprefix(HOT_PREFIX)  # a hot call's cffi body (build.renamed_hot)
        if not callable(obj) or c_name.startswith("npuemu_"):  # native.c's own
            continue
        ctype = ffi.typeof(obj)
        kind = _kind(ctype)
        body = exports.implementation(c_name) or exports.not_emulated(c_name, kind, ffi, code)
        extra = {"error": internal} if kind == "int" else {}
        ffi.def_extern(name=name, onerror=_on_error, **extra)(body)
    if soname == "libascendcl.so":
        from npuemu.host.capi import base

        ffi.def_extern(name="npuemu_app_log", onerror=_on_error)(base.npuemu_app_log)
        if lib.npuemu_bind_hot():  # the hot calls then go through their cffi bodies
            plog.log(logring.WARNING, "libascendcl.so: native.c could not bind its hot "
                     "calls (above, on stderr)", module="ASCENDCL")
