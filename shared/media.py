"""DVPP image processing (``acl_dvpp.h``): enumerations, the picture record both sides read,
and the geometry rules of JPEGD, JPEGE, PNGD and VPC on the emulated SoC (Atlas A2, i.e.
the Ascend910B profiles).

Enumerations carry the exact names and values of ``acl_dvpp.h`` (``acldvppPixelFormat``,
``acldvppStreamFormat``, ``acldvppChannelMode``, ``acldvppBorderType``,
``acldvppJpegFormat``). ``PIC_DESC`` is the byte layout of an ``acldvppPicDesc`` as the host
keeps it in pinned host memory: the host's setters write it, the card reads it when a task
starts and writes back what a decode found (width, height, strides, size) and the ret code,
so a descriptor follows the stream's order as the real runtime's device-side copy does.

Geometry (CANN's tables for the Atlas A2 inference and training products):

* JPEGD applies the file's EXIF orientation (turns a quarter, a half, or mirrors), the
  geometry below being the turned picture's. Output YUV420SP (NV12/NV21) from any 4:4:4,
  4:2:2, 4:2:0, 4:4:0 or grey file, YUV400 from a grey one (our choice), the
  file's own YUV444SP, YUV422SP or YUV440SP (either chroma order) from such a file; UNKNOWN
  for the file's own, V first. Width and height rounded down to even (YUV444SP: kept);
  width stride the width rounded up to 64, height stride the height rounded up to 16;
  buffer at least ``stride_w * stride_h`` times 3/2 (YUV420SP), 2 (YUV422SP, YUV440SP) or 3
  (YUV444SP). Input 32x32 to 8192x8192, baseline Huffman only.
* PNGD output RGB888 (RGBA8888): width stride the width rounded up to 128, times 3 (4);
  height stride the height rounded up to 16; buffer ``stride_w * stride_h``. 32x32 to
  4096x4096.
* JPEGE input YUV420SP: even width and height, width stride a multiple of 16, height stride
  the height or a multiple of 16; buffer ``stride_w * stride_h * 3 / 2``; 32x32 to 8192x8192.
* VPC input and output: width stride a multiple of 16 (YUV400/YUV420SP: of the width;
  RGB888/BGR888: of ``width * 3``), at least 32 and at most 16384; height stride a multiple
  of 2, at most 4096 (minimum 6); input 32x6 to 4096x4096, output 10x6 to 4096x4096; a
  resize scales by 1/32 to 16 in each direction.

The DVPP memory rule of ``acldvppMalloc``: the size is rounded up to 32 bytes and 32 more are
added (``dvpp_block_size``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from npuemu.shared.layout import Field, Layout


class PixelFormat(IntEnum):
    """acldvppPixelFormat (the members this emulator names; every value of the header is
    accepted by a setter, see ``PIXEL_FORMAT_VALUES``)."""

    PIXEL_FORMAT_YUV_400 = 0
    PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1
    PIXEL_FORMAT_YVU_SEMIPLANAR_420 = 2
    PIXEL_FORMAT_YUV_SEMIPLANAR_422 = 3
    PIXEL_FORMAT_YVU_SEMIPLANAR_422 = 4
    PIXEL_FORMAT_YUV_SEMIPLANAR_444 = 5
    PIXEL_FORMAT_YVU_SEMIPLANAR_444 = 6
    PIXEL_FORMAT_YUYV_PACKED_422 = 7
    PIXEL_FORMAT_UYVY_PACKED_422 = 8
    PIXEL_FORMAT_YVYU_PACKED_422 = 9
    PIXEL_FORMAT_VYUY_PACKED_422 = 10
    PIXEL_FORMAT_YUV_PACKED_444 = 11
    PIXEL_FORMAT_RGB_888 = 12
    PIXEL_FORMAT_BGR_888 = 13
    PIXEL_FORMAT_ARGB_8888 = 14
    PIXEL_FORMAT_ABGR_8888 = 15
    PIXEL_FORMAT_RGBA_8888 = 16
    PIXEL_FORMAT_BGRA_8888 = 17
    PIXEL_FORMAT_YUV_SEMI_PLANNER_420_10BIT = 18
    PIXEL_FORMAT_YVU_SEMI_PLANNER_420_10BIT = 19
    PIXEL_FORMAT_YVU_PLANAR_420 = 20
    PIXEL_FORMAT_BGR_888_PLANAR = 70
    PIXEL_FORMAT_YUV_SEMIPLANAR_440 = 1000
    PIXEL_FORMAT_YVU_SEMIPLANAR_440 = 1001
    PIXEL_FORMAT_FLOAT32 = 1002
    PIXEL_FORMAT_UNKNOWN = 10000


PIXEL_FORMAT_VALUES = frozenset([*range(0, 41), *range(50, 55), *range(70, 85),
                                 1000, 1001, 1002, 10000])
"""Every value ``acl_dvpp.h`` defines (0..40 run on without gaps from 20, 50..54 Bayer,
70..84, 1000..1002, UNKNOWN)."""


class StreamFormat(IntEnum):
    """acldvppStreamFormat."""

    H265_MAIN_LEVEL = 0
    H264_BASELINE_LEVEL = 1
    H264_MAIN_LEVEL = 2
    H264_HIGH_LEVEL = 3


class ChannelMode(IntEnum):
    """acldvppChannelMode (OR-able: a channel may serve several)."""

    DVPP_CHNMODE_VPC = 1
    DVPP_CHNMODE_JPEGD = 2
    DVPP_CHNMODE_JPEGE = 4


ALL_CHANNEL_MODES = 7
"""What a channel serves when no mode was set (the default channel serves all)."""
PNGD_MODE = 8
"""Our bit for PNGD in a channel's mode mask: ``acl_dvpp.h`` names no PNGD mode, and a
channel created without a mode serves PNGD too."""


class ChannelDescParamType(IntEnum):
    """acldvppChannelDescParamType (``acldvppSet/GetChannelDescParam``)."""

    ACL_DVPP_CSC_MATRIX_UINT32 = 0
    ACL_DVPP_MODE_UINT32 = 1
    ACL_DVPP_CHANNEL_ID_UINT64 = 2
    ACL_DVPP_CHANNEL_HEIGHT_UINT32 = 3
    ACL_DVPP_CHANNEL_WIDTH_UINT32 = 4
    ACL_DVPP_JPEGD_PRECISION_MODE_ENUM = 5


class JpegdPrecisionMode(IntEnum):
    """acldvppJpegdPrecisionMode: how JPEGD rounds an odd side of a 4:2:0, 4:2:2 or 4:4:0
    output (the default is ``ACL_YUVOUT_ALIGN_DOWN_COMPAT``)."""

    ACL_YUVOUT_ALIGN_DOWN = 0
    ACL_YUVOUT_ALIGN_UP = 1
    ACL_YUVOUT_ALIGN_DOWN_COMPAT = 2


class BorderType(IntEnum):
    """acldvppBorderType."""

    BORDER_CONSTANT = 0
    BORDER_REPLICATE = 1
    BORDER_REFLECT = 2
    BORDER_REFLECT_101 = 3


class JpegFormat(IntEnum):
    """acldvppJpegFormat (chroma subsampling of a JPEG file)."""

    ACL_JPEG_CSS_444 = 0
    ACL_JPEG_CSS_422 = 1
    ACL_JPEG_CSS_420 = 2
    ACL_JPEG_CSS_GRAY = 3
    ACL_JPEG_CSS_440 = 4
    ACL_JPEG_CSS_411 = 5
    ACL_JPEG_CSS_UNKNOWN = 1000


class Interpolation(IntEnum):
    """Values of ``acldvppSetResizeConfigInterpolation``: 0 the default (bilinear on this
    SoC), 1 bilinear, 2 nearest neighbour (both as OpenCV computes them)."""

    DEFAULT = 0
    BILINEAR = 1
    NEAREST = 2


class VpcOp(IntEnum):
    """The VPC operation of a ``vpc`` task (its first parameter; our numbering)."""

    RESIZE = 0
    CROP = 1
    CROP_PASTE = 2
    CONVERT = 3
    BORDER = 4
    BATCH_CROP = 5
    PYR_DOWN = 6
    BATCH_CROP_BORDER = 7


class PIC_DESC(Layout, stride=8):
    title = "acldvppPicDesc record (pinned host memory; host setters, card tasks)"
    DATA = Field(1, "device address of the picture (acldvppSetPicDescData)")
    SIZE = Field(1, "buffer size in bytes")
    FORMAT = Field(1, "acldvppPixelFormat")
    WIDTH = Field(1, "width in pixels")
    HEIGHT = Field(1, "height in pixels")
    WIDTH_STRIDE = Field(1, "width stride in bytes")
    HEIGHT_STRIDE = Field(1, "height stride in rows")
    RET_CODE = Field(1, "result of the last task that wrote the picture (0 = success)")


class VDEC_STATUS(Layout, stride=8):
    title = "VDEC channel status record (pinned host memory; the card writes, the host reads)"
    OUTPUTS = Field(1, "output pictures delivered so far (frames, failed frames, skipped ones)")
    PAD = Field(7, "unused")


VDEC_CODECS = {StreamFormat.H265_MAIN_LEVEL: "hevc", StreamFormat.H264_BASELINE_LEVEL: "h264",
               StreamFormat.H264_MAIN_LEVEL: "h264", StreamFormat.H264_HIGH_LEVEL: "h264"}
"""FFmpeg's decoder of each ``acldvppStreamFormat``."""
VDEC_MIN, VDEC_MAX = 128, 4096
"""Output picture sizes VDEC writes (128x128 to 4096x4096)."""

