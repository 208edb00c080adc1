"""Data types, formats and op error codes of the single-operator API (``acl_base_rt.h``,
``acl_op.h``), with the numpy dtype each data type computes in.

bfloat16 (``ACL_BF16``) has no numpy type: its name in a signature is ``"bfloat16"``, the
kernels view it as its uint16 bits (``storage``) and compute through float32, rounding to
nearest even on store (``npuemu.shared.bf16``). Host arrays of it are ``ml_dtypes.bfloat16``
(``user_dtype``) when that package is installed, else the HCCL face's tagged uint16
(``npuemu.host.hccl.types.BFLOAT16``); ``acl_dtype`` maps either to ``ACL_BF16``. npuemu
never imports ml_dtypes itself (its import costs over a second of CPU): outputs are
``ml_dtypes.bfloat16`` arrays once the program has imported it, tagged uint16 before.

The values are CANN's (``aclDataType``, ``aclFormat`` and the op API's ``ACL_ERROR_*`` codes
of ``acl_base.h`` / ``acl_op.h``). The ACL error codes of the op API are read from
``shared/errors.py`` when it defines them and fall back to CANN's numbers otherwise, so this
module works before and after the shared table grows.
"""

from __future__ import annotations

import sys

import numpy as np

from npuemu.shared import errors

# aclDataType -> (size in bytes as aclDataTypeSize returns it, numpy dtype name or None)
DT_UNDEFINED = -1
DATA_TYPES: dict[int, tuple[str, int, str | None]] = {
    -1: ("ACL_DT_UNDEFINED", 0, None),
    0: ("ACL_FLOAT", 4, "float32"),
    1: ("ACL_FLOAT16", 2, "float16"),
    2: ("ACL_INT8", 1, "int8"),
    3: ("ACL_INT32", 4, "int32"),
    4: ("ACL_UINT8", 1, "uint8"),
    6: ("ACL_INT16", 2, "int16"),
    7: ("ACL_UINT16", 2, "uint16"),
    8: ("ACL_UINT32", 4, "uint32"),
    9: ("ACL_INT64", 8, "int64"),
    10: ("ACL_UINT64", 8, "uint64"),
    11: ("ACL_DOUBLE", 8, "float64"),
    12: ("ACL_BOOL", 1, "bool"),
    13: ("ACL_STRING", 0, None),
    16: ("ACL_COMPLEX64", 8, "complex64"),
    17: ("ACL_COMPLEX128", 16, "complex128"),
    27: ("ACL_BF16", 2, "bfloat16"),
    29: ("ACL_INT4", 1, None),
    30: ("ACL_UINT1", 1, None),
    33: ("ACL_COMPLEX32", 4, None),
    34: ("ACL_HIFLOAT8", 1, None),
    35: ("ACL_FLOAT8_E5M2", 1, None),
    36: ("ACL_FLOAT8_E4M3FN", 1, None),
    37: ("ACL_FLOAT8_E8M0", 1, None),
}
for _v in (38, 39, 40, 41):  # FLOAT6/FLOAT4: CANN's aclDataTypeSize gives 8 (its default branch)
    DATA_TYPES[_v] = (f"ACL_DT_{_v}", 8, None)
BF16 = "bfloat16"
NUMPY_TO_ACL = {np.dtype(np_name): v for v, (_n, _s, np_name) in DATA_TYPES.items()
                if np_name is not None and np_name != BF16}
ACL_FLOAT, ACL_FLOAT16, ACL_INT8, ACL_INT32, ACL_UINT8 = 0, 1, 2, 3, 4
ACL_INT16, ACL_INT64, ACL_DOUBLE, ACL_BOOL, ACL_BF16 = 6, 9, 11, 12, 27

# aclFormat
FORMATS = {-1: "UNDEFINED", 0: "NCHW", 1: "NHWC", 2: "ND", 3: "NC1HWC0", 4: "FRACTAL_Z",
           12: "NC1HWC0_C04", 16: "HWCN", 27: "NDHWC", 29: "FRACTAL_NZ", 30: "NCDHW",
           32: "NDC1HWC0", 33: "FRACTAL_Z_3D", 35: "NC", 47: "NCL", 50: "FRACTAL_NZ_C0_16",
           51: "FRACTAL_NZ_C0_32", 52: "FRACTAL_NZ_C0_2", 53: "FRACTAL_NZ_C0_4",
           54: "FRACTAL_NZ_C0_8"}
FORMAT_BY_NAME = {name: value for value, name in FORMATS.items()}
ACL_FORMAT_UNDEFINED, ACL_FORMAT_NCHW, ACL_FORMAT_NHWC, ACL_FORMAT_ND = -1, 0, 1, 2
PLAIN_FORMATS = frozenset({0, 1, 2, 35, 47})
"""Formats the op library computes in: NCHW, NHWC, ND, NC, NCL (no fractal layouts)."""
ACL_UNKNOWN_RANK = 0xFFFFFFFFFFFFFFFE
ACL_MEMTYPE_DEVICE, ACL_MEMTYPE_HOST = 0, 1

