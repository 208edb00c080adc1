"""Kernel binaries and launches (``aclrtBinaryLoadFromFile``, ``aclrtLaunchKernel``).

A binary is a Python source file whose kernels are marked with
``npuemu.shared.kernel.kernel`` (see that module); it is loaded into the current device's
worker, which runs each launch on the engine the kernel names. ``LIBRARY`` is the path of the
ready library (add, mul, matmul, relu, softmax, cast, fill, reduce_sum).

pyACL passes kernel arguments as a packed buffer; here ``args`` is a sequence of ints (device
pointers, sizes), floats, bools and strings (dtype names), passed to the kernel as is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import npuemu.shared.kernel_library
from npuemu.host.core import memory, runtime, vmm
from npuemu.host.core.stream import resolve, submit
from npuemu.host.driver.interface import Link
from npuemu.shared import errors
from npuemu.shared.kernel import (
    MAX_BLOCKS,
    MAX_TIMEOUT_US,
    TIMEOUT_INTERVAL_US,
    actual_timeout_us,
)
from npuemu.shared.protocol import Op

LIBRARY = npuemu.shared.kernel_library.__file__
_ARG_TYPES = (int, float, str, bool)


@dataclass(eq=False)
class Binary:
    handle: int
    link: Link
    bin_id: int
    kernels: dict[str, str]
    destroyed: bool = False


@dataclass(eq=False)
class Function:
    handle: int
    binary: Binary
    name: str
    engine: str
    destroyed: bool = False

    @property
    def link(self) -> Link:
        return self.binary.link


def binary_load_from_data(data: bytes | str, name: str = "<data>") -> Binary:
    """Mirrors ``aclrtBinaryLoadFromData``: load kernel source into the current device
    (one round trip; the worker executes the source)."""
    source = data.decode() if isinstance(data, bytes | bytearray) else data
    if not isinstance(source, str) or not source.strip():
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "empty kernel binary")
    rt = runtime.get()
    link = rt.current_link()
    bin_id, kernels = link.call(Op.BINARY_LOAD, source, name)
    return rt.register(Binary(0, link, bin_id, dict(kernels)))


def binary_load_from_file(path: str) -> Binary:
    """Mirrors ``aclrtBinaryLoadFromFile``."""
    try:
        with open(os.fspath(path), encoding="utf-8") as f:
            source = f.read()
    except (OSError, TypeError, UnicodeDecodeError) as err:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               f"cannot read kernel binary {path!r}: {err}") from err
    return binary_load_from_data(source, os.fspath(path))


def _binary(handle: object) -> Binary:
    return runtime.lookup(runtime.get().handles, handle, Binary, "binary")


def binary_get_function(handle: object, name: str) -> Function:
    """Mirrors ``aclrtBinaryGetFunction``: 107000 if the binary has no such kernel."""
    binary = _binary(handle)
    if name not in binary.kernels:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"no kernel {name!r}; the binary has {sorted(binary.kernels)}")
    return runtime.get().register(Function(0, binary, name, binary.kernels[name]))


def binary_unload(handle: object) -> None:
    """Mirrors ``aclrtBinaryUnLoad``: launches already queued still run."""
    binary = _binary(handle)
    binary.destroyed = True
    runtime.get().handles.pop(binary.handle, None)
    binary.link.post(Op.BINARY_UNLOAD, binary.bin_id)


def launch_kernel(func: object, num_blocks: int, args: Iterable[object] | None,
                  stream_handle: object) -> None:
    """Mirrors ``aclrtLaunchKernel``: queue ``num_blocks`` blocks of the kernel on the stream
    (async). The kernel's failure surfaces at the next synchronize, with its engine's code."""
    found = runtime.lookup(runtime.get().handles, func, Function, "function")
    if found.binary.destroyed:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"{func!r}: binary unloaded")
    blocks = runtime.index(num_blocks, errors.ACL_ERROR_INVALID_PARAM, "num_blocks")
    if not 1 <= blocks <= MAX_BLOCKS:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               f"num_blocks {blocks} not in [1, {MAX_BLOCKS}]")
    values = list(args or ())
    if not all(isinstance(v, _ARG_TYPES) for v in values):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               "kernel arguments must be ints, floats, bools or strings")
    stream = resolve(stream_handle, for_submit=True)
    if stream.link is not found.link:
        raise errors.error_for(errors.ACL_ERROR_RT_STREAM_CONTEXT,
                               "the binary was loaded on another device")
    memory.flush_frees(stream.link, only_if_waiting=True)  # a kernel may touch freed blocks
    values = vmm.kernel_args(values)  # pointers into mapped virtual ranges (host/core/vmm.py)
    submit(stream, Op.LAUNCH, found.binary.bin_id, found.name, blocks, values)


# task execution timeout (process-wide; sent to every card this process has open) ---------------
def set_op_execute_timeout(seconds: int) -> None:
    """Mirrors ``aclrtSetOpExecuteTimeOut`` (seconds, a ``uint32_t``; 0 = the maximum).
    Does not block. The last call of the process wins, for every card."""
    value = runtime.index(seconds, errors.ACL_ERROR_INVALID_PARAM, "timeout")
    if not 0 <= value < 1 << 32:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"timeout {value} s")
    _apply_timeout(actual_timeout_us(value * 1_000_000))


def set_op_execute_timeout_v2(timeout_us: int) -> int:
    """Mirrors ``aclrtSetOpExecuteTimeOutV2`` (microseconds, a ``uint64_t``; 0 = the
    maximum); returns the timeout in effect: a multiple of the interval, at most
    ``interval * 254``. Does not block."""
    value = runtime.index(timeout_us, errors.ACL_ERROR_INVALID_PARAM, "timeout")
    if not 0 <= value < 1 << 64:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"timeout {value} us")
    actual = actual_timeout_us(value)
    _apply_timeout(actual)
    return actual


def get_op_timeout_interval() -> int:
    """Mirrors ``aclrtGetOpTimeOutInterval``: the timeout granularity in microseconds."""
    return TIMEOUT_INTERVAL_US


def get_op_execute_timeout() -> int:
    """Mirrors ``aclrtGetOpExecuteTimeout``: the AI Core timeout in effect, in milliseconds
    (the set one, else the default)."""
    return (runtime.get().op_timeout_us or MAX_TIMEOUT_US) // 1000


def _apply_timeout(timeout_us: int) -> None:
    rt = runtime.get()
    with rt.lock:
        rt.op_timeout_us = timeout_us
        for od in list(rt.devices.values()):
            if od.link.alive():
                od.link.post(Op.SET_TIMEOUT, timeout_us)
