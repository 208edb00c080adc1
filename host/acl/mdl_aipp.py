"""``acl.mdl``'s AIPP calls (``aclmdlCreateAIPP``, ``aclmdlSetAIPP*``, ``aclmdlSetInputAIPP``,
``aclmdlSetAIPPByInputIndex``, ``aclmdlGetAippType``, ``aclmdlGetFirstAippInfo``,
``aclmdlGetAippDataSize``), bound into ``acl.mdl`` by ``host/acl/mdl.py``.

A dynamic AIPP set (``create_aipp(batch)``) collects the parameters host-side; every setter
checks its values (100000 for a value out of the documented range or a ``batch_index`` not
below the set's batch count) and blocks on nothing. ``set_input_aipp`` checks the whole set
against the model (the source size set, the format one npuemu computes, every image's
crop / scaling / padding giving the model input's H x W; 145000 otherwise) and copies the
``kAippDynamicPara`` record (``shared/aipp.py``) into the dataset's buffer of the model's
``ascend_dynamic_aipp_data`` input (a blocking host-to-device copy): the model's first task
reads it from there at every execute. A set may hold fewer images than the model's (largest)
batch; a gear that runs more images than the set holds fails its task (AI Core's code).
``get_first_aipp_info`` answers for static AIPP inputs (100038 for a dynamic one, 145015 for
an input without AIPP).

Calls return ``ret`` or a tuple ending in ``ret``; handles are ints. Threading: the table of
AIPP sets is guarded by ``_lock``; a set is not locked while filled (CANN's sets are not
thread-safe either). No thread is started here.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from npuemu.host.acl._wrap import ret_only, with_result
from npuemu.host.core import memory
from npuemu.host.models import aipp as model_aipp
from npuemu.host.models import runtime as models
from npuemu.host.models.codes import ACL_ERROR_GE_PARAM_INVALID, ModelError
from npuemu.host.models.graph import ACL_DTYPES
from npuemu.host.ops import desc as D
from npuemu.shared import aipp as A
from npuemu.shared import errors

__all__ = [
    "ACL_DATA_WITHOUT_AIPP",
    "ACL_DATA_WITH_DYNAMIC_AIPP",
    "ACL_DATA_WITH_STATIC_AIPP",
    "ACL_DYNAMIC_AIPP_NODE",
    "create_aipp",
    "destroy_aipp",
    "get_aipp_data_size",
    "get_aipp_type",
    "get_first_aipp_info",
    "set_aipp_ax_swap_switch",
    "set_aipp_by_input_index",
    "set_aipp_crop_params",
    "set_aipp_csc_params",
    "set_aipp_dtc_pixel_mean",
    "set_aipp_dtc_pixel_min",
    "set_aipp_input_format",
    "set_aipp_padding_params",
    "set_aipp_pixel_var_reci",
    "set_aipp_rbuv_swap_switch",
    "set_aipp_scf_params",
    "set_aipp_src_image_size",
    "set_input_aipp",
]

# aclmdlInputAippType
ACL_DATA_WITHOUT_AIPP, ACL_DATA_WITH_STATIC_AIPP, ACL_DATA_WITH_DYNAMIC_AIPP = 0, 1, 2
ACL_DYNAMIC_AIPP_NODE = 3
ACL_INVALID_NODE_INDEX = 0xFFFFFFFF
_H2D = 1
_F16_MAX = 65504.0

_lock = threading.Lock()
_sets: dict[int, A.Params] = {}
_next = [0x6A000000]
_hooks: dict[str, Callable[[int, int], int]] = {}
"""``dataset_buffer``: ``acl.mdl.get_dataset_buffer`` (:func:`bind_datasets`)."""


def bind_datasets(dataset_buffer: Callable[[int, int], int]) -> None:
    """Called by ``host/acl/mdl.py``, whose table the datasets are, when it binds these."""
    _hooks["dataset_buffer"] = dataset_buffer


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def _int(value: object, lo: int, hi: int, what: str) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise _param(f"{what} {value!r} outside [{lo}, {hi}]")
    return value


def _switch(value: object, what: str) -> bool:
    return bool(_int(value, 0, 1, what))


def _set(handle: object) -> A.Params:
    found = _sets.get(handle) if type(handle) is int else None
    if found is None:
        raise _param(f"{handle!r} is not a live AIPP set (acl.mdl.create_aipp)")
    return found


def _batch(handle: object, index: object) -> A.Batch:
    p = _set(handle)
    k = _int(index, 0, len(p.batches) - 1, "batch_index")
    return p.batches[k]


def create_aipp(batch_size: int) -> int:
    """``aclmdlCreateAIPP`` -> handle (0 when ``batch_size`` is not 1..127)."""
    if type(batch_size) is not int or not 1 <= batch_size <= A.MAX_BATCH:
        return 0
    p = A.Params(fmt=0, batches=[A.Batch() for _ in range(batch_size)])
    with _lock:
        _next[0] += 1
        _sets[_next[0]] = p
        return _next[0]


@ret_only
def destroy_aipp(handle: int) -> None:
    """``aclmdlDestroyAIPP``."""
    _set(handle)
    with _lock:
        del _sets[handle]


@with_result(0)
def get_aipp_data_size(batch_size: int) -> int:
    """``aclmdlGetAippDataSize`` -> (bytes of the record for ``batch_size`` images, ret)."""
    return A.record_size(_int(batch_size, 1, A.MAX_BATCH, "batch_size"))


@ret_only
def set_aipp_src_image_size(handle: int, width: int, height: int) -> None:
    """``aclmdlSetAIPPSrcImageSize``: width 2..4096, height 1..4096 (required)."""
    p = _set(handle)
    p.src_w = _int(width, 2, model_aipp.MAX_SIDE, "srcImageSizeW")
    p.src_h = _int(height, 1, model_aipp.MAX_SIDE, "srcImageSizeH")


@ret_only
def set_aipp_input_format(handle: int, input_format: int) -> None:
    """``aclmdlSetAIPPInputFormat``: an ``aclAippInputFormat`` npuemu computes."""
    p = _set(handle)
    if input_format not in A.COMPUTED or type(input_format) is not int:
        raise _param(f"input format {input_format!r} (npuemu computes 1..4: YUV420SP_U8, "
                     "XRGB8888_U8, RGB888_U8, YUV400_U8)")
    p.fmt = input_format


@ret_only
def set_aipp_csc_params(handle: int, csc_switch: int, *values: int) -> None:
    """``aclmdlSetAIPPCscParams(set, switch, r0c0..r2c2, output_bias_0..2,
    input_bias_0..2)``: matrix int16, biases 0..255."""
    p = _set(handle)
    if len(values) != 15:
        raise _param(f"set_aipp_csc_params takes 15 values after the switch, got "
                     f"{len(values)}")
    csc = _switch(csc_switch, "cscSwitch")
    matrix = [_int(v, -32768, 32767, "CSC matrix value") for v in values[:9]]
    biases = [_int(v, 0, 255, "CSC bias") for v in values[9:]]
    p.csc, p.matrix, p.out_bias, p.in_bias = csc, matrix, biases[:3], biases[3:]


@ret_only
def set_aipp_rbuv_swap_switch(handle: int, value: int) -> None:
    """``aclmdlSetAIPPRbuvSwapSwitch`` (0 or 1)."""
    _set(handle).rbuv_swap = _switch(value, "rbuvSwapSwitch")


@ret_only
def set_aipp_ax_swap_switch(handle: int, value: int) -> None:
    """``aclmdlSetAIPPAxSwapSwitch`` (0 or 1)."""
    _set(handle).ax_swap = _switch(value, "axSwapSwitch")


@ret_only
def set_aipp_scf_params(handle: int, scf_switch: int, in_w: int, in_h: int, out_w: int,
                        out_h: int, batch_index: int) -> None:
    """``aclmdlSetAIPPScfParams``: scaling of one image (sizes 1..4096; the input size is
    the crop's, checked when the set is applied)."""
    b = _batch(handle, batch_index)
    b.resize = _switch(scf_switch, "scfSwitch")
    for v in (in_w, in_h):
        _int(v, 0, model_aipp.MAX_SIDE, "scfInputSize")
    b.resize_w = _int(out_w, 0, model_aipp.MAX_SIDE, "scfOutputSizeW")
    b.resize_h = _int(out_h, 0, model_aipp.MAX_SIDE, "scfOutputSizeH")


@ret_only
def set_aipp_crop_params(handle: int, crop_switch: int, start_w: int, start_h: int,
                         width: int, height: int, batch_index: int) -> None:
    """``aclmdlSetAIPPCropParams``: the crop of one image."""
    b = _batch(handle, batch_index)
    b.crop = _switch(crop_switch, "cropSwitch")
    b.crop_x = _int(start_w, 0, model_aipp.MAX_SIDE - 1, "cropStartPosW")
    b.crop_y = _int(start_h, 0, model_aipp.MAX_SIDE - 1, "cropStartPosH")
    b.crop_w = _int(width, 0, model_aipp.MAX_SIDE, "cropSizeW")
    b.crop_h = _int(height, 0, model_aipp.MAX_SIDE, "cropSizeH")


@ret_only
def set_aipp_padding_params(handle: int, padding_switch: int, top: int, bottom: int,
                            left: int, right: int, batch_index: int) -> None:
    """``aclmdlSetAIPPPaddingParams``: padding of one image (sizes 0..32)."""
    b = _batch(handle, batch_index)
    b.padding = _switch(padding_switch, "paddingSwitch")
    b.pad_top, b.pad_bottom, b.pad_left, b.pad_right = (
        _int(v, 0, 32, "padding size") for v in (top, bottom, left, right))


def _four(values: tuple, lo: float, hi: float, what: str) -> tuple[list[float], object]:
    """Four channel values then a batch index -> (values, index)."""
    if len(values) != 5:
        raise _param(f"{what} takes four channel values and a batch index, got {values!r}")
    *chans, index = values
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and lo <= v <= hi
               for v in chans):
        raise _param(f"{what} {chans!r}: four values in [{lo}, {hi}]")
    return [float(v) for v in chans], index


