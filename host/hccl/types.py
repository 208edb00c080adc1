"""HCCL's public types (``hccl_types.h``): result codes, data types, reduce ops, and the
environment settings the communicators read.

The values are HCCL's (``hccl_types.h``); **HcclDataType numbering differs from
aclDataType**. ``HcclError`` is the Python exception of the Pythonic face; it carries
``.code`` (an ``HcclResult``) and pickles.
"""

from __future__ import annotations

import enum
import os

import numpy as np

from npuemu.shared.bf16 import bf16_reduce, from_float32, to_float32

__all__ = ["BFLOAT16", "HCCL_ROOT_INFO_BYTES", "NUMPY", "OPS", "HcclDataType", "HcclError",
           "HcclReduceOp", "HcclResult", "HcclSendRecvType", "bf16_reduce", "buffer_bytes",
           "connect_timeout_s", "error_string", "exec_timeout_s", "from_float32", "is_bf16",
           "kernel_dtype", "numpy_dtype", "reduce_name", "to_float32"]

HCCL_ROOT_INFO_BYTES = 4108


class HcclResult(enum.IntEnum):
    HCCL_SUCCESS = 0
    HCCL_E_PARA = 1
    HCCL_E_PTR = 2
    HCCL_E_MEMORY = 3
    HCCL_E_INTERNAL = 4
    HCCL_E_NOT_SUPPORT = 5
    HCCL_E_NOT_FOUND = 6
    HCCL_E_UNAVAIL = 7
    HCCL_E_SYSCALL = 8
    HCCL_E_TIMEOUT = 9
    HCCL_E_OPEN_FILE_FAILURE = 10
    HCCL_E_TCP_CONNECT = 11
    HCCL_E_ROCE_CONNECT = 12
    HCCL_E_TCP_TRANSFER = 13
    HCCL_E_ROCE_TRANSFER = 14
    HCCL_E_RUNTIME = 15
    HCCL_E_DRV = 16
    HCCL_E_PROFILING = 17
    HCCL_E_CCE = 18
    HCCL_E_NETWORK = 19
    HCCL_E_AGAIN = 20
    HCCL_E_REMOTE = 21
    HCCL_E_SUSPENDING = 22
    HCCL_E_OPRETRY_FAIL = 23
    HCCL_E_OOM = 24
    HCCL_E_IN_STATUS = 1041
    HCCL_E_RESERVED = 1042


class HcclDataType(enum.IntEnum):
    HCCL_DATA_TYPE_INT8 = 0
    HCCL_DATA_TYPE_INT16 = 1
    HCCL_DATA_TYPE_INT32 = 2
    HCCL_DATA_TYPE_FP16 = 3
    HCCL_DATA_TYPE_FP32 = 4
    HCCL_DATA_TYPE_INT64 = 5
    HCCL_DATA_TYPE_UINT64 = 6
    HCCL_DATA_TYPE_UINT8 = 7
    HCCL_DATA_TYPE_UINT16 = 8
    HCCL_DATA_TYPE_UINT32 = 9
    HCCL_DATA_TYPE_FP64 = 10
    HCCL_DATA_TYPE_BFP16 = 11
    HCCL_DATA_TYPE_INT128 = 12
    HCCL_DATA_TYPE_HIF8 = 14
    HCCL_DATA_TYPE_FP8E4M3 = 15
    HCCL_DATA_TYPE_FP8E5M2 = 16
    HCCL_DATA_TYPE_FP8E8M0 = 17
    HCCL_DATA_TYPE_RESERVED = 255


class HcclReduceOp(enum.IntEnum):
    HCCL_REDUCE_SUM = 0
    HCCL_REDUCE_PROD = 1
    HCCL_REDUCE_MAX = 2
    HCCL_REDUCE_MIN = 3
    HCCL_REDUCE_RESERVED = 255


class HcclSendRecvType(enum.IntEnum):
    HCCL_SEND = 0
    HCCL_RECV = 1


