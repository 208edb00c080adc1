"""C bodies of ``libacl_dvpp.so`` (``acl/ops/acl_dvpp.h``): DVPP memory, channel, picture and
batch picture descriptors, configs (ROI, resize, JPEGE, border), the JPEG/PNG probes and the
asynchronous decode, encode and VPC calls (make-border, pyramid and the batch crops
included); the video calls and every ``Get/SetChannelDescParam`` form (``acldvpp*`` too) are
``video.py``'s (imported at the end, registered with the rest).

Each mirrors the C call of its name through ``acl.media`` (``host/acl/media.py``): the same
checks and codes as a Python program. Descriptors are the face's int handles cast to
pointers; a getter of an unknown handle returns the C type's default (0;
``acldvppGetBorderConfigValue`` -1.0, as CANN's), a setter 100000.
This library has its own cffi ``FFI`` (``bind``), apart from libascendcl's, and nothing
here blocks but the calls the face says block (none of these waits for the card).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from npuemu.host.acl import media
from npuemu.host.acl._wrap import fail
from npuemu.host.capi.exports import export
from npuemu.shared import errors

_ffi: Any = None


def bind(ffi: Any) -> None:
    """Called by ``boot.attach`` with this library's FFI before its first call runs."""
    global _ffi
    _ffi = ffi


def _addr(p: Any) -> int:
    return int(_ffi.cast("uintptr_t", p))


def _ptr(kind: str, value: int) -> Any:
    return _ffi.cast(f"{kind} *", value)


def _null(*outs: Any) -> bool:
    return any(o == _ffi.NULL for o in outs)


def _invalid(name: str) -> int:
    return fail(errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"{name}: NULL output"),
                name)


def _allocated(name: str, dev_ptr: Any, allocate: Callable[[], tuple[int, int]]) -> int:
    """``allocate()``'s ``(ptr, ret)``, the pointer written to ``*dev_ptr`` on success."""
    if _null(dev_ptr):
        return _invalid(name)
    ptr, ret = allocate()
    if ret == 0:
        dev_ptr[0] = _ffi.cast("void *", ptr)
    return ret


@export
def acldvppMalloc(dev_ptr: Any, size: int) -> int:
    return _allocated("acldvppMalloc", dev_ptr, lambda: media.dvpp_malloc(size))


@export
def acldvppMallocWithCfg(dev_ptr: Any, size: int, policy: int, cfg: Any) -> int:
    """Mirrors ``acldvppMallocWithCfg`` (blocks for one round trip, as ``acldvppMalloc``): a
    configuration that is not NULL is passed on as an empty one (its attributes change
    nothing here, as in ``acl.media.dvpp_malloc_with_cfg``)."""
    config: dict[str, Any] | None = None if cfg == _ffi.NULL else {}
    return _allocated("acldvppMallocWithCfg", dev_ptr,
                      lambda: media.dvpp_malloc_with_cfg(size, policy, config))


@export
def acldvppFree(ptr: Any) -> int:
    return media.dvpp_free(_addr(ptr))


def _handle_call(name: str, fn: Any, kinds: str = "") -> None:
    """``name``'s body: ``fn(handle, *rest)``, pointer arguments at the positions ``kinds``
    marks with ``p`` (after the handle) passed as ints."""

    def call(handle: Any, *args: Any) -> Any:
        rest = [_addr(a) if kinds[i:i + 1] == "p" else a for i, a in enumerate(args)]
        return fn(_addr(handle), *rest)

    call.__name__ = call.__qualname__ = name
    export(call)


def _creator(name: str, kind: str, fn: Any) -> None:
    def call(*args: Any) -> Any:
        return _ptr(kind, fn(*args))

    call.__name__ = call.__qualname__ = name
    export(call)


for _name, _kind, _fn in (
        ("acldvppCreateChannelDesc", "acldvppChannelDesc", media.dvpp_create_channel_desc),
        ("acldvppCreatePicDesc", "acldvppPicDesc", media.dvpp_create_pic_desc),
        ("acldvppCreateRoiConfig", "acldvppRoiConfig", media.dvpp_create_roi_config),
        ("acldvppCreateResizeConfig", "acldvppResizeConfig", media.dvpp_create_resize_config),
        ("acldvppCreateJpegeConfig", "acldvppJpegeConfig", media.dvpp_create_jpege_config),
        ("acldvppCreateBorderConfig", "acldvppBorderConfig", media.dvpp_create_border_config),
        ("acldvppCreateBatchPicDesc", "acldvppBatchPicDesc",
         media.dvpp_create_batch_pic_desc)):
    _creator(_name, _kind, _fn)


@export
def acldvppGetPicDesc(batch: Any, index: int) -> Any:
    """Mirrors ``acldvppGetPicDesc``: the batch's picture ``index`` (NULL out of range)."""
    return _ptr("acldvppPicDesc", media.dvpp_get_pic_desc(_addr(batch), index))


