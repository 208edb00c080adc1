"""C bodies of the tensor-descriptor calls of ``acl_base.h`` (``aclCreateTensorDesc`` and
its getters and setters), through the top-level ``acl`` module's tensor calls: the same
descriptors (int handles, cast to ``aclTensorDesc *``) that ``acl.op`` and ``acl.mdl`` read.
A NULL or unknown descriptor behaves as in the Python face: getters return 0 / -1 /
undefined, setters return their code. Nothing here blocks.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import tensor as acl_tensor
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export


def _dims(dims: Any, n: int) -> list[int] | None:
    if n <= 0:
        return []
    return None if dims == X.ffi.NULL else list(X.ffi.unpack(dims, n))


# tensor descriptors ---------------------------------------------------------------------------
@export
def aclCreateTensorDesc(dtype: int, num_dims: int, dims: Any, fmt: int) -> Any:
    """Mirrors ``aclCreateTensorDesc`` (NULL for bad dims; ``(ACL_DT_UNDEFINED, 0, NULL,
    ACL_FORMAT_UNDEFINED)`` makes the descriptor of an absent optional input)."""
    shape = _dims(dims, num_dims)
    if shape is None:
        X.invalid("aclCreateTensorDesc", "dims is NULL")
        return X.ffi.NULL
    return X.ffi.cast("aclTensorDesc *", acl_tensor.create_tensor_desc(dtype, shape, fmt))


@export
def aclDestroyTensorDesc(desc: Any) -> None:
    acl_tensor.destroy_tensor_desc(X.addr(desc))


X.forward("aclGetTensorDescType", acl_tensor.get_tensor_desc_type)
X.forward("aclGetTensorDescFormat", acl_tensor.get_tensor_desc_format)
X.forward("aclGetTensorDescSize", acl_tensor.get_tensor_desc_size)
X.forward("aclGetTensorDescElementCount", acl_tensor.get_tensor_desc_element_count)
X.forward("aclGetTensorDescNumDims", acl_tensor.get_tensor_desc_num_dims)
X.forward("aclGetTensorDescDim", acl_tensor.get_tensor_desc_dim)


@export
def aclGetTensorDescDimV2(desc: Any, index: int, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclGetTensorDescDimV2", "dimSize is NULL")
    dim, ret = acl_tensor.get_tensor_desc_dim_v2(X.addr(desc), index)
    if ret == 0:
        out[0] = dim
    return ret


@export
def aclGetTensorDescDimRange(desc: Any, index: int, num: int, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclGetTensorDescDimRange", "dimRange is NULL")
    found, ret = acl_tensor.get_tensor_desc_dim_range(X.addr(desc), index, num)
    if ret == 0:
        for i, value in enumerate(list(found)[:num]):
            out[i] = value
    return ret


@export
def aclSetTensorDescName(desc: Any, name: Any) -> None:
    acl_tensor.set_tensor_desc_name(X.addr(desc), X.text(name))


@export
def aclGetTensorDescName(desc: Any) -> Any:
    return X.kept_string("aclGetTensorDescName", acl_tensor.get_tensor_desc_name(X.addr(desc)))


@export
def aclTransTensorDescFormat(desc: Any, fmt: int, out: Any) -> int:
    _, ret = acl_tensor.trans_tensor_desc_format(X.addr(desc), fmt)
    return ret


def _format_setter(face: Any) -> Any:
    return lambda desc, fmt: face(X.addr(desc), fmt)


def _shape_setter(func: str, face: Any) -> Any:
    def set_shape(desc: Any, num_dims: int, dims: Any) -> int:
        shape = _dims(dims, num_dims)
        if shape is None:
            return X.invalid(func, "dims is NULL")
        return face(X.addr(desc), shape)

    return set_shape


for _name, _face in (("aclSetTensorFormat", acl_tensor.set_tensor_format),
                     ("aclSetTensorStorageFormat", acl_tensor.set_tensor_storage_format),
                     ("aclSetTensorOriginFormat", acl_tensor.set_tensor_origin_format),
                     ("aclSetTensorPlaceMent", acl_tensor.set_tensor_place_ment)):
    _fn = _format_setter(_face)
    _fn.__name__ = _name
    export(_fn)
for _name, _face in (("aclSetTensorShape", acl_tensor.set_tensor_shape),
                     ("aclSetTensorStorageShape", acl_tensor.set_tensor_storage_shape),
                     ("aclSetTensorOriginShape", acl_tensor.set_tensor_origin_shape)):
    _fn = _shape_setter(_name, _face)
    _fn.__name__ = _name
    export(_fn)


def _ranges(p: Any, n: int) -> list[list[int]]:
    return [[p[i][0], p[i][1]] for i in range(n)]


@export
def aclSetTensorShapeRange(desc: Any, count: int, ranges: Any) -> int:
    if count and ranges == X.ffi.NULL:
        return X.invalid("aclSetTensorShapeRange", "dimsRange is NULL")
    return acl_tensor.set_tensor_shape_range(X.addr(desc), _ranges(ranges, count))


@export
def aclSetTensorValueRange(desc: Any, count: int, ranges: Any) -> int:
    if count and ranges == X.ffi.NULL:
        return X.invalid("aclSetTensorValueRange", "valueRange is NULL")
    return acl_tensor.set_tensor_value_range(X.addr(desc), _ranges(ranges, count))


@export
def aclSetTensorDynamicInput(desc: Any, name: Any) -> int:
    if name == X.ffi.NULL:
        return X.invalid("aclSetTensorDynamicInput", "dynamicInputName is NULL")
    return acl_tensor.set_tensor_dynamic_input(X.addr(desc), X.text(name))


@export
def aclSetTensorConst(desc: Any, data: Any, length: int) -> int:
    return acl_tensor.set_tensor_const(X.addr(desc), X.addr(data), length)


