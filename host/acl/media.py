"""``acl.media``: pyACL's DVPP image functions (names, argument order, returns as pyACL:
``ret`` alone, ``(value..., ret)`` for calls with outputs, a plain value for getters and
``dvpp_create_*``). Each wraps ``host/media/`` (``desc.py``, ``probe.py``, ``ops.py``,
``memory.py``), whose docstrings say what each mirrors and whether it blocks; the pixel
formats and other enumerations are ``npuemu.shared.media`` (also exported here under their C
names). A ``dvpp_create_*`` call that fails returns 0 (the C call's NULL), with the reason in
``acl.get_recent_err_msg``.

Video decode (``vdec_*``, ``dvpp_*_stream_desc*``) is ``host/media/vdec.py``, video encode
(``venc_*``) ``host/media/venc.py``. Every name of pyACL's media table that CANN's pyACL
documentation gives is provided, as far as it was checked (pyramid, batch crop-resize with
borders, channel parameters and ``dvpp_malloc_with_cfg`` were the last). The histogram
calls (``acldvppVpcCalcHistAsync``, ``acldvppVpcEqualizeHistAsync``, ``acldvppHist``,
``acldvppLutMap``) are C calls CANN documents no ``acl.media`` form of (pyACL has them as
``acl.himpi.vpc_calc_hist`` and ``vpc_equalize_hist`` only), so there are none here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from npuemu.host.acl._wrap import fail, ret_only, with_result
from npuemu.host.media import desc as _d
from npuemu.host.media import memory as _mem
from npuemu.host.media import ops as _ops
from npuemu.host.media import probe as _probe
from npuemu.host.media import vdec as _vdec
from npuemu.host.media import venc as _venc
from npuemu.shared import errors
from npuemu.shared import media as _m
from npuemu.shared.media import (
    BorderType,
    ChannelDescParamType,
    ChannelMode,
    JpegdPrecisionMode,
    JpegFormat,
    PixelFormat,
    StreamFormat,
)

_IMPORTED = frozenset(globals())


def __dir__() -> list[str]:
    """``dir(acl.media)`` lists the media calls and constants, not this module's imports."""
    return sorted(n for n in globals() if n not in _IMPORTED and not n.startswith("_"))


_P = _m.PIC_DESC

