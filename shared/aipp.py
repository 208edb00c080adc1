"""AIPP (the AI Core's image pre-processing): the dynamic parameter record and the pixel pipeline.

Both sides use this module: the host packs the dynamic AIPP record (``aclmdlSetInputAIPP``
writes it into the model's ``ascend_dynamic_aipp_data`` input) and compiles the ``Aipp`` op,
whose kernel (run by the card as the first task of the model) calls :func:`run`.

The record is CANN's ``kAippDynamicPara``: a 64-byte head (input format, CSC / swap switches,
batch count, source size, the 3x3 CSC matrix, output and input biases) then one 96-byte
``kAippDynamicBatchPara`` per batch (crop, scaling, padding switches and sizes, the mean as
int16, min and variance reciprocal as float16 bits). Little-endian, no padding beyond the
record's own reserved bytes: ``record_size(n) = 64 + 96 * n``.

The pipeline, per image, in the order the hardware applies it: channel swap
(``rbuv_swap_switch``: R/B or U/V; ``ax_swap_switch``: RGBA -> ARGB), crop, colour space
conversion, scaling, normalisation ``(x - mean - min) * var_reci``, padding, then the
model's NCHW layout. Details that are our choices (the hardware's are not documented):

* YUV420SP chroma is upsampled to every pixel by repetition (each UV pair serves its 2x2
  block), before the crop;
* CSC is integer: ``(M @ (p - input_bias)) >> 8`` for YUV inputs, ``((M @ p) >> 8) +
  output_bias`` for RGB inputs, clipped to 0..255 (the CANN formula with its ``>> 8``);
* scaling is bilinear with half-pixel centres on the (unrounded) pixel values;
* the normalised values are rounded to float16 (the AIPP output type) before the cast to
  the model's input dtype; padding writes ``padding_value`` in that output space.

Input formats computed: YUV420SP_U8, XRGB8888_U8, RGB888_U8, YUV400_U8 (those CANN supports
for both static and dynamic AIPP); the others are refused by the host. Pure functions of
numpy arrays; no threads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

YUV420SP_U8, XRGB8888_U8, RGB888_U8, YUV400_U8 = 1, 2, 3, 4
FORMAT_NAMES = {1: "YUV420SP_U8", 2: "XRGB8888_U8", 3: "RGB888_U8", 4: "YUV400_U8",
                5: "NC1HWC0DI_FP16", 6: "NC1HWC0DI_S8", 7: "ARGB8888_U8", 8: "YUYV_U8",
                9: "YUV422SP_U8", 10: "AYUV444_U8", 11: "RAW10", 12: "RAW12", 13: "RAW16",
                14: "RAW24"}
COMPUTED = frozenset({YUV420SP_U8, XRGB8888_U8, RGB888_U8, YUV400_U8})
CHANNELS = {YUV420SP_U8: 3, XRGB8888_U8: 4, RGB888_U8: 3, YUV400_U8: 1}
"""Channels each input format carries per pixel (after YUV420SP's chroma upsampling)."""

HEAD = struct.Struct("<BbbbbxxxII9h6x6B2x16x")
BATCH = struct.Struct("<bbbb4x4i4i4i4h4H4H16x")
HEAD_SIZE, BATCH_SIZE = HEAD.size, BATCH.size  # 64, 96
MAX_BATCH = 127
"""The record's ``batchNum`` is an int8."""


def record_size(batch: int) -> int:
    """Bytes of the dynamic record for ``batch`` images (``aclmdlGetAippDataSize``)."""
    return HEAD_SIZE + BATCH_SIZE * batch


def image_size(fmt: int, w: int, h: int) -> int:
    """Bytes of one ``w`` x ``h`` image in ``fmt`` (YUV420SP: ``w * h * 3 / 2``)."""
    if fmt == YUV420SP_U8:
        return w * h * 3 // 2
    return w * h * CHANNELS.get(fmt, 1)


@dataclass
class Batch:
    """One image's geometry and normalisation (a ``kAippDynamicBatchPara``)."""

    crop: bool = False
    crop_x: int = 0
    crop_y: int = 0
    crop_w: int = 0
    crop_h: int = 0
    resize: bool = False
    resize_w: int = 0
    resize_h: int = 0
    padding: bool = False
    pad_top: int = 0
    pad_bottom: int = 0
    pad_left: int = 0
    pad_right: int = 0
    mean: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    min: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    var_reci: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0, 1.0])
    padding_value: float = 0.0


@dataclass
class Params:
    """Everything AIPP applies to a batch of images (static: one Batch shared by all)."""

    fmt: int = YUV420SP_U8
    csc: bool = False
    rbuv_swap: bool = False
    ax_swap: bool = False
    src_w: int = 0
    src_h: int = 0
    matrix: list[int] = field(default_factory=lambda: [0] * 9)
    out_bias: list[int] = field(default_factory=lambda: [0, 0, 0])
    in_bias: list[int] = field(default_factory=lambda: [0, 0, 0])
    batches: list[Batch] = field(default_factory=lambda: [Batch()])


