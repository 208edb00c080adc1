"""Sizes and dims at their limits (no device needed): tensor descriptors keep int64 dims and
never report a wrapped or negative size, range setters and index getters refuse what C could
not hold with 100000 instead of raising, data buffer spans are ``size_t``, a dataset's tensor
desc index is one of its buffers, model tensor sizes are exact."""

from __future__ import annotations

import pytest

from npuemu.host import acl
from npuemu.host.acl import mdl
from npuemu.host.models import modeldesc
from npuemu.host.ops import desc as D
from npuemu.shared.errors import AclError

F32, F16, ND = 0, 1, 2
INT64_MAX = 2**63 - 1
INVALID_PARAM = 100000


@pytest.mark.parametrize("dims", [[2**63], [-(2**63) - 1], [1, 2**64], [-3], [-2, 4],
                                  [1] * 129])
def test_dims_c_cannot_hold_give_no_descriptor(dims) -> None:
    assert acl.create_tensor_desc(F32, dims, ND) == 0


@pytest.mark.parametrize("dtype,fmt", [(2**40, ND), (F32, -(2**31) - 1), ("x", ND),
                                       (1.5, ND)])
def test_dtype_and_format_must_be_c_ints(dtype, fmt) -> None:
    assert acl.create_tensor_desc(dtype, [4], fmt) == 0


@pytest.mark.parametrize("dims,count,size", [
    ([INT64_MAX], INT64_MAX, 0),              # the count fits, the bytes do not
    ([2**32, 2**32], 0, 0),                   # the count overflows int64
    ([2**31, 2**31], 2**62, 0),               # 2**64 bytes of float32 do not fit
    ([2**30, 2**31], 2**61, 0),               # 2**63 bytes: one past int64
    ([2**30, 2**30], 2**60, 2**62),
    ([-1, 4], 0, 0), ([], 1, 4),
])
def test_element_count_and_size_never_wrap(dims, count, size) -> None:
    desc = acl.create_tensor_desc(F32, dims, ND)
    assert desc != 0
    try:
        assert acl.get_tensor_desc_element_count(desc) == count
        assert acl.get_tensor_desc_size(desc) == size
        assert 0 <= acl.get_tensor_desc_size(desc) <= INT64_MAX
    finally:
        acl.destroy_tensor_desc(desc)


def test_setters_and_getters_refuse_values_c_cannot_hold() -> None:
    desc = acl.create_tensor_desc(F16, [2, 3], ND)
    try:
        assert acl.set_tensor_shape(desc, [2**64]) == INVALID_PARAM
        assert acl.set_tensor_origin_shape(desc, [1, "x"]) == INVALID_PARAM
        assert acl.set_tensor_format(desc, 2**40) == INVALID_PARAM
        assert acl.set_tensor_shape_range(desc, [[0, 2**64]]) == INVALID_PARAM
        assert acl.set_tensor_value_range(desc, [["a", 1]]) == INVALID_PARAM
        assert acl.set_tensor_value_range(desc, 5) == INVALID_PARAM
        assert acl.set_tensor_value_range(desc, [[-(2**63), INT64_MAX]]) == 0
        assert acl.get_tensor_desc_dim(desc, "0") == -1
        assert acl.get_tensor_desc_dim_v2(desc, 2**70) == (-1, INVALID_PARAM)
        assert acl.get_tensor_desc_dim_range(desc, "0", 2) == (None, INVALID_PARAM)
        assert acl.set_tensor_const(desc, 0, -1) == INVALID_PARAM
        assert acl.get_tensor_desc_size(desc) == 12  # unchanged by the refusals
    finally:
        acl.destroy_tensor_desc(desc)


@pytest.mark.parametrize("ptr,size", [(-1, 1), (0, -1), (0, 2**64), (2**64, 0), ("x", 1),
                                      (True, 1)])
def test_data_buffer_spans_are_size_t(ptr, size) -> None:
    with pytest.raises(AclError) as info:
        D.create_data_buffer(ptr, size)
    assert info.value.code == INVALID_PARAM
    buf = D.create_data_buffer(0x1000, 16)
    try:
        with pytest.raises(AclError):
            D.update_data_buffer(buf.handle, ptr, size)
        assert (buf.addr, buf.size) == (0x1000, 16)
    finally:
        D.destroy_data_buffer(buf.handle)


def test_dataset_tensor_desc_index_is_one_of_its_buffers() -> None:
    ds, tdesc = mdl.create_dataset(), acl.create_tensor_desc(F32, [4], ND)
    buf = acl.create_data_buffer(0x1000, 16)
    try:
        assert mdl.set_dataset_tensor_desc(ds, tdesc, 0) == (0, INVALID_PARAM)  # no buffer
        assert mdl.add_dataset_buffer(ds, buf) == (ds, 0)
        for index in (-1, 1, 2**64, "0", 0.0):
            assert mdl.set_dataset_tensor_desc(ds, tdesc, index) == (0, INVALID_PARAM)
        assert mdl.set_dataset_tensor_desc(ds, tdesc, 0) == (ds, 0)
        assert mdl.get_dataset_tensor_desc(ds, 0) == tdesc
    finally:
        mdl.destroy_dataset(ds)
        acl.destroy_data_buffer(buf)
        acl.destroy_tensor_desc(tdesc)


def test_model_tensor_sizes_are_exact() -> None:
    big = modeldesc.IOTensor("x", 0, 0, [[2**31 - 1] * 4])
    assert big.size(0) == (2**31 - 1) ** 4 * 4  # an int64 product would have wrapped
    assert modeldesc.IOTensor("y", 1, 2, [[3, 0, 5]]).size(0) == 0
