"""C bodies of ``acl_mdl.h``'s AIPP and dynamic image size calls: ``aclmdlCreateAIPP`` and the
``aclmdlSetAIPP*`` setters (host-side, never block), ``aclmdlSetInputAIPP`` /
``aclmdlSetAIPPByInputIndex`` (block on the record's copy to the device),
``aclmdlGetAippType``, ``aclmdlGetFirstAippInfo``, ``aclmdlGetAippDataSize``,
``aclmdlGetDynamicHW``, ``aclmdlSetDynamicHWSize``.

Each mirrors the C call of its name through ``acl.mdl`` (``host/acl/mdl.py`` and
``mdl_aipp.py``): the same checks and codes as a Python program. AIPP set, dataset and
description pointers are the face's int handles.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import mdl
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export

for _name, _fn in (
        ("aclmdlDestroyAIPP", mdl.destroy_aipp),
        ("aclmdlSetAIPPInputFormat", mdl.set_aipp_input_format),
        ("aclmdlSetAIPPCscParams", mdl.set_aipp_csc_params),
        ("aclmdlSetAIPPRbuvSwapSwitch", mdl.set_aipp_rbuv_swap_switch),
        ("aclmdlSetAIPPAxSwapSwitch", mdl.set_aipp_ax_swap_switch),
        ("aclmdlSetAIPPSrcImageSize", mdl.set_aipp_src_image_size),
        ("aclmdlSetAIPPScfParams", mdl.set_aipp_scf_params),
        ("aclmdlSetAIPPCropParams", mdl.set_aipp_crop_params),
        ("aclmdlSetAIPPPaddingParams", mdl.set_aipp_padding_params),
        ("aclmdlSetAIPPDtcPixelMean", mdl.set_aipp_dtc_pixel_mean),
        ("aclmdlSetAIPPDtcPixelMin", mdl.set_aipp_dtc_pixel_min),
        ("aclmdlSetAIPPPixelVarReci", mdl.set_aipp_pixel_var_reci)):
    X.forward(_name, _fn)


@export
def aclmdlCreateAIPP(batch: int) -> Any:
    return X.ffi.cast("aclmdlAIPP *", mdl.create_aipp(batch))


@export
def aclmdlGetAippDataSize(batch: int, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclmdlGetAippDataSize", "size is NULL")
    size, ret = mdl.get_aipp_data_size(batch)
    if ret == 0:
        out[0] = size
    return ret


@export
def aclmdlSetInputAIPP(model_id: int, ds: Any, index: int, aipp: Any) -> int:
    return mdl.set_input_aipp(model_id, X.addr(ds), index, X.addr(aipp))


@export
def aclmdlSetAIPPByInputIndex(model_id: int, ds: Any, index: int, aipp: Any) -> int:
    return mdl.set_aipp_by_input_index(model_id, X.addr(ds), index, X.addr(aipp))


@export
def aclmdlGetAippType(model_id: int, index: int, kind: Any, attached: Any) -> int:
    if kind == X.ffi.NULL or attached == X.ffi.NULL:
        return X.invalid("aclmdlGetAippType", "type or dynamicAttachedDataIndex is NULL")
    found, at, ret = mdl.get_aipp_type(model_id, index)
    if ret == 0:
        kind[0], attached[0] = found, at
    return ret


def _io_dims(out: Any, dims: list[int]) -> None:
    out.dimCount = len(dims)
    for k, d in enumerate(dims[:128]):
        out.dims[k] = d


@export
def aclmdlGetFirstAippInfo(model_id: int, index: int, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclmdlGetFirstAippInfo", "aippInfo is NULL")
    info, ret = mdl.get_first_aipp_info(model_id, index)
    if ret != 0:
        return ret
    for key, value in info.items():
        if key != "outDims":
            setattr(out, key, value)
    for k, dims in enumerate(info["outDims"][:128]):
        _io_dims(out.outDims[k].srcDims, dims["srcDims"])
        _io_dims(out.outDims[k].aippOutdims, dims["aippOutdims"])
        out.outDims[k].srcSize = dims["srcSize"]
        out.outDims[k].aippOutSize = dims["aippOutSize"]
    out.aippExtend = X.ffi.NULL
    return 0


@export
def aclmdlGetDynamicHW(desc: Any, index: int, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclmdlGetDynamicHW", "hw is NULL")
    found, ret = mdl.get_dynamic_hw(X.addr(desc), index)
    if ret == 0:
        gears = found["hw"][:128]
        out.hwCount = len(gears)
        for k, (h, w) in enumerate(gears):
            out.hw[k][0], out.hw[k][1] = h, w
    return ret


@export
def aclmdlSetDynamicHWSize(model_id: int, ds: Any, index: int, height: int, width: int) -> int:
    return mdl.set_dynamic_hw_size(model_id, X.addr(ds), index, height, width)
