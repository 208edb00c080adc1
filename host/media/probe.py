"""File header probes and size predictions: ``acldvppJpegGetImageInfo(V2)``,
``acldvppJpegPredictDecSize``, ``acldvppPngGetImageInfo``, ``acldvppPngPredictDecSize`` and
``acldvppJpegPredictEncSize``. They read the file on the host (Pillow parses the header only)
and never block on the card. The data may be host memory (as CANN documents) or device
memory of this process (as some samples pass: read through the host's mapping).

Codes: 100000 for a pointer or size that cannot be read, a file that is not a JPEG (PNG), an
output format outside ``acldvppPixelFormat``; 200006 for a format the emulated decoder does
not write (JPEGD: YUV420SP only; PNGD: RGB888 and RGBA8888).
"""

from __future__ import annotations

import io

from PIL import Image, JpegImagePlugin

from npuemu.host.core import hostread, memory
from npuemu.host.media import desc as d
from npuemu.shared import address, errors
from npuemu.shared import media as m


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def read(data: object, size: object, what: str) -> bytes:
    """The bytes of ``[data, data+size)`` from host or device memory; 100000 if refused."""
    if type(data) is int and type(size) is int and size > 0 and address.is_device_ptr(data):
        try:
            return bytes(memory.host_view(data, size))
        except errors.AclError as err:
            raise _param(f"{what}: {err}") from None
    return hostread.read(data, size, what)


def _open(blob: bytes, kind: str, what: str) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(blob))
    except Exception as err:  # Pillow raises several unrelated types for bad files
        raise _param(f"{what}: not a {kind} file ({err})") from None
    if image.format != kind:
        raise _param(f"{what}: a {image.format} file, not {kind}")
    return image


_SAMPLING = {0: m.JpegFormat.ACL_JPEG_CSS_444, 1: m.JpegFormat.ACL_JPEG_CSS_422,
             2: m.JpegFormat.ACL_JPEG_CSS_420}


def jpeg_info(data: object, size: object) -> tuple[int, int, int, int]:
    """``(width, height, components, acldvppJpegFormat)`` of a JPEG's header."""
    image = _open(read(data, size, "jpeg_get_image_info"), "JPEG", "jpeg_get_image_info")
    width, height = image.size
    components = len(image.getbands())
    if image.mode == "L":
        return width, height, 1, m.JpegFormat.ACL_JPEG_CSS_GRAY
    fmt = _SAMPLING.get(JpegImagePlugin.get_sampling(image), m.JpegFormat.ACL_JPEG_CSS_UNKNOWN)
    layers = getattr(image, "layer", [])  # the JPEG plugin's (id, h, v, table) per component
    if fmt == m.JpegFormat.ACL_JPEG_CSS_UNKNOWN and len(layers) == 3:
        h0, v0 = layers[0][1:3]
        if (h0, v0) == (1, 2):
            fmt = m.JpegFormat.ACL_JPEG_CSS_440
        elif (h0, v0) == (4, 1):
            fmt = m.JpegFormat.ACL_JPEG_CSS_411
    return width, height, components, fmt


def _format(fmt: object, allowed: frozenset[int], what: str) -> int:
    number = d._u32(fmt, "pixel format")
    if number not in m.PIXEL_FORMAT_VALUES:
        raise _param(f"{what}: {number} is not an acldvppPixelFormat")
    if number not in allowed:
        raise errors.error_for(errors.ACL_ERROR_FEATURE_UNSUPPORTED,
                               f"{what}: output format {number} is not emulated (YUV420SP "
                               "NV12/NV21 for JPEG, RGB888/RGBA8888 for PNG)")
    return number


def jpeg_predict_dec_size(data: object, size: object, fmt: object) -> int:
    """Bytes a JPEGD output of ``fmt`` needs: ``stride_w * stride_h * 3 / 2`` with the
    width rounded up to 64 and the height to 16 (``shared/media.py``)."""
    _format(fmt, m.YUV420SP, "jpeg_predict_dec_size")
    width, height, _c, _f = jpeg_info(data, size)
    return m.jpegd_geometry(width, height)[4]


def png_info(data: object, size: object) -> tuple[int, int, int]:
    """``(width, height, components)`` of a PNG's header."""
    image = _open(read(data, size, "png_get_image_info"), "PNG", "png_get_image_info")
    components = len(image.getbands()) if image.mode != "P" else (
        4 if "transparency" in image.info else 3)
    return image.size[0], image.size[1], components


def png_predict_dec_size(data: object, size: object, fmt: object) -> int:
    """Bytes a PNGD output of ``fmt`` needs (width rounded up to 128, times 3 or 4; height
    rounded up to 16)."""
    number = _format(fmt, frozenset((m.RGB888, m.RGBA8888)), "png_predict_dec_size")
    width, height, _c = png_info(data, size)
    return m.pngd_geometry(width, height, number)[4]


def jpeg_predict_enc_size(pic_handle: object, config: object) -> int:
    """Bytes a JPEGE output may take (``shared/media.py``: ``jpege_predict_size``)."""
    pic = d.lookup(pic_handle, d.PicDesc, "picture descriptor")
    d.lookup(config, d.JpegeConfig, "JPEGE config")
    P = m.PIC_DESC
    if pic.get(P.FORMAT) not in m.YUV420SP:
        raise _param(f"jpeg_predict_enc_size: JPEGE takes YUV420SP, not format "
                     f"{pic.get(P.FORMAT)}")
    sw, sh = pic.get(P.WIDTH_STRIDE), pic.get(P.HEIGHT_STRIDE)
    if not sw or not sh:
        raise _param("jpeg_predict_enc_size: the picture's strides are not set")
    return m.jpege_predict_size(sw, sh)