def _f16(value: float) -> int:
    return int(np.array(value, np.float16).view(np.uint16))


def _from_f16(bits: int) -> float:
    return float(np.array(bits, np.uint16).view(np.float16))


def pack(p: Params) -> bytes:
    """The ``kAippDynamicPara`` record of ``p`` (values already range-checked)."""
    out = bytearray(HEAD.pack(p.fmt, int(p.csc), int(p.rbuv_swap), int(p.ax_swap),
                              len(p.batches), p.src_w, p.src_h, *p.matrix, *p.out_bias,
                              *p.in_bias))
    for b in p.batches:
        out += BATCH.pack(int(b.crop), int(b.resize), int(b.padding), 0, b.crop_x, b.crop_y,
                          b.crop_w, b.crop_h, b.crop_w if b.crop else p.src_w,
                          b.crop_h if b.crop else p.src_h, b.resize_w, b.resize_h,
                          b.pad_top, b.pad_bottom, b.pad_left, b.pad_right, *b.mean,
                          *(_f16(v) for v in b.min), *(_f16(v) for v in b.var_reci))
    return bytes(out)


def unpack(record: bytes | np.ndarray) -> Params:
    """The Params a record holds; ValueError if it is shorter than its batch count needs."""
    data = np.ascontiguousarray(record, np.uint8).tobytes()
    if len(data) < HEAD_SIZE:
        raise ValueError(f"dynamic AIPP record of {len(data)} bytes (the head needs 64)")
    h = HEAD.unpack_from(data)
    n = h[4]
    if not 1 <= n <= MAX_BATCH or len(data) < record_size(n):
        raise ValueError(f"dynamic AIPP record of {len(data)} bytes for {n} batches")
    p = Params(h[0], bool(h[1]), bool(h[2]), bool(h[3]), h[5], h[6], list(h[7:16]),
               list(h[16:19]), list(h[19:22]), [])
    for k in range(n):
        v = BATCH.unpack_from(data, HEAD_SIZE + BATCH_SIZE * k)
        p.batches.append(Batch(bool(v[0]), v[4], v[5], v[6], v[7], bool(v[1]), v[10], v[11],
                               bool(v[2]), v[12], v[13], v[14], v[15], list(v[16:20]),
                               [_from_f16(x) for x in v[20:24]],
                               [_from_f16(x) for x in v[24:28]]))
    return p


def out_size(p: Params, b: Batch) -> tuple[int, int]:
    """``(h, w)`` of the image after crop, scaling and padding."""
    h, w = (b.crop_h, b.crop_w) if b.crop else (p.src_h, p.src_w)
    if b.resize:
        h, w = b.resize_h, b.resize_w
    if b.padding:
        h, w = h + b.pad_top + b.pad_bottom, w + b.pad_left + b.pad_right
    return h, w