@ret_only
def set_aipp_dtc_pixel_mean(handle: int, *values: int) -> None:
    """``aclmdlSetAIPPDtcPixelMean(set, mean0..3, batch_index)``: integers 0..255."""
    mean, index = _four(values, 0, 255, "dtcPixelMean")
    if not all(v.is_integer() for v in mean):
        raise _param(f"dtcPixelMean {mean}: integers")
    _batch(handle, index).mean = [int(v) for v in mean]


@ret_only
def set_aipp_dtc_pixel_min(handle: int, *values: float) -> None:
    """``aclmdlSetAIPPDtcPixelMin(set, min0..3, batch_index)``: 0..255."""
    low, index = _four(values, 0, 255, "dtcPixelMin")
    _batch(handle, index).min = low


@ret_only
def set_aipp_pixel_var_reci(handle: int, *values: float) -> None:
    """``aclmdlSetAIPPPixelVarReci(set, var0..3, batch_index)``: within float16."""
    var, index = _four(values, -_F16_MAX, _F16_MAX, "dtcPixelVarReci")
    _batch(handle, index).var_reci = var


# applying a set to a model -----------------------------------------------------------------
def _entries(model: models.Model) -> list[dict]:
    return [e for e in model.om.model_def.get("aipp") or [] if isinstance(e, dict)]


