"""The asynchronous DVPP operations: ``acldvppJpegDecodeAsync``, ``acldvppJpegEncodeAsync``,
``acldvppPngDecodeAsync`` and the ``acldvppVpc*Async`` family (``acldvppVpcPyrDownAsync``
included). Each checks its arguments, queues one ``DVPP`` task on the stream
(``shared/protocol.py``) and returns without waiting; the card's DVPP engine runs it in
stream order (``device/exec/dvpp.py``).

Checked here, at the call (100000 unless said): the channel (created, serving the call's
mode), every descriptor handle, the stream (107003 on another device), data pointers inside
live device allocations of this process on the stream's card, and, for VPC, the pictures'
formats (200006 for a valid ``acldvppPixelFormat`` VPC does not take here), sizes, strides,
buffer sizes and ROIs as ``shared/media.py`` states them. The card checks the pictures again
when the task starts (a picture an earlier task writes is seen as written) and fails the task
with 507018 for a picture that breaks a rule or a file it cannot decode.

JPEGE's size argument is a host pointer to a ``uint32_t``: read as the output buffer's
capacity at the call, written with the encoded size when the stream reaches the task (a host
function queued right behind it, as the real runtime copies the size back), so it holds the
size once ``synchronize_stream`` returns; a failed encode leaves it as it was (our choice).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from npuemu.host.core import callbacks, memory, runtime
from npuemu.host.core import stream as streams
from npuemu.host.media import desc as d
from npuemu.shared import address, errors
from npuemu.shared import media as m
from npuemu.shared.protocol import Op

_P = m.PIC_DESC
VPC, JPEGD, JPEGE = (m.ChannelMode.DVPP_CHNMODE_VPC, m.ChannelMode.DVPP_CHNMODE_JPEGD,
                     m.ChannelMode.DVPP_CHNMODE_JPEGE)
_RESIZE, _CROP, _CROP_PASTE = m.VpcOp.RESIZE, m.VpcOp.CROP, m.VpcOp.CROP_PASTE
_CONVERT, _BORDER, _BATCH_CROP = m.VpcOp.CONVERT, m.VpcOp.BORDER, m.VpcOp.BATCH_CROP
_PYR_DOWN, _BATCH_CROP_BORDER = m.VpcOp.PYR_DOWN, m.VpcOp.BATCH_CROP_BORDER


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def device_range(stream: streams.Stream, ptr: object, size: int, what: str) -> int:
    """``ptr`` once ``[ptr, ptr+size)`` is device memory of this process on the card."""
    if type(ptr) is not int or not address.is_device_ptr(ptr):
        raise _param(f"{what}: {ptr!r} is not device memory (acldvppMalloc)")
    try:
        alloc = memory.find(ptr, max(size, 1))
    except errors.AclError as err:
        raise _param(f"{what}: {err}") from None
    if alloc.link is not stream.link:
        raise _param(f"{what}: 0x{ptr:x} is memory of another device than the stream's")
    return ptr


def submit(stream: streams.Stream, kind: str, pics: list[d.PicDesc],
           params: list[int]) -> int:
    """Queue one ``DVPP`` task of ``kind`` on the stream (its records pinned for the card)."""
    d.pin_records(stream.link, pics)
    memory.flush_frees(stream.link, only_if_waiting=True)  # the card checks the pointers
    return streams.submit(stream, Op.DVPP, kind, [p.addr for p in pics], params)


def _pic(handle: object, what: str) -> d.PicDesc:
    return d.lookup(handle, d.PicDesc, f"{what} picture descriptor")


# decode and encode -------------------------------------------------------------------------
def jpeg_decode_async(channel: object, data: object, size: object, out_handle: object,
                      stream_handle: object) -> None:
    """Mirrors ``acldvppJpegDecodeAsync``: the JPEG at ``data`` (device memory) into the
    output picture (YUV420SP NV12/NV21 from any file; the file's own YUV422SP, YUV440SP or
    YUV444SP; UNKNOWN: the file's own, V first); the card writes the picture's format,
    width, height and strides (``shared/media.py``: ``jpegd_output``, ``jpegd_geometry``)
    and fails the task (507018) for a format the file does not decode to. Does not
    block."""
    _decode(channel, data, size, out_handle, stream_handle, "jpegd", JPEGD, m.JPEGD_FORMATS)


def png_decode_async(channel: object, data: object, size: object, out_handle: object,
                     stream_handle: object) -> None:
    """Mirrors ``acldvppPngDecodeAsync``: the PNG at ``data`` into an RGB888 or RGBA8888
    picture. Does not block."""
    _decode(channel, data, size, out_handle, stream_handle, "pngd", m.PNGD_MODE,
            frozenset((m.RGB888, m.RGBA8888)))


def _decode(channel: object, data: object, size: object, out_handle: object,
            stream_handle: object, kind: str, mode: int, formats: frozenset[int]) -> None:
    d.channel_for(channel, mode, kind)
    out = _pic(out_handle, f"{kind} output")
    count = d._u32(size, "size")
    if count == 0:
        raise _param(f"{kind}: the input size is 0")
    fmt = out.get(_P.FORMAT)
    if fmt not in formats:
        code = (errors.ACL_ERROR_FEATURE_UNSUPPORTED if fmt in m.PIXEL_FORMAT_VALUES
                else errors.ACL_ERROR_INVALID_PARAM)
        raise errors.error_for(code, f"{kind}: output format {fmt} is not one of "
                                     f"{sorted(int(f) for f in formats)}")
    stream = streams.resolve(stream_handle, for_submit=True)
    device_range(stream, data, count, f"{kind} input")
    device_range(stream, out.get(_P.DATA), out.get(_P.SIZE), f"{kind} output")
    submit(stream, kind, [out], [data, count])  # type: ignore[list-item]


def jpeg_encode_async(channel: object, in_handle: object, data: object, size_ptr: object,
                      config: object, stream_handle: object) -> None:
    """Mirrors ``acldvppJpegEncodeAsync``: the YUV420SP picture into a JPEG at ``data``;
    ``*size_ptr`` (host ``uint32_t``) is the buffer's capacity, then the encoded size once
    the stream passed the task. Does not block."""
    d.channel_for(channel, JPEGE, "jpege")
    pic = _pic(in_handle, "jpege input")
    cfg = d.lookup(config, d.JpegeConfig, "JPEGE config")
    rt = runtime.get()
    if type(size_ptr) is not int or address.is_device_ptr(size_ptr):
        raise _param(f"jpege: the size pointer {size_ptr!r} must be host memory")
    try:
        rt.host_maps.check(size_ptr, 4, write=True)
    except errors.AclError as err:
        raise _param(f"jpege: the size pointer: {err}") from None
    size_word = ctypes.c_uint32.from_address(size_ptr)
    capacity = size_word.value
    if capacity == 0:
        raise _param("jpege: *size (the output buffer's capacity) is 0")
    if pic.get(_P.FORMAT) not in m.YUV420SP:
        raise _param(f"jpege: JPEGE takes YUV420SP, not format {pic.get(_P.FORMAT)}")
    stream = streams.resolve(stream_handle, for_submit=True)
    device_range(stream, data, capacity, "jpege output")
    device_range(stream, pic.get(_P.DATA), pic.get(_P.SIZE), "jpege input")
    pinned, staging = rt.pools()
    word = staging.take(4)
    seg = pinned.find(word)
    assert seg is not None  # staging buffers are pinned blocks
    memory.pin(stream.link, word, seg)
    staged = ctypes.c_uint32.from_address(word)
    staged.value = 0
    submit(stream, "jpege", [pic], [data, capacity, cfg.level, word])  # type: ignore[list-item]

    def copy_size(_args: Any) -> None:
        if staged.value:  # a failed encode leaves *size as it was
            size_word.value = staged.value

    callbacks.launch_host_func(stream_handle, copy_size, None)
    staging.release_after(stream, stream.submitted, word)


# VPC -----------------------------------------------------------------------------------------
def _vpc_pic(stream: streams.Stream, handle: object, output: bool, what: str) -> d.PicDesc:
    pic = _pic(handle, what)
    words = pic.words  # the record's words, read once each (ints)
    fmt, w, h = words[_P.FORMAT], words[_P.WIDTH], words[_P.HEIGHT]
    sw, sh, size = words[_P.WIDTH_STRIDE], words[_P.HEIGHT_STRIDE], words[_P.SIZE]
    if fmt not in m.VPC_FORMATS:
        code = (errors.ACL_ERROR_FEATURE_UNSUPPORTED if fmt in m.PIXEL_FORMAT_VALUES
                else errors.ACL_ERROR_INVALID_PARAM)
        raise errors.error_for(code, f"{what}: VPC does not take format {fmt} here "
                                     "(YUV400, YUV420SP, RGB888, BGR888)")
    problem = m.vpc_picture_problem(fmt, w, h, sw, sh, size, output)
    if problem:
        raise _param(f"{what}: {problem}")
    device_range(stream, words[_P.DATA], m.picture_bytes(fmt, sw, sh), what)
    return pic


def _area(handle: object, pic: d.PicDesc, what: str, paste: bool) -> list[int]:
    roi = d.lookup(handle, d.RoiConfig, f"{what} ROI config").area()
    problem = m.roi_problem(roi, pic.get(_P.WIDTH), pic.get(_P.HEIGHT), what, paste)
    if problem:
        raise _param(problem)
    return roi


def _interp(resize: object) -> int:
    if resize is None:
        return 0
    return d.lookup(resize, d.ResizeConfig, "resize config").interpolation


def _vpc(channel: object, stream_handle: object, ins: Sequence[object], outs: Sequence[object],
         op: int, interpolation: int, rest: list[int] | None = None,
         areas: list[tuple[object, int, bool]] | None = None) -> None:
    d.channel_for(channel, VPC, "vpc")
    stream = streams.resolve(stream_handle, for_submit=True)
    pins = [_vpc_pic(stream, h, False, "vpc input") for h in ins]
    pouts = [_vpc_pic(stream, h, True, "vpc output") for h in outs]
    extra: list[int] = []
    for handle, index, output in areas or []:
        pic = (pouts if output else pins)[index]
        extra += _area(handle, pic, "paste area" if output else "crop area", output)
    submit(stream, "vpc", pins + pouts, [op, interpolation, len(pins), *(rest or []), *extra])


def vpc_resize_async(channel: object, in_h: object, out_h: object, resize: object,
                     stream: object) -> None:
    """Mirrors ``acldvppVpcResizeAsync``: the input scaled to the output picture's size
    (bilinear or nearest as the resize config says). Does not block."""
    d.lookup(resize, d.ResizeConfig, "resize config")
    _vpc(channel, stream, [in_h], [out_h], _RESIZE, _interp(resize))


def vpc_crop_async(channel: object, in_h: object, out_h: object, crop: object,
                   stream: object, resize: object = None) -> None:
    """Mirrors ``acldvppVpcCropAsync`` (``acldvppVpcCropResizeAsync`` with a resize
    config): the crop area scaled to the output picture's size. Does not block."""
    _vpc(channel, stream, [in_h], [out_h], _CROP, _interp(resize), areas=[(crop, 0, False)])


def vpc_crop_and_paste_async(channel: object, in_h: object, out_h: object, crop: object,
                             paste: object, stream: object, resize: object = None) -> None:
    """Mirrors ``acldvppVpcCropAndPasteAsync`` (``...CropResizePasteAsync``): the crop area
    scaled into the paste area of the output (left offset a multiple of 16); the rest of
    the output is left as it was. Does not block."""
    _vpc(channel, stream, [in_h], [out_h], _CROP_PASTE, _interp(resize),
         areas=[(crop, 0, False), (paste, 0, True)])


def vpc_batch_crop_async(channel: object, src_batch: object, roi_nums: object, size: object,
                         dst_batch: object, crop_areas: object, stream: object,
                         resize: object = None) -> None:
    """Mirrors ``acldvppVpcBatchCropAsync`` (``...BatchCropResizeAsync``): ``roi_nums[i]``
    areas of input ``i``, each scaled to its output picture (``size`` inputs; outputs in
    order). One task. Does not block."""
    src, dst, counts, owners, crops = _batch(src_batch, roi_nums, size, dst_batch, crop_areas,
                                             "crop")
    areas = [(area, i, False) for area, i in zip(crops, owners, strict=True)]
    _vpc(channel, stream, list(src.handles[:len(counts)]), list(dst.handles[:len(owners)]),
         _BATCH_CROP, _interp(resize), rest=counts, areas=areas)


def _batch(src_batch: object, roi_nums: object, size: object, dst_batch: object,
           crop_areas: object, what: str
           ) -> tuple[d.BatchPicDesc, d.BatchPicDesc, list[int], list[int], list[object]]:
    """The checked batch arguments: both batch descriptors, the ROI count of each of the
    ``size`` inputs, the input each crop area (and output picture) belongs to, the crop
    areas."""
    src = d.lookup(src_batch, d.BatchPicDesc, "source batch picture descriptor")
    dst = d.lookup(dst_batch, d.BatchPicDesc, "destination batch picture descriptor")
    n = d._u32(size, "size")
    if not isinstance(roi_nums, list | tuple) or len(roi_nums) != n \
            or not 0 < n <= len(src.pics):
        raise _param(f"batch {what}: roi_nums must list {n} counts (1 to {len(src.pics)} "
                     "inputs)")
    counts = [d._u32(c, "roi count") for c in roi_nums]
    total = sum(counts)
    if not isinstance(crop_areas, list | tuple) or len(crop_areas) != total \
            or not 0 < total <= len(dst.pics):
        raise _param(f"batch {what}: {total} crop areas and as many output pictures")
    owners = [i for i, count in enumerate(counts) for _ in range(count)]
    return src, dst, counts, owners, list(crop_areas)


def vpc_batch_crop_resize_make_border_async(channel: object, src_batch: object,
                                            roi_nums: object, size: object,
                                            dst_batch: object, crop_areas: object,
                                            border_cfgs: object, stream: object,
                                            resize: object = None) -> None:
    """Mirrors ``acldvppVpcBatchCropResizeMakeBorderAsync``: ``roi_nums[i]`` areas of input
    ``i``, area ``k`` scaled to output picture ``k`` less the borders of ``border_cfgs[k]``
    (constant or replicate only) and bordered to the output's size. One task. Does not
    block."""
    src, dst, counts, owners, crops = _batch(src_batch, roi_nums, size, dst_batch,
                                             crop_areas, "crop resize make border")
    if not isinstance(border_cfgs, list | tuple) or len(border_cfgs) != len(owners):
        raise _param(f"batch crop resize make border: {len(owners)} border configs, one per "
                     "crop area")
    rest = list(counts)
    for k, handle in enumerate(border_cfgs):
        cfg = d.lookup(handle, d.BorderConfig, f"border config {k}")
        pic = dst.pics[k]
        problem = m.batch_border_problem(pic.get(_P.FORMAT), pic.get(_P.WIDTH),
                                         pic.get(_P.HEIGHT), cfg.border_type, cfg.top,
                                         cfg.bottom, cfg.left, cfg.right)
        if problem:
            raise _param(f"output {k}: {problem}")
        rest += [cfg.border_type, cfg.top, cfg.bottom, cfg.left, cfg.right,
                 *(round(v) for v in cfg.values[:3])]
    areas = [(area, i, False) for area, i in zip(crops, owners, strict=True)]
    _vpc(channel, stream, list(src.handles[:len(counts)]), list(dst.handles[:len(owners)]),
         _BATCH_CROP_BORDER, _interp(resize), rest=rest, areas=areas)


def vpc_batch_crop_and_paste_async(channel: object, src_batch: object, roi_nums: object,
                                   size: object, dst_batch: object, crop_areas: object,
                                   paste_areas: object, stream_handle: object,
                                   resize: object = None) -> None:
    """Mirrors ``acldvppVpcBatchCropAndPasteAsync`` (``...BatchCropResizePasteAsync`` with a
    resize config): ``roi_nums[i]`` crop areas of input ``i``, area ``k`` scaled into paste
    area ``k`` of output picture ``k`` (left offset a multiple of 16), the rest of each output
    left as it was. Every argument is checked before anything is queued; then one
    crop-and-paste task per area, in order (npuemu's; the card's batch is one task). Does
    not block."""
    src, dst, _counts, owners, crops = _batch(src_batch, roi_nums, size, dst_batch,
                                              crop_areas, "crop and paste")
    if not isinstance(paste_areas, list | tuple) or len(paste_areas) != len(owners):
        raise _param(f"batch crop and paste: {len(owners)} paste areas, one per crop area")
    d.channel_for(channel, VPC, "vpc")
    stream = streams.resolve(stream_handle, for_submit=True)
    interpolation, tasks = _interp(resize), []
    for k, i in enumerate(owners):
        pin = _vpc_pic(stream, src.handles[i], False, "vpc input")
        pout = _vpc_pic(stream, dst.handles[k], True, "vpc output")
        roi = (_area(crops[k], pin, "crop area", False)
               + _area(paste_areas[k], pout, "paste area", True))
        tasks.append(([pin, pout], [_CROP_PASTE, interpolation, 1, *roi]))
    for pics, params in tasks:
        submit(stream, "vpc", pics, params)


def vpc_convert_color_async(channel: object, in_h: object, out_h: object,
                            stream: object) -> None:
    """Mirrors ``acldvppVpcConvertColorAsync``: the same size in the output's format
    (OpenCV's BT.601 YUV <-> RGB). Does not block."""
    _vpc(channel, stream, [in_h], [out_h], _CONVERT, 0)


def vpc_pyr_down_async(channel: object, in_h: object, out_h: object, reserve: object,
                       stream_handle: object) -> None:
    """Mirrors ``acldvppVpcPyrDownAsync``: a YUV400 picture to half its width and height
    (rounded down) by a Gaussian pyramid step (``cv2.pyrDown``: a 5x5 Gaussian, then every
    other row and column; CANN names no filter, our choice). The output's width and height
    must be half the input's; ``reserve`` (the pyramid configuration CANN reserves) is None
    or 0. Does not block."""
    d.channel_for(channel, VPC, "vpc pyr down")
    if reserve not in (None, 0):
        raise _param(f"pyr down: the reserved configuration must be NULL, not {reserve!r}")
    stream = streams.resolve(stream_handle, for_submit=True)
    pics = []
    for handle, output in ((in_h, False), (out_h, True)):
        what = "pyr down " + ("output" if output else "input")
        pic = _pic(handle, what)
        sw, sh = pic.get(_P.WIDTH_STRIDE), pic.get(_P.HEIGHT_STRIDE)
        problem = m.pyr_down_problem(pic.get(_P.FORMAT), pic.get(_P.WIDTH),
                                     pic.get(_P.HEIGHT), sw, sh, pic.get(_P.SIZE), output)
        if problem:
            raise _param(problem)
        device_range(stream, pic.get(_P.DATA), sw * sh, what)
        pics.append(pic)
    src, dst = pics
    half = (src.get(_P.WIDTH) // 2, src.get(_P.HEIGHT) // 2)
    if (dst.get(_P.WIDTH), dst.get(_P.HEIGHT)) != half:
        raise _param(f"pyr down: the output must be {half[0]}x{half[1]}, half the input")
    submit(stream, "vpc", pics, [_PYR_DOWN, 0, 1])


def vpc_make_border_async(channel: object, in_h: object, out_h: object, border: object,
                          stream: object) -> None:
    """Mirrors ``acldvppVpcMakeBorderAsync``: the input with borders of the config's type
    (constant, replicate, reflect, reflect 101); the output is the input's size plus the
    borders. Does not block."""
    cfg = d.lookup(border, d.BorderConfig, "border config")
    values = [round(v) for v in cfg.values[:3]]
    _vpc(channel, stream, [in_h], [out_h], _BORDER, 0,
         rest=[cfg.border_type, cfg.top, cfg.bottom, cfg.left, cfg.right, *values])
