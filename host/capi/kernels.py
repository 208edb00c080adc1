"""C bodies of the kernel calls of ``acl_rt.h`` (``aclrtBinaryLoadFromFile`` and
``...FromData``, ``aclrtBinaryGetFunction``, ``aclrtBinaryUnLoad``, ``aclrtLaunchKernel``).

A binary is an npuemu kernel file (Python source whose kernels are marked with
``npuemu.shared.kernel.kernel``), the same the worker runs for Python programs; the SDK holds
the ready library at ``T/kernels/npuemu_library.py`` (add, mul, matmul, relu, softmax, cast,
fill, reduce_sum). The load options are accepted and not read.

Kernel arguments from C: ``argsData`` is read as ``argsSize / 8`` 64-bit words, each handed to
the kernel as an int (device pointers, element counts), in order; the kernel's other
parameters keep their defaults (e.g. ``dtype="float32"``). ``argsSize`` not a multiple of 8:
100000. Floats and strings cannot be passed from C (partial: say so in the kernel file).
``aclrtLaunchKernel`` is asynchronous; a kernel's failure surfaces at the next synchronize
and through the exception callbacks, with its engine's code. Its C function (``native.c``)
reads the words and calls ``acl.rt.launch_kernel`` itself; the body here runs for a
malformed ``argsSize``/``argsData`` and a thread's first call.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import rt
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export

WORD = 8


def _out_handle(func: str, p: Any, result: tuple) -> int:
    value, ret = result
    if ret == 0:
        p[0] = X.ffi.cast("void *", value)
    return ret


@export
def aclrtBinaryLoadFromFile(path: Any, options: Any, out: Any) -> int:
    if path == X.ffi.NULL or out == X.ffi.NULL:
        return X.invalid("aclrtBinaryLoadFromFile", "binPath or binHandle is NULL")
    return _out_handle("aclrtBinaryLoadFromFile", out, rt.binary_load_from_file(X.text(path)))


@export
def aclrtBinaryLoadFromData(data: Any, length: int, options: Any, out: Any) -> int:
    if data == X.ffi.NULL or out == X.ffi.NULL or length == 0:
        return X.invalid("aclrtBinaryLoadFromData", "data or binHandle NULL, or length 0")
    source = bytes(X.ffi.buffer(X.ffi.cast("char *", data), length))
    return _out_handle("aclrtBinaryLoadFromData", out, rt.binary_load_from_data(source))


@export
def aclrtBinaryGetFunction(binary: Any, name: Any, out: Any) -> int:
    if name == X.ffi.NULL or out == X.ffi.NULL:
        return X.invalid("aclrtBinaryGetFunction", "kernelName or funcHandle is NULL")
    return _out_handle("aclrtBinaryGetFunction", out,
                       rt.binary_get_function(X.addr(binary), X.text(name)))


X.forward("aclrtBinaryUnLoad", rt.binary_unload)


@export
def aclrtLaunchKernel(func: Any, blocks: int, args: Any, size: int, s: Any) -> int:
    """Mirrors ``aclrtLaunchKernel`` (see the module docstring for the argument words)."""
    if size % WORD or (size and args == X.ffi.NULL):
        return X.invalid("aclrtLaunchKernel", f"argsSize {size} is not a whole number of "
                                              "64-bit words, or argsData is NULL")
    words = X.ffi.unpack(X.ffi.cast("uint64_t *", args), size // WORD) if size else []
    return rt.launch_kernel(X.addr(func), blocks, words, X.addr(s))
