"""Top-level pyACL calls for tensor descriptors, data buffers and compile options
(``aclCreateTensorDesc`` and friends, ``aclSetCompileopt``).

Handles are ints (0 on failure, as pyACL). The data-buffer calls are a minimal version kept
here until helper "pyacl"'s module of ``host/acl`` (which owns them) is merged; they share
one table (``host/ops/desc.py``) with ``acl.op``.
"""

from __future__ import annotations

from npuemu.host.acl._wrap import ret_only, with_result
from npuemu.host.ops import desc as D
from npuemu.host.ops import diskcache
from npuemu.host.ops import types as T

ACL_UNKNOWN_RANK = T.ACL_UNKNOWN_RANK
_COMPILE_OPTS = ("ACL_PRECISION_MODE", "ACL_AICORE_NUM", "ACL_AUTO_TUNE_MODE",
                 "ACL_OP_SELECT_IMPL_MODE", "ACL_OPTYPELIST_FOR_IMPLMODE", "ACL_OP_DEBUG_LEVEL",
                 "ACL_DEBUG_DIR", "ACL_OP_COMPILER_CACHE_MODE", "ACL_OP_COMPILER_CACHE_DIR",
                 "ACL_OP_PERFORMANCE_MODE", "ACL_OP_JIT_COMPILE", "ACL_OP_DETERMINISTIC",
                 "ACL_CUSTOMIZE_DTYPES", "ACL_OP_PRECISION_MODE", "ACL_ALLOW_HF32",
                 "ACL_PRECISION_MODE_V2", "ACL_OP_DEBUG_OPTION")


def create_tensor_desc(dtype: int, dims: list, fmt: int) -> int:
    """``aclCreateTensorDesc`` -> handle (0 for bad dims; a non-list raises TypeError)."""
    desc = D.create_tensor_desc(dtype, dims, fmt)
    return desc.handle if desc is not None else 0


def destroy_tensor_desc(desc: int) -> None:
    """``aclDestroyTensorDesc``."""
    D.destroy_tensor_desc(desc)


def _get(fn, default):
    def get(desc: int):
        d = D.desc_of(desc)
        return default if d is None else fn(d)
    return get


get_tensor_desc_type = _get(lambda d: d.dtype, T.DT_UNDEFINED)
get_tensor_desc_format = _get(lambda d: d.format, T.ACL_FORMAT_UNDEFINED)
get_tensor_desc_size = _get(lambda d: d.size(), 0)
get_tensor_desc_element_count = _get(lambda d: d.element_count(), 0)
get_tensor_desc_num_dims = _get(
    lambda d: T.ACL_UNKNOWN_RANK if d.dims == (-2,) else len(d.dims), 0)
get_tensor_desc_name = _get(lambda d: d.name, "")


def get_tensor_desc_dim(desc: int, index: int) -> int:
    """``aclGetTensorDescDim`` (deprecated): -1 on error."""
    d = D.desc_of(desc)
    if d is None or d.dims == (-2,) or type(index) is not int or not 0 <= index < len(d.dims):
        return -1
    return d.dims[index]


@with_result(-1)
def get_tensor_desc_dim_v2(desc: int, index: int) -> int:
    """``aclGetTensorDescDimV2`` -> ``(dim, ret)``."""
    d = D.need_desc(desc)
    if d.dims == (-2,) or type(index) is not int or not 0 <= index < len(d.dims):
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"dim index {index!r}")
    return d.dims[index]


def get_tensor_desc_dim_range(desc: int, index: int, dim_range_num: int) -> tuple:
    """``aclGetTensorDescDimRange`` -> ``([lo, hi], ret)``; n > 4096 gives (None, 100000)."""
    if type(dim_range_num) is not int or dim_range_num > 4096:
        return None, T.ACL_ERROR_INVALID_PARAM
    return with_result(None)(lambda: D.dim_range(D.need_desc(desc), index, dim_range_num))()


def set_tensor_desc_name(desc: int, name: str | None) -> None:
    """``aclSetTensorDescName`` (void)."""
    d = D.desc_of(desc)
    if d is not None and isinstance(name, str):
        d.name = name


def _setter(attr: str, conv):
    @ret_only
    def set_(desc: int, value: object) -> None:
        d = D.need_desc(desc)
        setattr(d, attr, conv(value))
        d.changed()
    return set_


def _fmt(v: object) -> int:
    if type(v) is not int or not -(1 << 31) <= v < 1 << 31:  # a C enum
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"format {v!r}")
    return v


def _shape(v: object) -> tuple[int, ...]:
    try:
        return D._dims(v)
    except (TypeError, OverflowError) as err:  # a non-integer dim, or one outside int64
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, str(err)) from err


set_tensor_format = _setter("storage_format", _fmt)
set_tensor_storage_format = set_tensor_format
set_tensor_shape = _setter("storage_dims", _shape)
set_tensor_storage_shape = set_tensor_shape
set_tensor_origin_format = _setter("origin_format", _fmt)
set_tensor_origin_shape = _setter("origin_dims", _shape)
set_tensor_place_ment = _setter("memtype", _fmt)
set_tensor_dynamic_input = _setter("dynamic_input", str)


@ret_only
def set_tensor_shape_range(desc: int, ranges: list) -> None:
    """``aclSetTensorShapeRange``."""
    D.set_shape_range(D.need_desc(desc), ranges)


@ret_only
def set_tensor_value_range(desc: int, ranges: list) -> None:
    """``aclSetTensorValueRange``."""
    d = D.need_desc(desc)
    if not isinstance(ranges, list | tuple):
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, "value range must be a list of [lo, hi]")
    try:
        d.value_range = tuple((D._int64(lo), D._int64(hi)) for lo, hi in ranges)
    except (TypeError, ValueError, OverflowError) as err:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"bad value range {ranges!r}") from err
    d.changed()


@ret_only
def set_tensor_const(desc: int, ptr: int, size: int) -> None:
    """``aclSetTensorConst``: the host bytes become part of the op-map key."""
    D.set_const(D.need_desc(desc), ptr, size)


def trans_tensor_desc_format(desc: int, fmt: int) -> tuple[int, int]:
    """``aclTransTensorDescFormat``: "reserved, not supported" in CANN's documentation ->
    ``(0, ACL_ERROR_API_NOT_SUPPORT)``."""
    return 0, T.ACL_ERROR_API_NOT_SUPPORT


def set_compile_opt(opt: int, value: str) -> int:
    """``aclSetCompileopt`` (not in today's pyACL): options are process-wide and read at
    compile time. Only the cache options change behaviour here (``diskcache.py``);
    ``ACL_AUTO_TUNE_MODE`` is 200006; an unknown option 500000."""
    if type(opt) is not int or not 0 <= opt < len(_COMPILE_OPTS):
        return 500000
    if opt == 2:
        return 200006
    if not isinstance(value, str):
        return T.ACL_ERROR_INVALID_PARAM
    diskcache.OPTIONS[_COMPILE_OPTS[opt]] = value
    return 0


__all__ = [n for n in dir() if n.startswith(("create_", "destroy_", "get_", "set_", "update_",
                                             "trans_", "data_type_size", "ACL_"))]