_HANDLE_CALLS: dict[str, Callable[..., Any]] = {
    "acldvppDestroyChannelDesc": media.dvpp_destroy_channel_desc,
    "acldvppGetChannelDescChannelId": media.dvpp_get_channel_desc_channel_id,
    "acldvppSetChannelDescMode": media.dvpp_set_channel_desc_mode,
    "acldvppCreateChannel": media.dvpp_create_channel,
    "acldvppDestroyChannel": media.dvpp_destroy_channel,
    "acldvppDestroyPicDesc": media.dvpp_destroy_pic_desc,
    "acldvppDestroyRoiConfig": media.dvpp_destroy_roi_config,
    "acldvppDestroyResizeConfig": media.dvpp_destroy_resize_config,
    "acldvppSetResizeConfigInterpolation": media.dvpp_set_resize_config_interpolation,
    "acldvppGetResizeConfigInterpolation": media.dvpp_get_resize_config_interpolation,
    "acldvppDestroyJpegeConfig": media.dvpp_destroy_jpege_config,
    "acldvppSetJpegeConfigLevel": media.dvpp_set_jpege_config_level,
    "acldvppGetJpegeConfigLevel": media.dvpp_get_jpege_config_level,
    "acldvppDestroyBatchPicDesc": media.dvpp_destroy_batch_pic_desc,
    "acldvppSetRoiConfig": media.dvpp_set_roi_config,
    "acldvppDestroyBorderConfig": media.dvpp_destroy_border_config,
    "acldvppSetBorderConfigValue": media.dvpp_set_border_config_value,
    "acldvppGetBorderConfigValue": media.dvpp_get_border_config_value,
    "acldvppSetBorderConfigBorderType": media.dvpp_set_border_config_border_type,
    "acldvppGetBorderConfigBorderType": media.dvpp_get_border_config_border_type,
}
_fields: Any = media  # its per-field calls are made in loops: type checkers do not see them
for _name, _fn in _HANDLE_CALLS.items():
    _handle_call(_name, _fn)
for _c, _py in (("Size", "size"), ("Format", "format"), ("Width", "width"),
                ("Height", "height"), ("WidthStride", "width_stride"),
                ("HeightStride", "height_stride"), ("RetCode", "ret_code")):
    _handle_call(f"acldvppSetPicDesc{_c}", getattr(media, f"dvpp_set_pic_desc_{_py}"))
    _handle_call(f"acldvppGetPicDesc{_c}", getattr(media, f"dvpp_get_pic_desc_{_py}"))
_handle_call("acldvppSetPicDescData", _fields.dvpp_set_pic_desc_data, "p")
for _side in ("Left", "Right", "Top", "Bottom"):
    _handle_call(f"acldvppSetRoiConfig{_side}",
                 getattr(media, f"dvpp_set_roi_config_{_side.lower()}"))
    _handle_call(f"acldvppSetBorderConfig{_side}",
                 getattr(media, f"dvpp_set_border_config_{_side.lower()}"))
    _handle_call(f"acldvppGetBorderConfig{_side}",
                 getattr(media, f"dvpp_get_border_config_{_side.lower()}"))


@export
def acldvppGetPicDescData(desc: Any) -> Any:
    return _ffi.cast("void *", _fields.dvpp_get_pic_desc_data(_addr(desc)))


# probes: the outputs are written only on success -----------------------------------------------
def _outputs(name: str, outs: tuple[Any, ...], result: tuple[Any, ...]) -> int:
    if _null(*outs):
        return _invalid(name)
    *values, ret = result
    if ret == 0:
        for out, value in zip(outs, values, strict=True):
            out[0] = value
    return int(ret)


@export
def acldvppJpegGetImageInfo(data: Any, size: int, width: Any, height: Any,
                            components: Any) -> int:
    return _outputs("acldvppJpegGetImageInfo", (width, height, components),
                    media.dvpp_jpeg_get_image_info(_addr(data), size))


@export
def acldvppJpegGetImageInfoV2(data: Any, size: int, width: Any, height: Any, components: Any,
                              fmt: Any) -> int:
    return _outputs("acldvppJpegGetImageInfoV2", (width, height, components, fmt),
                    media.dvpp_jpeg_get_image_info_v2(_addr(data), size))


@export
def acldvppJpegPredictEncSize(desc: Any, config: Any, size: Any) -> int:
    return _outputs("acldvppJpegPredictEncSize", (size,),
                    media.dvpp_jpeg_predict_enc_size(_addr(desc), _addr(config)))


@export
def acldvppJpegPredictDecSize(data: Any, size: int, fmt: int, out: Any) -> int:
    return _outputs("acldvppJpegPredictDecSize", (out,),
                    media.dvpp_jpeg_predict_dec_size(_addr(data), size, fmt))