_MESSAGES = {
    HcclResult.HCCL_SUCCESS: "success",
    HcclResult.HCCL_E_PARA: "parameter error",
    HcclResult.HCCL_E_PTR: "empty pointer",
    HcclResult.HCCL_E_MEMORY: "memory error",
    HcclResult.HCCL_E_INTERNAL: "internal error",
    HcclResult.HCCL_E_NOT_SUPPORT: "not support feature",
    HcclResult.HCCL_E_NOT_FOUND: "not found specific resource",
    HcclResult.HCCL_E_TIMEOUT: "timeout",
    HcclResult.HCCL_E_OPEN_FILE_FAILURE: "open file fail",
    HcclResult.HCCL_E_RUNTIME: "call runtime api fail",
    HcclResult.HCCL_E_REMOTE: "remote error",
}

# Data types the emulated cards compute on (numpy names for the reduce kernel). bfloat16 is
# carried as its uint16 bits (``BFLOAT16`` below, see npuemu.shared.bf16).
NUMPY = {
    HcclDataType.HCCL_DATA_TYPE_INT8: "int8",
    HcclDataType.HCCL_DATA_TYPE_INT16: "int16",
    HcclDataType.HCCL_DATA_TYPE_INT32: "int32",
    HcclDataType.HCCL_DATA_TYPE_FP16: "float16",
    HcclDataType.HCCL_DATA_TYPE_FP32: "float32",
    HcclDataType.HCCL_DATA_TYPE_INT64: "int64",
    HcclDataType.HCCL_DATA_TYPE_UINT64: "uint64",
    HcclDataType.HCCL_DATA_TYPE_UINT8: "uint8",
    HcclDataType.HCCL_DATA_TYPE_UINT16: "uint16",
    HcclDataType.HCCL_DATA_TYPE_UINT32: "uint32",
    HcclDataType.HCCL_DATA_TYPE_FP64: "float64",
}
BFLOAT16 = np.dtype(np.uint16, metadata={"hccl": "bfloat16"})
"""The numpy dtype of ``HCCL_DATA_TYPE_BFP16``: uint16 bits, tagged so that the reduce step
knows to widen to float32 (``kernel_dtype``). It compares equal to ``np.uint16``."""

OPS = {HcclReduceOp.HCCL_REDUCE_SUM: "sum", HcclReduceOp.HCCL_REDUCE_PROD: "prod",
       HcclReduceOp.HCCL_REDUCE_MAX: "max", HcclReduceOp.HCCL_REDUCE_MIN: "min"}


class HcclError(Exception):
    """A failed HCCL call; ``.code`` is its ``HcclResult``."""

    def __init__(self, code: int, detail: str = "") -> None:
        super().__init__(code, detail)
        self.code = int(code)
        self.detail = detail

    @property
    def name(self) -> str:
        try:
            return HcclResult(self.code).name
        except ValueError:
            return str(self.code)

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.detail}"


def error_string(code: int) -> str:
    """Mirrors ``HcclGetErrorString``."""
    try:
        return _MESSAGES.get(HcclResult(code), HcclResult(code).name)
    except ValueError:
        return "unknown error"


def numpy_dtype(dtype: object) -> np.dtype:
    """The numpy dtype of an ``HcclDataType`` (E_PARA if unknown, E_NOT_SUPPORT if the
    emulated cards cannot compute on it). Each call of a collective asks twice: the answers
    for plain ints are kept (an enum lookup and a dtype build cost a few µs)."""
    known = _DTYPES.get(dtype) if type(dtype) is int else None
    if known is not None:
        return known
    if type(dtype) is not int and not isinstance(dtype, HcclDataType):
        raise HcclError(HcclResult.HCCL_E_PARA, f"data type {dtype!r} is not an int")
    try:
        member = HcclDataType(dtype)
    except ValueError as err:
        raise HcclError(HcclResult.HCCL_E_PARA, f"unknown data type {dtype}") from err
    if member is HcclDataType.HCCL_DATA_TYPE_BFP16:
        return BFLOAT16
    if member not in NUMPY:
        raise HcclError(HcclResult.HCCL_E_NOT_SUPPORT, f"data type {member.name} is not "
                        "supported by the emulated cards")
    dt = np.dtype(NUMPY[member])
    if type(dtype) is int:
        _DTYPES[dtype] = dt
    return dt