def decode(raw: np.ndarray, fmt: int, w: int, h: int) -> np.ndarray:
    """``(h, w, channels)`` uint8 pixels of one raw image (YUV420SP: Y, U, V per pixel)."""
    if fmt == YUV420SP_U8:
        y = raw[:w * h].reshape(h, w)
        uv = raw[w * h:w * h * 3 // 2].reshape(h // 2, w // 2, 2)
        uv = uv.repeat(2, axis=0).repeat(2, axis=1)
        return np.concatenate([y[:, :, None], uv], axis=2)
    return raw[:image_size(fmt, w, h)].reshape(h, w, CHANNELS[fmt])


def _swap(px: np.ndarray, p: Params) -> np.ndarray:
    if p.ax_swap and px.shape[2] == 4:  # RGBA -> ARGB
        px = px[:, :, [3, 0, 1, 2]]
    if p.rbuv_swap and px.shape[2] >= 3:
        first = px.shape[2] - 3  # R/B of RGB (after X when there is one), U/V of YUV
        order = list(range(px.shape[2]))
        if p.fmt == YUV420SP_U8:
            order[1], order[2] = 2, 1
        else:
            order[first], order[first + 2] = first + 2, first
        px = px[:, :, order]
    return px


def _csc(px: np.ndarray, p: Params) -> np.ndarray:
    first = px.shape[2] - 3
    yuv = p.fmt == YUV420SP_U8
    planes = [px[:, :, first + k].astype(np.int32) - (p.in_bias[k] if yuv else 0)
              for k in range(3)]
    out = px.astype(np.float32)
    for row in range(3):
        m0, m1, m2 = p.matrix[3 * row:3 * row + 3]
        acc = (planes[0] * m0 + planes[1] * m1 + planes[2] * m2) >> 8
        if not yuv:
            acc += p.out_bias[row]
        out[:, :, first + row] = np.clip(acc, 0, 255)
    return out


def bilinear(img: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """``(h, w, c)`` -> ``(out_h, out_w, c)`` float32, bilinear, half-pixel centres."""
    h, w = img.shape[:2]
    src = img.astype(np.float32)

    def axis(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.clip((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (pos - lo).astype(np.float32)
    y0, y1, fy = axis(out_h, h)
    x0, x1, fx = axis(out_w, w)
    top = src[y0][:, x0] * (1 - fx)[None, :, None] + src[y0][:, x1] * fx[None, :, None]
    bot = src[y1][:, x0] * (1 - fx)[None, :, None] + src[y1][:, x1] * fx[None, :, None]
    out: np.ndarray = top * (1 - fy)[:, None, None] + bot * fy[:, None, None]
    return out


def one_image(raw: np.ndarray, p: Params, b: Batch, channels: int) -> np.ndarray:
    """The ``(channels, H, W)`` float16 AIPP output of one raw image."""
    px = _swap(decode(raw, p.fmt, p.src_w, p.src_h), p)
    if b.crop:
        px = px[b.crop_y:b.crop_y + b.crop_h, b.crop_x:b.crop_x + b.crop_w]
    if p.csc and px.shape[2] >= 3:
        px = _csc(px, p)
    img = bilinear(px, b.resize_h, b.resize_w) if b.resize else px.astype(np.float32)
    img = img[:, :, img.shape[2] - channels:]  # XRGB into 3 channels: R, G, B
    k = img.shape[2]
    mean = np.array(b.mean[:k], np.float32)
    low = np.array(b.min[:k], np.float32)
    var = np.array(b.var_reci[:k], np.float32)
    img = ((img - mean - low) * var).astype(np.float16)
    if b.padding:
        img = np.pad(img, ((b.pad_top, b.pad_bottom), (b.pad_left, b.pad_right), (0, 0)),
                     constant_values=np.float16(b.padding_value))
    return img.transpose(2, 0, 1)


def run(raw: np.ndarray, p: Params, out: np.ndarray, channels_last: bool = False) -> None:
    """AIPP of a batch: ``raw`` (uint8, the images one after another) into ``out`` (N, C,
    H, W; N, H, W, C when ``channels_last``). ValueError when a batch has no parameters or a
    result does not fit ``out``."""
    if channels_last:
        n, h, w, c = out.shape
    else:
        n, c, h, w = out.shape
    flat = np.ascontiguousarray(raw).reshape(-1)
    each = image_size(p.fmt, p.src_w, p.src_h)
    if flat.size < n * each:
        raise ValueError(f"AIPP input of {flat.size} bytes for {n} images of {each}")
    for i in range(n):
        if i >= len(p.batches):
            raise ValueError(f"no AIPP parameters for batch {i} ({len(p.batches)} given)")
        img = one_image(flat[i * each:(i + 1) * each], p, p.batches[i], c)
        if img.shape != (c, h, w):
            raise ValueError(f"AIPP output {img.shape} of batch {i}, the model takes "
                             f"{(c, h, w)}")
        out[i] = img.transpose(1, 2, 0) if channels_last else img


def as_attrs(p: Params) -> dict[str, Any]:
    """A static Params (one Batch for every image) as flat op attributes (scalars and lists
    of scalars, what an OM file's op references hold)."""
    b = p.batches[0]
    return {"input_format": p.fmt, "csc_switch": p.csc, "rbuv_swap_switch": p.rbuv_swap,
            "ax_swap_switch": p.ax_swap, "src_image_size": [p.src_w, p.src_h],
            "matrix": list(p.matrix), "output_bias": list(p.out_bias),
            "input_bias": list(p.in_bias),
            "crop": [int(b.crop), b.crop_x, b.crop_y, b.crop_w, b.crop_h],
            "resize": [int(b.resize), b.resize_w, b.resize_h],
            "padding": [int(b.padding), b.pad_top, b.pad_bottom, b.pad_left, b.pad_right],
            "mean_chn": list(b.mean), "min_chn": [float(v) for v in b.min],
            "var_reci_chn": [float(v) for v in b.var_reci],
            "padding_value": float(b.padding_value)}


def from_attrs(a: dict[str, Any], n: int) -> Params:
    """The Params of :func:`as_attrs`'s attributes, its Batch shared by ``n`` images."""
    crop, resize, pad = a["crop"], a["resize"], a["padding"]
    b = Batch(crop=bool(crop[0]), crop_x=crop[1], crop_y=crop[2], crop_w=crop[3],
              crop_h=crop[4], resize=bool(resize[0]), resize_w=resize[1], resize_h=resize[2],
              padding=bool(pad[0]), pad_top=pad[1], pad_bottom=pad[2], pad_left=pad[3],
              pad_right=pad[4], mean=list(a["mean_chn"]), min=list(a["min_chn"]),
              var_reci=list(a["var_reci_chn"]), padding_value=float(a["padding_value"]))
    w, h = a["src_image_size"]
    return Params(int(a["input_format"]), bool(a["csc_switch"]), bool(a["rbuv_swap_switch"]),
                  bool(a["ax_swap_switch"]), w, h, list(a["matrix"]), list(a["output_bias"]),
                  list(a["input_bias"]), [b] * n)