def _input_index(model: models.Model, name: str) -> int:
    return next(k for k, t in enumerate(model.desc.inputs) if t.name == name)


def _dynamic_entry(model: models.Model, index: object, key: str) -> dict:
    """The dynamic AIPP entry whose ``key`` input (``params_input`` or ``input``) is at
    ``index``; 145000 if none."""
    for e in _entries(model):
        if e["mode"] == "dynamic" and _input_index(model, e[key]) == index:
            return e
    raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"input {index!r} of model "
                     f"{model.model_id} is not a dynamic AIPP "
                     f"{'parameter input' if key == 'params_input' else 'image input'}")


@ret_only
def set_input_aipp(model_id: int, dataset: int, index: int, handle: int) -> None:
    """``aclmdlSetInputAIPP``: ``index`` is that of ``ascend_dynamic_aipp_data`` (blocks:
    the record's copy to the dataset's buffer)."""
    model = models.get(model_id)
    _apply(model, _dynamic_entry(model, index, "params_input"), dataset, index, _set(handle))


@ret_only
def set_aipp_by_input_index(model_id: int, dataset: int, index: int, handle: int) -> None:
    """``aclmdlSetAIPPByInputIndex``: ``index`` is that of the image input with dynamic
    AIPP (``get_aipp_type``'s attached index names its parameter input)."""
    model = models.get(model_id)
    entry = _dynamic_entry(model, index, "input")
    _apply(model, entry, dataset, _input_index(model, entry["params_input"]), _set(handle))


def _apply(model: models.Model, entry: dict, dataset: int, index: int, p: A.Params) -> None:
    n, c, h, w = entry["model_dims"]
    if not p.src_w or not p.fmt:
        raise _param("the AIPP set has no source size or input format "
                     "(set_aipp_src_image_size, set_aipp_input_format)")
    if len(p.batches) > n:  # with batch gears: the gear run must not take more images
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"the AIPP set is for {len(p.batches)} "
                         f"images, the model input takes at most {n}")
    for b in p.batches:
        model_aipp.check_geometry(p, b, c, h, w)
    raw = next(t for t in model.desc.inputs if t.name == entry["input"])
    need = n * A.image_size(p.fmt, p.src_w, p.src_h)
    if need > raw.size(len(raw.dims) - 1):
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"{n} images of {p.src_w}x{p.src_h} need "
                         f"{need} bytes, max_src_image_size is {raw.size(0)}")
    buf = D.buffer_of(_hooks["dataset_buffer"](dataset, index))
    record = np.frombuffer(A.pack(p), np.uint8)
    if buf is None or buf.size < record.size:
        raise _param(f"dataset {dataset!r} has no buffer of {record.size} bytes at {index}")
    memory.memcpy(buf.addr, buf.size, record.ctypes.data, record.size, _H2D)