_DTYPES: dict[int, np.dtype] = {}
"""``numpy_dtype``'s answers for plain ints (supported types only; bfloat16 is a constant)."""


def is_bf16(dt: np.dtype) -> bool:
    """``dt`` is ``BFLOAT16`` (the tagged uint16 of HCCL_DATA_TYPE_BFP16)."""
    metadata = dt.metadata
    return metadata is not None and metadata.get("hccl") == "bfloat16"


def kernel_dtype(dt: np.dtype) -> str:
    """The dtype name the reduce kernel takes: ``"bfloat16"`` for ``BFLOAT16`` (reduced
    through float32 by ``bf16_reduce``), else numpy's name (``dt.name`` costs ~6 µs, so the
    names of untagged dtypes are kept: a dtype with metadata compares equal to its plain
    twin, so tagged ones are never looked up)."""
    if dt.metadata:
        return "bfloat16" if is_bf16(dt) else dt.name
    name = _NAMES.get(dt)
    if name is None:
        name = _NAMES[dt] = dt.name
    return name


_NAMES: dict[np.dtype, str] = {}


def reduce_name(op: object) -> str:
    """The reduce kernel's name of an ``HcclReduceOp`` (E_PARA if unknown)."""
    known = _OP_NAMES.get(op) if type(op) is int else None
    if known is not None:
        return known
    if type(op) is not int and not isinstance(op, HcclReduceOp):
        raise HcclError(HcclResult.HCCL_E_PARA, f"reduce op {op!r} is not an int")
    try:
        return OPS[HcclReduceOp(op)]
    except (ValueError, KeyError) as err:
        raise HcclError(HcclResult.HCCL_E_PARA, f"unknown reduce op {op}") from err


_OP_NAMES: dict[object, str] = {int(op): name for op, name in OPS.items()}


def _env_int(name: str, default: int, lo: int) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw.strip() else default
    except ValueError:
        value = default
    return max(value, lo)


def exec_timeout_s() -> float:
    """``HCCL_EXEC_TIMEOUT`` (default 1836 s; 0 = never). The emulator takes any whole number
    of seconds ≥ 1 (hardware clamps per mode, e.g. a minimum of 68 on 910): tests use small
    values. 0 means 'never' as on hardware; it is kept as a very long wait (one day). Read
    at every call; the value of the last text seen is kept (every collective asks)."""
    raw = os.environ.get("HCCL_EXEC_TIMEOUT", "")
    seen, seconds = _exec_timeout[0]
    if raw != seen:
        value = _env_int("HCCL_EXEC_TIMEOUT", 1836, 0)
        seconds = 86400.0 if value == 0 else float(value)
        _exec_timeout[0] = (raw, seconds)  # one store: threads read a consistent pair
    return seconds


_exec_timeout: list[tuple[str | None, float]] = [(None, 0.0)]  # HCCL_EXEC_TIMEOUT's text, s


def connect_timeout_s() -> float:
    """``HCCL_CONNECT_TIMEOUT``: [120, 7200] s on hardware, and the real wait is 20 s longer.
    The emulator accepts values from 1 (tests use small ones) and adds the same 20 s only
    when the value is in the hardware range."""
    value = _env_int("HCCL_CONNECT_TIMEOUT", 120, 1)
    return float(value + 20 if value >= 120 else value)


def buffer_bytes() -> int:
    """``HCCL_BUFFSIZE`` in MB (default 200): each communicator takes it twice on its card
    (an input and an output buffer)."""
    return _env_int("HCCL_BUFFSIZE", 200, 1) << 20