VENC_STATUS_BYTES = 4096
"""A VENC channel's status block (pinned host memory, written by the card): word 0 counts
the encoded frames; then one (offset in the output buffer, size) pair per frame, a ring of
``VENC_ENTRIES`` (size 0: the frame was not encoded)."""
VENC_ENTRIES = (VENC_STATUS_BYTES // 8 - 8) // 2
VENC_DEFAULT_BUFFER = 8 << 20
"""Output buffer a VENC channel gets when the program sets none (our choice)."""
VENC_CODECS = {StreamFormat.H265_MAIN_LEVEL: "libx265", StreamFormat.H264_BASELINE_LEVEL:
               "libx264", StreamFormat.H264_MAIN_LEVEL: "libx264",
               StreamFormat.H264_HIGH_LEVEL: "libx264"}
"""The encoder of each ``acldvppStreamFormat`` (x264 / x265 through FFmpeg)."""

NV12 = PixelFormat.PIXEL_FORMAT_YUV_SEMIPLANAR_420
NV21 = PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_420
YUV400 = PixelFormat.PIXEL_FORMAT_YUV_400
RGB888 = PixelFormat.PIXEL_FORMAT_RGB_888
BGR888 = PixelFormat.PIXEL_FORMAT_BGR_888
RGBA8888 = PixelFormat.PIXEL_FORMAT_RGBA_8888
YUV420SP = frozenset((NV12, NV21))
VPC_FORMATS = frozenset((YUV400, NV12, NV21, RGB888, BGR888))
"""Pixel formats VPC takes and writes here (the hardware takes more: packed YUV422, YUV444,
ARGB..., not emulated: 200006)."""

JPEGD_MIN, JPEGD_MAX = 32, 8192
PNGD_MIN, PNGD_MAX = 32, 4096
JPEGE_MIN, JPEGE_MAX = 32, 8192
VPC_IN_MIN_W, VPC_IN_MIN_H, VPC_MAX = 32, 6, 4096
VPC_OUT_MIN_W, VPC_OUT_MIN_H = 10, 6
VPC_STRIDE_MIN, VPC_STRIDE_MAX = 32, 4096 * 4
VPC_SCALE_MIN, VPC_SCALE_MAX = 1 / 32, 16
JPEGD_DEC_RET_FAILED = 0x1
"""Ret code written into a picture whose task failed (our choice: the hardware's own values
are not documented; any nonzero value means failure)."""


def align_up(value: int, to: int) -> int:
    return -(-value // to) * to


def dvpp_block_size(size: int) -> int:
    """Bytes ``acldvppMalloc`` sets aside for ``size``: rounded up to 32, plus 32."""
    return align_up(size, 32) + 32


def bytes_per_pixel(fmt: int) -> int:
    """Bytes of one pixel in the width stride (1 for YUV400 and YUV420SP)."""
    return 3 if fmt in (RGB888, BGR888) else 4 if fmt == RGBA8888 else 1


def picture_bytes(fmt: int, stride_w: int, stride_h: int) -> int:
    """Buffer bytes of a picture of these strides (semi-planar: the luma plane and the
    chroma plane, 3/2, 2 or 3 times the luma's)."""
    if fmt in SUBSAMPLING:
        hs, vs = SUBSAMPLING[fmt]
        return stride_w * stride_h + 2 * stride_w * stride_h // (hs * vs)
    return stride_w * stride_h


YUV422SP = frozenset((PixelFormat.PIXEL_FORMAT_YUV_SEMIPLANAR_422,
                      PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_422))
YUV444SP = frozenset((PixelFormat.PIXEL_FORMAT_YUV_SEMIPLANAR_444,
                      PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_444))
YUV440SP = frozenset((PixelFormat.PIXEL_FORMAT_YUV_SEMIPLANAR_440,
                      PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_440))
V_FIRST = frozenset((NV21, PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_422,
                     PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_444,
                     PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_440))
"""Semi-planar formats whose chroma plane starts with V."""
UNKNOWN = PixelFormat.PIXEL_FORMAT_UNKNOWN
JPEGD_FORMATS = YUV420SP | YUV422SP | YUV444SP | YUV440SP | {YUV400, UNKNOWN}
"""Output formats a JPEGD call takes; which of them a file allows is ``jpegd_output``'s."""
SUBSAMPLING: dict[int, tuple[int, int]] = {
    **dict.fromkeys(YUV420SP, (2, 2)), **dict.fromkeys(YUV422SP, (2, 1)),
    **dict.fromkeys(YUV440SP, (1, 2)), **dict.fromkeys(YUV444SP, (1, 1))}
"""Chroma subsampling (horizontal, vertical) of each semi-planar format."""
_CSS = {(1, 1): JpegFormat.ACL_JPEG_CSS_444, (2, 1): JpegFormat.ACL_JPEG_CSS_422,
        (2, 2): JpegFormat.ACL_JPEG_CSS_420, (1, 2): JpegFormat.ACL_JPEG_CSS_440,
        (4, 1): JpegFormat.ACL_JPEG_CSS_411}
_SOURCE: dict[int, frozenset[PixelFormat]] = {
    JpegFormat.ACL_JPEG_CSS_444: YUV444SP, JpegFormat.ACL_JPEG_CSS_422: YUV422SP,
    JpegFormat.ACL_JPEG_CSS_440: YUV440SP, JpegFormat.ACL_JPEG_CSS_420: YUV420SP,
    JpegFormat.ACL_JPEG_CSS_GRAY: frozenset((YUV400,))}


def jpeg_css(sampling: list[tuple[int, int]]) -> JpegFormat:
    """The ``acldvppJpegFormat`` of a JPEG from each component's (horizontal, vertical)
    sampling factors in its frame header: one component is GRAY; three with chroma at 1x1
    are named by the luma's factors; anything else is UNKNOWN."""
    if len(sampling) == 1:
        return JpegFormat.ACL_JPEG_CSS_GRAY
    if len(sampling) != 3 or sampling[1] != (1, 1) or sampling[2] != (1, 1):
        return JpegFormat.ACL_JPEG_CSS_UNKNOWN
    return _CSS.get(sampling[0], JpegFormat.ACL_JPEG_CSS_UNKNOWN)


def jpegd_output(css: int, fmt: int) -> int | None:
    """The format JPEGD writes for a file of subsampling ``css`` asked for ``fmt``, or None
    where CANN's JPEGD refuses the pair. YUV420SP (NV12/NV21) comes from every file JPEGD
    reads (4:4:4, 4:2:2, 4:2:0, 4:4:0 and grey, whose chroma is 0x80); a file's own sampling
    (YUV444SP, YUV422SP, YUV440SP, either order) only from such a file; UNKNOWN gives the
    file's own sampling, V first (grey: NV21). A grey file also decodes to YUV400, its luma
    alone (CANN's format table as we have it shows no jpeg(400) row; our
    choice). 4:1:1 and other samplings are refused."""
    source = _SOURCE.get(css)
    if source is None:
        return None
    if fmt == UNKNOWN:
        return next((f for f in source if f in V_FIRST), NV21)
    if fmt in YUV420SP or fmt in source:
        return fmt
    return None


def jpegd_geometry(width: int, height: int, fmt: int = NV12) -> tuple[int, int, int, int, int]:
    """``(width, height, stride_w, stride_h, size)`` of a JPEGD output of ``fmt`` (a
    semi-planar format ``jpegd_output`` gives): width and height rounded down to even
    (YUV444SP: as they are), width stride the width rounded up to 64, height stride the
    height rounded up to 16; the buffer is 3/2 (YUV420SP), 2 (YUV422SP, YUV440SP) or 3
    (YUV444SP) times ``stride_w * stride_h``; YUV400: the width and height as they are, a
    buffer of ``stride_w * stride_h``."""
    keep = fmt in YUV444SP or fmt == YUV400
    w, h = (width, height) if keep else (width & ~1, height & ~1)
    sw, sh = align_up(width, 64), align_up(height, 16)
    return w, h, sw, sh, picture_bytes(fmt, sw, sh)


EXIF_ORIENTATION = 0x0112
"""The EXIF tag JPEGD reads the camera's orientation from (1 to 8; 1 is upright)."""
TRANSPOSED = frozenset((5, 6, 7, 8))
"""EXIF orientations whose picture is turned a quarter (its width and height swap)."""


def exif_orientation(image: Any) -> int:
    """The EXIF orientation JPEGD applies to a JPEG opened by Pillow (1, upright, when the
    file has none or a damaged one: JPEGD then turns nothing either)."""
    try:
        value = image.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # Pillow raises several unrelated types for a damaged EXIF block
        return 1
    return value if type(value) is int and 1 <= value <= 8 else 1


def oriented(width: int, height: int, orientation: int) -> tuple[int, int]:
    """The picture's width and height once JPEGD has applied its EXIF ``orientation``."""
    return (height, width) if orientation in TRANSPOSED else (width, height)


def pngd_geometry(width: int, height: int, fmt: int) -> tuple[int, int, int, int, int]:
    """``(width, height, stride_w, stride_h, size)`` of a PNGD RGB888/RGBA8888 output."""
    sw, sh = align_up(width, 128) * bytes_per_pixel(fmt), align_up(height, 16)
    return width, height, sw, sh, sw * sh


def jpege_predict_size(stride_w: int, stride_h: int) -> int:
    """What ``acldvppJpegPredictEncSize`` answers (our formula: CANN documents none):
    twice the raw YUV420SP picture plus 8 KiB of headers, enough for quality 100 on noise."""
    return stride_w * stride_h * 3 + 8192


def vpc_picture_problem(fmt: int, width: int, height: int, stride_w: int, stride_h: int,
                        size: int, output: bool) -> str:
    """Why a VPC picture breaks the rules above ("" if it does not). The caller maps a
    non-VPC format to 200006 (``vpc_format_supported``) before asking."""
    min_w, min_h = (VPC_OUT_MIN_W, VPC_OUT_MIN_H) if output else (VPC_IN_MIN_W, VPC_IN_MIN_H)
    side = "output" if output else "input"
    if not (min_w <= width <= VPC_MAX and min_h <= height <= VPC_MAX):
        return (f"{side} picture {width}x{height} outside {min_w}x{min_h} to "
                f"{VPC_MAX}x{VPC_MAX}")
    if fmt in YUV420SP and (width % 2 or height % 2):
        return f"YUV420SP {side} picture {width}x{height}: width and height must be even"
    row = width * bytes_per_pixel(fmt)
    if stride_w % 16 or stride_w < max(row, VPC_STRIDE_MIN) or stride_w > VPC_STRIDE_MAX:
        return (f"{side} width stride {stride_w}: a multiple of 16, at least "
                f"{max(row, VPC_STRIDE_MIN)} and at most {VPC_STRIDE_MAX}")
    if stride_h % 2 or stride_h < max(height, VPC_IN_MIN_H) or stride_h > VPC_MAX:
        return (f"{side} height stride {stride_h}: a multiple of 2, at least {height} and at "
                f"most {VPC_MAX}")
    need = picture_bytes(fmt, stride_w, stride_h)
    if size < need:
        return f"{side} buffer of {size} bytes; its strides need {need}"
    return ""


BATCH_BORDER_TYPES = (BorderType.BORDER_CONSTANT, BorderType.BORDER_REPLICATE)
"""The border types of ``acldvppVpcBatchCropResizeMakeBorderAsync``."""


def batch_border_problem(fmt: int, width: int, height: int, border_type: int, top: int,
                         bottom: int, left: int, right: int) -> str:
    """Why a border of ``acldvppVpcBatchCropResizeMakeBorderAsync`` does not fit its output
    picture ("" if it does): constant or replicate only, the area left inside the borders (the
    resized crop's size) at least a VPC output's smallest (10x6), every border even for
    YUV420SP (our choice, as VPC's make border)."""
    if border_type not in BATCH_BORDER_TYPES:
        return f"border type {border_type}: BORDER_CONSTANT (0) or BORDER_REPLICATE (1) only"
    inner_w, inner_h = width - left - right, height - top - bottom
    if inner_w < VPC_OUT_MIN_W or inner_h < VPC_OUT_MIN_H:
        return (f"borders {top}, {bottom}, {left}, {right} leave {inner_w}x{inner_h} of the "
                f"{width}x{height} output, under {VPC_OUT_MIN_W}x{VPC_OUT_MIN_H}")
    if fmt in YUV420SP and any(v % 2 for v in (top, bottom, left, right)):
        return f"borders {top}, {bottom}, {left}, {right} of a YUV420SP output: every one even"
    return ""


PYR_IN_MIN_W, PYR_IN_MIN_H, PYR_IN_MAX = 20, 12, 2048
"""Input sizes of ``acldvppVpcPyrDownAsync`` (20x12 to 2048x2048, YUV400 only)."""


def pyr_down_problem(fmt: int, width: int, height: int, stride_w: int, stride_h: int,
                     size: int, output: bool) -> str:
    """Why a picture of ``acldvppVpcPyrDownAsync`` breaks CANN's rules ("" if it does not):
    YUV400, an input of 20x12 to 2048x2048 (an output of half that), the width stride a
    multiple of 16 and at least the width, the height stride at least the height (no
    alignment), the buffer at least ``stride_w * stride_h``."""
    side = "output" if output else "input"
    if fmt != YUV400:
        return f"pyramid {side} format {fmt}: YUV400 (0) only"
    low_w, low_h, high = (PYR_IN_MIN_W, PYR_IN_MIN_H, PYR_IN_MAX)
    if output:
        low_w, low_h, high = low_w // 2, low_h // 2, high // 2
    if not (low_w <= width <= high and low_h <= height <= high):
        return f"pyramid {side} {width}x{height} outside {low_w}x{low_h} to {high}x{high}"
    if stride_w % 16 or stride_w < width or stride_h < height:
        return (f"pyramid {side} strides {stride_w}x{stride_h} for {width}x{height}: width "
                "stride a multiple of 16, both at least the picture's")
    if size < stride_w * stride_h:
        return f"pyramid {side} buffer of {size} bytes; its strides need {stride_w * stride_h}"
    return ""


def roi_problem(roi: list[int], width: int, height: int, what: str,
                paste: bool = False) -> str:
    """Why an ROI breaks VPC's rules ("" if it does not): left and top even, right and
    bottom odd, at least 10x6, inside the picture; a paste area's left offset a multiple
    of 16."""
    left, right, top, bottom = roi
    if paste and left % 16:
        return f"{what} {tuple(roi)}: its left offset must be a multiple of 16"
    if left % 2 or top % 2 or right % 2 == 0 or bottom % 2 == 0:
        return f"{what} {tuple(roi)}: left and top must be even, right and bottom odd"
    if right - left + 1 < 10 or bottom - top + 1 < 6:
        return f"{what} {tuple(roi)}: at least 10x6"
    if right >= width or bottom >= height:
        return f"{what} {tuple(roi)} runs past the {width}x{height} picture"
    return ""