@with_result(ACL_DATA_WITHOUT_AIPP, ACL_INVALID_NODE_INDEX)
def get_aipp_type(model_id: int, index: int) -> tuple[int, int]:
    """``aclmdlGetAippType`` -> (aclmdlInputAippType, attached index, ret)."""
    model = models.get(model_id)
    if type(index) is not int or not 0 <= index < len(model.desc.inputs):
        raise _param(f"input index {index!r} of a model of {len(model.desc.inputs)} inputs")
    name = model.desc.inputs[index].name
    for e in _entries(model):
        if e["input"] == name and e["mode"] == "static":
            return ACL_DATA_WITH_STATIC_AIPP, ACL_INVALID_NODE_INDEX
        if e["input"] == name:
            return ACL_DATA_WITH_DYNAMIC_AIPP, _input_index(model, e["params_input"])
        if e.get("params_input") == name:
            return ACL_DYNAMIC_AIPP_NODE, ACL_INVALID_NODE_INDEX
    return ACL_DATA_WITHOUT_AIPP, ACL_INVALID_NODE_INDEX


@with_result({})
def get_first_aipp_info(model_id: int, index: int) -> dict[str, Any]:
    """``aclmdlGetFirstAippInfo`` -> (the ``aclAippInfo`` of a static AIPP input as a dict
    of its field names, ret)."""
    model = models.get(model_id)
    if type(index) is not int or not 0 <= index < len(model.desc.inputs):
        raise _param(f"input index {index!r} of a model of {len(model.desc.inputs)} inputs")
    name = model.desc.inputs[index].name
    entry = next((e for e in _entries(model) if e["input"] == name), None)
    if entry is None:
        raise errors.error_for(errors.ACL_ERROR_GE_AIPP_NOT_EXIST, f"input {index} has no "
                               "AIPP")
    if entry["mode"] != "static":
        raise errors.error_for(errors.ACL_ERROR_NOT_STATIC_AIPP, f"input {index} has "
                               "dynamic AIPP")
    return _info(entry)


def _info(entry: dict) -> dict[str, Any]:
    a = entry["params"]
    crop, resize, pad = a["crop"], a["resize"], a["padding"]
    info: dict[str, Any] = {
        "inputFormat": a["input_format"], "srcImageSizeW": a["src_image_size"][0],
        "srcImageSizeH": a["src_image_size"][1], "cropSwitch": crop[0],
        "loadStartPosW": crop[1], "loadStartPosH": crop[2], "cropSizeW": crop[3],
        "cropSizeH": crop[4], "resizeSwitch": resize[0], "resizeOutputW": resize[1],
        "resizeOutputH": resize[2], "paddingSwitch": pad[0], "leftPaddingSize": pad[3],
        "rightPaddingSize": pad[4], "topPaddingSize": pad[1], "bottomPaddingSize": pad[2],
        "cscSwitch": int(a["csc_switch"]), "rbuvSwapSwitch": int(a["rbuv_swap_switch"]),
        "axSwapSwitch": int(a["ax_swap_switch"]), "singleLineMode": 0}
    for k, v in enumerate(a["matrix"]):
        info[f"matrixR{k // 3}C{k % 3}"] = v
    for k in range(3):
        info[f"outputBias{k}"] = a["output_bias"][k]
        info[f"inputBias{k}"] = a["input_bias"][k]
    for k in range(4):
        info[f"meanChn{k}"] = a["mean_chn"][k]
        info[f"minChn{k}"] = a["min_chn"][k]
        info[f"varReciChn{k}"] = a["var_reci_chn"][k]
    dims = list(entry["model_dims"])
    dtype = entry.get("model_dtype", "float32")
    src = model_aipp.raw_dims(a["input_format"], dims[0], *a["src_image_size"])
    info.update(srcFormat=1 if entry.get("channels_last") else 0,
                srcDatatype=ACL_DTYPES.get(dtype, 0), srcDimNum=4, shapeCount=1,
                outDims=[{"srcDims": list(src), "srcSize": math.prod(src),
                          "aippOutdims": dims,
                          "aippOutSize": math.prod(dims) * np.dtype(dtype).itemsize}])
    return info