@export
def acldvppPngGetImageInfo(data: Any, size: int, width: Any, height: Any,
                           components: Any) -> int:
    return _outputs("acldvppPngGetImageInfo", (width, height, components),
                    media.dvpp_png_get_image_info(_addr(data), size))


@export
def acldvppPngPredictDecSize(data: Any, size: int, fmt: int, out: Any) -> int:
    return _outputs("acldvppPngPredictDecSize", (out,),
                    media.dvpp_png_predict_dec_size(_addr(data), size, fmt))


# asynchronous operations: every pointer or handle as the int the face takes -------------------
def _async(name: str, fn: Any) -> None:
    def call(*args: Any) -> int:
        return int(fn(*[a if isinstance(a, int) else _addr(a) for a in args]))

    call.__name__ = call.__qualname__ = name
    export(call)


for _name, _fn in (("acldvppJpegDecodeAsync", media.dvpp_jpeg_decode_async),
                   ("acldvppJpegEncodeAsync", media.dvpp_jpeg_encode_async),
                   ("acldvppPngDecodeAsync", media.dvpp_png_decode_async),
                   ("acldvppVpcResizeAsync", media.dvpp_vpc_resize_async),
                   ("acldvppVpcCropAsync", media.dvpp_vpc_crop_async),
                   ("acldvppVpcCropResizeAsync", media.dvpp_vpc_crop_resize_async),
                   ("acldvppVpcCropAndPasteAsync", media.dvpp_vpc_crop_and_paste_async),
                   ("acldvppVpcCropResizePasteAsync", media.dvpp_vpc_crop_resize_paste_async),
                   ("acldvppVpcMakeBorderAsync", media.dvpp_vpc_make_border_async),
                   ("acldvppVpcConvertColorAsync", media.dvpp_vpc_convert_color_async),
                   ("acldvppVpcPyrDownAsync", media.dvpp_vpc_pyr_down_async)):
    _async(_name, _fn)


# batch VPC calls: the C arrays read as far as the batch descriptors reach ------------------
def _batch_lists(src: Any, roi_nums: Any, size: int, dst: Any,
                 arrays: tuple[Any, ...]) -> tuple[list[int] | None, list[list[int] | None]]:
    """What ``roi_nums`` and the per-area pointer arrays hold, read no further than the
    batches reach: ``size`` ROI counts if the source batch has that many pictures, and as
    many areas as the counts add up to if the destination batch has that many pictures.
    Otherwise a short list (None for a NULL array), which ``acl.media`` refuses with its
    own message and code (100000)."""
    counts: list[int] | None = None if roi_nums == _ffi.NULL else []
    if counts is not None and size > 0 and media.dvpp_get_pic_desc(_addr(src), size - 1):
        counts = list(_ffi.unpack(roi_nums, size))
    total = sum(counts or [])
    fits = total > 0 and bool(media.dvpp_get_pic_desc(_addr(dst), total - 1))
    lists = [None if a == _ffi.NULL else [_addr(p) for p in _ffi.unpack(a, total)] if fits
             else [] for a in arrays]
    return counts, lists


def _batch(name: str, fn: Any, arrays: int) -> None:
    """``name``'s body: ``(channel, src, roiNums, size, dst, <arrays pointer arrays>,
    <handles>...)`` passed to ``fn`` in the C call's order, the arrays as lists of handles.
    Does not block."""

    def call(channel: Any, src: Any, roi_nums: Any, size: int, dst: Any, *rest: Any) -> int:
        counts, lists = _batch_lists(src, roi_nums, size, dst, rest[:arrays])
        handles = [_addr(a) for a in rest[arrays:]]
        return int(fn(_addr(channel), _addr(src), counts, size, _addr(dst), *lists, *handles))

    call.__name__ = call.__qualname__ = name
    export(call)


for _name, _body, _arrays in (
        ("acldvppVpcBatchCropAsync", media.dvpp_vpc_batch_crop_async, 1),
        ("acldvppVpcBatchCropAndPasteAsync", media.dvpp_vpc_batch_crop_and_paste_async, 2),
        ("acldvppVpcBatchCropResizeAsync", media.dvpp_vpc_batch_crop_resize_async, 1),
        ("acldvppVpcBatchCropResizePasteAsync", media.dvpp_vpc_batch_crop_resize_paste_async,
         2),
        ("acldvppVpcBatchCropResizeMakeBorderAsync",
         media.dvpp_vpc_batch_crop_resize_make_border_async, 2)):
    _batch(_name, _body, _arrays)


# the video calls (host/capi/video.py) use the helpers above: registered once they exist
from npuemu.host.capi import video  # noqa: E402,F401