# aclopEngineType / aclopCompileType
ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR = 0, 1, 2
ACL_COMPILE_SYS, ACL_COMPILE_UNREGISTERED = 0, 1


def _code(name: str, value: int) -> int:
    return int(getattr(errors, name, value))


ACL_ERROR_INVALID_PARAM = errors.ACL_ERROR_INVALID_PARAM
ACL_ERROR_REPEAT_INITIALIZE = errors.ACL_ERROR_REPEAT_INITIALIZE
ACL_ERROR_API_NOT_SUPPORT = errors.ACL_ERROR_API_NOT_SUPPORT
ACL_ERROR_READ_MODEL_FAILURE = _code("ACL_ERROR_READ_MODEL_FAILURE", 100014)
ACL_ERROR_OP_TYPE_NOT_MATCH = _code("ACL_ERROR_OP_TYPE_NOT_MATCH", 100020)
ACL_ERROR_OP_INPUT_NOT_MATCH = _code("ACL_ERROR_OP_INPUT_NOT_MATCH", 100021)
ACL_ERROR_OP_OUTPUT_NOT_MATCH = _code("ACL_ERROR_OP_OUTPUT_NOT_MATCH", 100022)
ACL_ERROR_OP_ATTR_NOT_MATCH = _code("ACL_ERROR_OP_ATTR_NOT_MATCH", 100023)
ACL_ERROR_OP_NOT_FOUND = _code("ACL_ERROR_OP_NOT_FOUND", 100024)
ACL_ERROR_OP_LOAD_FAILED = _code("ACL_ERROR_OP_LOAD_FAILED", 100025)
ACL_ERROR_UNSUPPORTED_DATA_TYPE = _code("ACL_ERROR_UNSUPPORTED_DATA_TYPE", 100026)
ACL_ERROR_FORMAT_NOT_MATCH = _code("ACL_ERROR_FORMAT_NOT_MATCH", 100027)
ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG = _code("ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG",
                                                 148048)


def fail(code: int, detail: str) -> errors.AclError:
    """The exception for ``code`` (raise it)."""
    return errors.error_for(code, detail)


def numpy_dtype(acl_dtype: int) -> str:
    """The numpy dtype name ``acl_dtype`` computes in; 100026 when numpy has none."""
    entry = DATA_TYPES.get(acl_dtype)
    if entry is None or entry[2] is None:
        raise fail(ACL_ERROR_UNSUPPORTED_DATA_TYPE,
                   f"data type {acl_dtype} ({entry[0] if entry else 'unknown'}) is not "
                   "supported by the op library")
    return entry[2]


def storage(dtype: str) -> str:
    """The numpy dtype name a kernel views a tensor of signature dtype ``dtype`` as: the
    uint16 bits for bfloat16, else ``dtype`` itself."""
    return "uint16" if dtype == BF16 else dtype


def itemsize(dtype: str) -> int:
    """Bytes per element of signature dtype ``dtype``."""
    return np.dtype(storage(dtype)).itemsize


def is_bf16(np_dtype: object) -> bool:
    """``np_dtype`` holds bfloat16: the name ``"bfloat16"``, ``ml_dtypes.bfloat16`` or the
    tagged uint16 of ``npuemu.host.hccl.types.BFLOAT16``."""
    dt = np_dtype if isinstance(np_dtype, np.dtype) else None
    if dt is None:
        if np_dtype == BF16:
            return True
        if getattr(np_dtype, "__name__", None) != BF16:
            return False
        dt = np.dtype(np_dtype)  # type: ignore[call-overload]
    if dt.name == BF16 and dt.itemsize == 2:
        return True
    meta = dt.metadata
    return dt == np.uint16 and meta is not None and meta.get("hccl") == BF16


def user_dtype(dtype: str) -> np.dtype:
    """The host numpy dtype of arrays of signature dtype ``dtype`` (what ``run_op`` returns):
    for bfloat16 ``ml_dtypes.bfloat16`` once the program has imported ``ml_dtypes``, else the
    tagged uint16 (``npuemu.host.hccl.types.BFLOAT16``)."""
    if dtype != BF16:
        return np.dtype(dtype)
    ml_dtypes = sys.modules.get("ml_dtypes")
    if ml_dtypes is None:
        from npuemu.host.hccl.types import BFLOAT16
        return BFLOAT16
    return np.dtype(ml_dtypes.bfloat16)


def acl_dtype(np_dtype: object) -> int:
    """The aclDataType of a numpy dtype (100026 when there is none)."""
    if is_bf16(np_dtype):
        return ACL_BF16
    found = NUMPY_TO_ACL.get(np.dtype(np_dtype))  # type: ignore[call-overload]
    if found is None:
        raise fail(ACL_ERROR_UNSUPPORTED_DATA_TYPE, f"numpy dtype {np_dtype} has no aclDataType")
    return found


def data_type_size(dtype: int) -> int:
    """Mirrors ``aclDataTypeSize`` (unlisted values take the default branch: 8)."""
    entry = DATA_TYPES.get(dtype)
    return entry[1] if entry else 8