for _enum in (PixelFormat, StreamFormat, ChannelMode, BorderType, JpegFormat,
              ChannelDescParamType, JpegdPrecisionMode):
    globals().update({name: int(member) for name, member in _enum.__members__.items()})


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` under the name its failures are logged with."""
    fn.__name__ = fn.__qualname__ = name
    return fn


def _created(fn: Callable[..., int]) -> Callable[..., int]:
    """A ``dvpp_create_*`` call: the handle, or 0 with the failure recorded."""

    def call(*args: Any) -> int:
        try:
            return fn(*args)
        except errors.AclError as err:
            fail(err, f"media.{fn.__name__}")
            return 0

    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call


# memory ----------------------------------------------------------------------------------------
dvpp_malloc = with_result(0)(_mem.dvpp_malloc)
dvpp_malloc_with_cfg = with_result(0)(_mem.dvpp_malloc_with_cfg)
dvpp_free = ret_only(_mem.dvpp_free)

# channels --------------------------------------------------------------------------------------
dvpp_create_channel_desc = _created(_d.create_channel_desc)
dvpp_destroy_channel_desc = ret_only(_d.destroy_channel_desc)
dvpp_create_channel = ret_only(_d.create_channel)
dvpp_destroy_channel = ret_only(_d.destroy_channel)
dvpp_set_channel_desc_mode = ret_only(_d.set_channel_desc_mode)


def dvpp_set_channel_desc_param(handle: object, param_type: object,
                                value: object) -> tuple[object, int]:
    """Mirrors ``acldvppSetChannelDescParam``; pyACL returns ``(channel_desc, ret)``."""
    return handle, ret_only(_d.set_channel_param)(handle, param_type, value)


dvpp_get_channel_desc_param = with_result(0, 0)(_d.get_channel_param)


def dvpp_get_channel_desc_channel_id(handle: object) -> int:
    """Mirrors ``acldvppGetChannelDescChannelId`` (0 for an unknown handle)."""
    return _d.getter(handle, _d.ChannelDesc, "channel_id")


# picture descriptors -----------------------------------------------------------------------------
dvpp_create_pic_desc = _created(_d.create_pic_desc)
dvpp_destroy_pic_desc = ret_only(_d.destroy_pic_desc)


def _pic_setter(index: int, name: str) -> Callable[[object, object], int]:
    def set_field(handle: object, value: object) -> int:
        try:
            _d.set_pic_field(handle, index, value, name)
        except errors.AclError as err:
            return fail(err, f"media.dvpp_set_pic_desc_{name}")
        return 0

    set_field.__name__ = f"dvpp_set_pic_desc_{name}"
    return set_field


def _pic_getter(index: int, name: str) -> Callable[[object], int]:
    def get_field(handle: object) -> int:
        return _d.get_pic_field(handle, index)

    get_field.__name__ = f"dvpp_get_pic_desc_{name}"
    return get_field


_FIELDS = {"data": _P.DATA, "size": _P.SIZE, "format": _P.FORMAT, "width": _P.WIDTH,
           "height": _P.HEIGHT, "width_stride": _P.WIDTH_STRIDE,
           "height_stride": _P.HEIGHT_STRIDE, "ret_code": _P.RET_CODE}
for _name, _index in _FIELDS.items():
    globals()[f"dvpp_set_pic_desc_{_name}"] = _pic_setter(_index, _name)
    globals()[f"dvpp_get_pic_desc_{_name}"] = _pic_getter(_index, _name)

dvpp_create_batch_pic_desc = _created(_d.create_batch_pic_desc)
dvpp_get_pic_desc = _d.get_pic_desc
dvpp_destroy_batch_pic_desc = ret_only(_d.destroy_batch_pic_desc)

# configurations ----------------------------------------------------------------------------------
def _destroyer(kind: type, what: str, name: str) -> Callable[[object], int]:
    return ret_only(_named(name, lambda handle: _d.destroy(handle, kind, what)))


def _creator(kind: type, name: str) -> Callable[[], int]:
    return _created(_named(name, lambda: _d.create(kind)))


def _side_setter(setter: Callable[[object, str, object], None], side: str,
                 name: str) -> Callable[[object, object], int]:
    return ret_only(_named(name, lambda handle, value: setter(handle, side, value)))


dvpp_create_roi_config = _created(_d.create_roi_config)
dvpp_destroy_roi_config = _destroyer(_d.RoiConfig, "ROI config", "dvpp_destroy_roi_config")


@ret_only
def dvpp_set_roi_config(handle: object, left: object, right: object, top: object,
                        bottom: object) -> None:
    """Mirrors ``acldvppSetRoiConfig``."""
    for name, value in (("left", left), ("right", right), ("top", top), ("bottom", bottom)):
        _d.set_roi_field(handle, name, value)


for _side in ("left", "right", "top", "bottom"):
    _name = f"dvpp_set_roi_config_{_side}"
    globals()[_name] = _side_setter(_d.set_roi_field, _side, _name)

dvpp_create_resize_config = _creator(_d.ResizeConfig, "dvpp_create_resize_config")
dvpp_destroy_resize_config = _destroyer(_d.ResizeConfig, "resize config",
                                        "dvpp_destroy_resize_config")
dvpp_set_resize_config_interpolation = ret_only(_d.set_resize_interpolation)


def dvpp_get_resize_config_interpolation(handle: object) -> int:
    return _d.getter(handle, _d.ResizeConfig, "interpolation")


dvpp_create_jpege_config = _creator(_d.JpegeConfig, "dvpp_create_jpege_config")
dvpp_destroy_jpege_config = _destroyer(_d.JpegeConfig, "JPEGE config",
                                       "dvpp_destroy_jpege_config")
dvpp_set_jpege_config_level = ret_only(_d.set_jpege_level)


def dvpp_get_jpege_config_level(handle: object) -> int:
    return _d.getter(handle, _d.JpegeConfig, "level")


dvpp_create_border_config = _creator(_d.BorderConfig, "dvpp_create_border_config")
dvpp_destroy_border_config = _destroyer(_d.BorderConfig, "border config",
                                        "dvpp_destroy_border_config")
dvpp_set_border_config_value = ret_only(_d.set_border_value)
dvpp_set_border_config_border_type = ret_only(_d.set_border_type)
for _side in ("top", "bottom", "left", "right"):
    _name = f"dvpp_set_border_config_{_side}"
    globals()[_name] = _side_setter(_d.set_border_side, _side, _name)
    globals()[f"dvpp_get_border_config_{_side}"] = (
        lambda h, _s=_side: _d.getter(h, _d.BorderConfig, _s))


def dvpp_get_border_config_value(handle: object, index: object) -> float:
    """Mirrors ``acldvppGetBorderConfigValue`` (-1.0 for a bad handle or index)."""
    values = _d.getter(handle, _d.BorderConfig, "values", None)
    if values is None or type(index) is not int or not 0 <= index < 4:
        return -1.0
    return float(values[index])


def dvpp_get_border_config_border_type(handle: object) -> int:
    return _d.getter(handle, _d.BorderConfig, "border_type")


# probes ------------------------------------------------------------------------------------------


@with_result(0, 0, 0)
def dvpp_jpeg_get_image_info(data: object, size: object) -> tuple[int, int, int]:
    """Mirrors ``acldvppJpegGetImageInfo``: ``(width, height, components, ret)``."""
    return _probe.jpeg_info(data, size)[:3]


dvpp_jpeg_get_image_info_v2 = with_result(0, 0, 0, int(JpegFormat.ACL_JPEG_CSS_UNKNOWN))(
    _probe.jpeg_info)
dvpp_jpeg_predict_dec_size = with_result(0)(_probe.jpeg_predict_dec_size)
dvpp_png_get_image_info = with_result(0, 0, 0)(_probe.png_info)
dvpp_png_predict_dec_size = with_result(0)(_probe.png_predict_dec_size)
dvpp_jpeg_predict_enc_size = with_result(0)(_probe.jpeg_predict_enc_size)

# operations -------------------------------------------------------------------------------------
dvpp_jpeg_decode_async = ret_only(_ops.jpeg_decode_async)
dvpp_png_decode_async = ret_only(_ops.png_decode_async)
dvpp_jpeg_encode_async = ret_only(_ops.jpeg_encode_async)
dvpp_vpc_resize_async = ret_only(_ops.vpc_resize_async)
dvpp_vpc_crop_async = ret_only(_ops.vpc_crop_async)


@ret_only
def dvpp_vpc_crop_resize_async(channel: object, in_h: object, out_h: object, crop: object,
                               resize: object, stream: object) -> None:
    """Mirrors ``acldvppVpcCropResizeAsync``."""
    _ops.vpc_crop_async(channel, in_h, out_h, crop, stream, resize)


dvpp_vpc_crop_and_paste_async = ret_only(_ops.vpc_crop_and_paste_async)


@ret_only
def dvpp_vpc_crop_resize_paste_async(channel: object, in_h: object, out_h: object,
                                     crop: object, paste: object, resize: object,
                                     stream: object) -> None:
    """Mirrors ``acldvppVpcCropResizePasteAsync``."""
    _ops.vpc_crop_and_paste_async(channel, in_h, out_h, crop, paste, stream, resize)


_batch_crop = ret_only(_named("dvpp_vpc_batch_crop_async", _ops.vpc_batch_crop_async))


def dvpp_vpc_batch_crop_async(channel: object, src: object, roi_nums: object, *rest: object
                              ) -> int | tuple[int, int]:
    """Mirrors ``acldvppVpcBatchCropAsync``, in pyACL's two forms:
    ``dst, ret = dvpp_vpc_batch_crop_async(channel, src, roi_nums_list, dst, crop_area_list,
    stream)`` (the count is the list's length; ``dst`` is 0 on failure) and the C call's
    ``ret = dvpp_vpc_batch_crop_async(channel, src, roi_nums, size, dst, areas, stream)``.
    Any other number of arguments is a ``TypeError``. Does not block."""
    return _forms(_batch_crop, "dvpp_vpc_batch_crop_async", 6, True, channel, src, roi_nums,
                  rest)


def _crop_resize(channel: object, src: object, roi_nums: object, size: object, dst: object,
                 areas: object, resize: object, stream: object) -> None:
    _ops.vpc_batch_crop_async(channel, src, roi_nums, size, dst, areas, stream, resize)


_batch_crop_resize = ret_only(_named("dvpp_vpc_batch_crop_resize_async", _crop_resize))


def dvpp_vpc_batch_crop_resize_async(channel: object, src: object, roi_nums: object,
                                     *rest: object) -> int:
    """Mirrors ``acldvppVpcBatchCropResizeAsync``: pyACL's ``(channel, src, roi_nums_list,
    dst, crop_area_list, resize_config, stream)`` (the count is the list's length) or the C
    call's order with ``size`` after ``roi_nums``. Returns ``ret``. Does not block."""
    return _forms(_batch_crop_resize, "dvpp_vpc_batch_crop_resize_async", 7, False, channel,
                  src, roi_nums, rest)


_batch_paste = ret_only(_named("dvpp_vpc_batch_crop_and_paste_async",
                              _ops.vpc_batch_crop_and_paste_async))


def dvpp_vpc_batch_crop_and_paste_async(channel: object, src: object, roi_nums: object,
                                        *rest: object) -> int | tuple[int, int]:
    """Mirrors ``acldvppVpcBatchCropAndPasteAsync``, in pyACL's form ``dst, ret =
    dvpp_vpc_batch_crop_and_paste_async(channel, src, roi_nums_list, dst, crop_area_list,
    paste_area_list, stream)`` (the count is the list's length; ``dst`` is 0 on failure)
    and the C call's ``ret = ...(channel, src, roi_nums, size, dst, crops, pastes,
    stream)``. Any other number of arguments is a ``TypeError``. Does not block."""
    return _forms(_batch_paste, "dvpp_vpc_batch_crop_and_paste_async", 7, True, channel, src,
                  roi_nums, rest)


def _resize_paste(channel: object, src: object, roi_nums: object, size: object, dst: object,
                  crops: object, pastes: object, resize: object, stream: object) -> None:
    _ops.vpc_batch_crop_and_paste_async(channel, src, roi_nums, size, dst, crops, pastes,
                                        stream, resize)


_batch_resize_paste = ret_only(_named("dvpp_vpc_batch_crop_resize_paste_async", _resize_paste))


def dvpp_vpc_batch_crop_resize_paste_async(channel: object, src: object, roi_nums: object,
                                           *rest: object) -> int:
    """Mirrors ``acldvppVpcBatchCropResizePasteAsync``: pyACL's ``(channel, src,
    roi_nums_list, dst, crop_area_list, paste_area_list, resize_config, stream)`` (the count
    is the list's length) or the C call's order with ``size`` after ``roi_nums``. Returns
    ``ret``. Does not block."""
    return _forms(_batch_resize_paste, "dvpp_vpc_batch_crop_resize_paste_async", 8, False,
                  channel, src, roi_nums, rest)


def _crop_border(channel: object, src: object, roi_nums: object, size: object, dst: object,
                 crops: object, borders: object, resize: object, stream: object) -> None:
    _ops.vpc_batch_crop_resize_make_border_async(channel, src, roi_nums, size, dst, crops,
                                                 borders, stream, resize)


_batch_border = ret_only(_named("dvpp_vpc_batch_crop_resize_make_border_async", _crop_border))


def dvpp_vpc_batch_crop_resize_make_border_async(channel: object, src: object,
                                                 roi_nums: object, *rest: object) -> int:
    """Mirrors ``acldvppVpcBatchCropResizeMakeBorderAsync``: pyACL's ``(channel, src,
    roi_nums_list, dst, crop_area_list, border_cfgs_list, resize_config, stream)`` (the
    count is the list's length) or the C call's order with ``size`` after ``roi_nums``.
    Returns ``ret``. Does not block."""
    return _forms(_batch_border, "dvpp_vpc_batch_crop_resize_make_border_async", 8, False,
                  channel, src, roi_nums, rest)


def _forms(call: Callable[..., int], name: str, pyacl: int, returns_dst: bool,
           channel: object, src: object, roi_nums: object, rest: tuple[object, ...]
           ) -> Any:
    """A batch VPC call in pyACL's form of ``pyacl`` arguments (the count is the length of
    ``roi_nums_list``, -1 and refused if it is not a list; ``(dst, ret)`` with ``dst`` 0 on
    failure when ``returns_dst``, else ``ret``) or the C call's, one more (``size`` after
    ``roi_nums``; ``ret``). Any other number of arguments is a ``TypeError``."""
    if 3 + len(rest) == pyacl:
        count = len(roi_nums) if isinstance(roi_nums, list | tuple) else -1
        ret = call(channel, src, roi_nums, count, *rest)
        if not returns_dst:
            return ret
        return (rest[0] if ret == 0 and isinstance(rest[0], int) else 0), ret
    if 3 + len(rest) == pyacl + 1:
        return call(channel, src, roi_nums, *rest)
    raise TypeError(f"{name} takes {pyacl} arguments (pyACL's) or {pyacl + 1} (the C call's, "
                    f"with size after roi_nums), not {3 + len(rest)}")


dvpp_vpc_convert_color_async = ret_only(_ops.vpc_convert_color_async)
dvpp_vpc_make_border_async = ret_only(_ops.vpc_make_border_async)
dvpp_vpc_pyr_down_async = ret_only(_ops.vpc_pyr_down_async)


# video decode ------------------------------------------------------------------------------
_VDEC_FIELDS = {"channel_id": "channel_id", "thread_id": "thread_id", "callback": "callback",
                "entype": "en_type", "out_pic_format": "out_pic_format",
                "out_pic_width": "out_pic_width", "out_pic_height": "out_pic_height",
                "ref_frame_num": "ref_frame_num", "bit_depth": "bit_depth",
                "out_mode": "out_mode"}
vdec_create_channel_desc = _creator(_vdec.VdecChannelDesc, "vdec_create_channel_desc")
vdec_destroy_channel_desc = _destroyer(_vdec.VdecChannelDesc, "vdec channel descriptor",
                                       "vdec_destroy_channel_desc")
for _pyname, _field in _VDEC_FIELDS.items():
    _name = f"vdec_set_channel_desc_{_pyname}"
    globals()[_name] = _side_setter(_vdec.set_channel_field, _field, _name)
    globals()[f"vdec_get_channel_desc_{_pyname}"] = (
        lambda h, _f=_field: _d.getter(h, _vdec.VdecChannelDesc, _f,
                                       None if _f == "callback" else 0))
vdec_create_channel = ret_only(_vdec.create_channel)


def vdec_set_channel_desc_param(handle: object, param_type: object,
                                value: object) -> tuple[object, int]:
    """Mirrors ``aclvdecSetChannelDescParam``; pyACL returns ``(channel_desc, ret)``."""
    return handle, ret_only(_vdec.set_param)(handle, param_type, value)


vdec_get_channel_desc_param = with_result(0, 0)(_vdec.get_param)
vdec_destroy_channel = ret_only(_vdec.destroy_channel)
vdec_send_frame = ret_only(_vdec.send_frame)


@ret_only
def vdec_send_skipped_frame(channel: object, input_desc: object, config: object,
                            user_data: Any) -> None:
    """Mirrors ``aclvdecSendSkippedFrame``."""
    _vdec.send_frame(channel, input_desc, 0, config, user_data, skipped=True)


vdec_create_frame_config = _creator(_vdec.FrameConfig, "vdec_create_frame_config")
vdec_destroy_frame_config = _destroyer(_vdec.FrameConfig, "vdec frame config",
                                       "vdec_destroy_frame_config")
dvpp_create_stream_desc = _creator(_vdec.StreamDesc, "dvpp_create_stream_desc")
dvpp_destroy_stream_desc = _destroyer(_vdec.StreamDesc, "stream descriptor",
                                      "dvpp_destroy_stream_desc")
for _field in ("data", "size", "format", "timestamp", "ret_code", "eos"):
    _name = f"dvpp_set_stream_desc_{_field}"
    globals()[_name] = _side_setter(_vdec.set_stream_field, _field, _name)
    globals()[f"dvpp_get_stream_desc_{_field}"] = (
        lambda h, _f=_field: _d.getter(h, _vdec.StreamDesc, _f))


# video encode ------------------------------------------------------------------------------
_VENC_FIELDS = {"thread_id": "thread_id", "callback": "callback", "entype": "en_type",
                "pic_format": "pic_format", "pic_width": "pic_width",
                "pic_height": "pic_height", "key_frame_interval": "key_frame_interval",
                "buf_addr": "buf_addr", "buf_size": "buf_size", "rc_mode": "rc_mode",
                "src_rate": "src_rate", "max_bit_rate": "max_bit_rate"}
venc_set_channel_desc_param = ret_only(_venc.set_param)
venc_get_channel_desc_param = with_result(0)(_venc.get_param)
venc_get_channel_desc_channel_id = _venc.channel_id
venc_create_channel_desc = _creator(_venc.VencChannelDesc, "venc_create_channel_desc")
venc_destroy_channel_desc = _destroyer(_venc.VencChannelDesc, "venc channel descriptor",
                                       "venc_destroy_channel_desc")
for _pyname, _field in _VENC_FIELDS.items():
    _name = f"venc_set_channel_desc_{_pyname}"
    globals()[_name] = _side_setter(_venc.set_channel_field, _field, _name)
    globals()[f"venc_get_channel_desc_{_pyname}"] = (
        lambda h, _f=_field: _d.getter(h, _venc.VencChannelDesc, _f,
                                       None if _f == "callback" else 0))
venc_create_channel = ret_only(_venc.create_channel)
venc_destroy_channel = ret_only(_venc.destroy_channel)
venc_send_frame = ret_only(_venc.send_frame)
venc_create_frame_config = _creator(_venc.VencFrameConfig, "venc_create_frame_config")
venc_destroy_frame_config = _destroyer(_venc.VencFrameConfig, "venc frame config",
                                       "venc_destroy_frame_config")
for _field in ("force_i_frame", "eos"):
    _name = f"venc_set_frame_config_{_field}"
    globals()[_name] = _side_setter(_venc.set_frame_field, _field, _name)
    globals()[f"venc_get_frame_config_{_field}"] = (
        lambda h, _f=_field: _d.getter(h, _venc.VencFrameConfig, _f))
