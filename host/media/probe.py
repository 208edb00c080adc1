"""File header probes and size predictions: ``acldvppJpegGetImageInfo(V2)``,
``acldvppJpegPredictDecSize``, ``acldvppPngGetImageInfo``, ``acldvppPngPredictDecSize`` and
``acldvppJpegPredictEncSize``. They read the file on the host (Pillow parses the header only)
and never block on the card. The data may be host memory (as CANN documents) or device
memory of this process (as some samples pass: read through the host's mapping).

Codes: 100000 for a pointer or size that cannot be read, a file that is not a JPEG (PNG), an
output format outside ``acldvppPixelFormat`` or one the file does not decode to; 200006 for
a format the decoder never writes (JPEGD writes the semi-planar YUV formats, YUV400 and
UNKNOWN; PNGD RGB888 and RGBA8888).
"""

from __future__ import annotations

import io

from PIL import Image

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


def jpeg_info(data: object, size: object) -> tuple[int, int, int, int]:
    """``(width, height, components, acldvppJpegFormat)`` of a JPEG's header: the frame
    header's width and height, before the EXIF orientation JPEGD applies (CANN's
    documentation does not say which the probe gives; our choice)."""
    return _jpeg_info(_jpeg(data, size, "jpeg_get_image_info"))


def _jpeg(data: object, size: object, what: str) -> Image.Image:
    return _open(read(data, size, what), "JPEG", what)


def _jpeg_info(image: Image.Image) -> tuple[int, int, int, int]:
    width, height = image.size
    components = len(image.getbands())
    layers = getattr(image, "layer", [])  # the JPEG plugin's (id, h, v, table) per component
    return width, height, components, m.jpeg_css([(layer[1], layer[2]) for layer in layers])


def _format(fmt: object, allowed: frozenset[int], what: str) -> int:
    number = d._u32(fmt, "pixel format")
    if number not in m.PIXEL_FORMAT_VALUES:
        raise _param(f"{what}: {number} is not an acldvppPixelFormat")
    if number not in allowed:
        raise errors.error_for(errors.ACL_ERROR_FEATURE_UNSUPPORTED,
                               f"{what}: output format {number} is not one the decoder writes "
                               "(JPEG: YUV420SP, YUV422SP, YUV440SP, YUV444SP, YUV400 or "
                               "UNKNOWN; PNG: RGB888, RGBA8888)")
    return number


def jpeg_predict_dec_size(data: object, size: object, fmt: object) -> int:
    """Bytes a JPEGD output of ``fmt`` needs for this file (``shared/media.py``:
    ``jpegd_output`` and ``jpegd_geometry``: the width rounded up to 64 and the height to
    16, times 3/2, 2, 3 or 1 by the format; UNKNOWN: the file's own sampling), of the
    picture turned by its EXIF orientation as JPEGD turns it. 100000 for a
    format the file does not decode to (a 4:2:0 file as YUV444SP, a 4:1:1 file)."""
    number = _format(fmt, m.JPEGD_FORMATS, "jpeg_predict_dec_size")
    image = _jpeg(data, size, "jpeg_predict_dec_size")
    width, height, _c, css = _jpeg_info(image)
    written = m.jpegd_output(css, number)
    if written is None:
        raise _param(f"jpeg_predict_dec_size: a {m.JpegFormat(css).name} JPEG does not decode "
                     f"to format {number}")
    width, height = m.oriented(width, height, m.exif_orientation(image))
    return m.jpegd_geometry(width, height, written)[4]



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
