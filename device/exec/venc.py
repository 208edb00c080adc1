"""VENC on the DVPP engine: H.264/H.265 encode of one channel's pictures
(``aclvencSendFrame``) by x264/x265 through PyAV, one packet per picture (``tune
zerolatency``: no lookahead, no B-frames, so every frame comes out with its own call).

A ``venc`` task carries the input picture (none for the channel's end) and, as
parameters, the channel key, whether it starts afresh, whether it ends, the encoder
(``acldvppStreamFormat``), width, height, key frame interval, maximum bit rate (kbit/s, 0:
the encoder's default), force-I-frame, end of stream, the channel's output buffer (device
address, size) and its status block (``shared/media.py``: ``VENC_STATUS_BYTES``). The packet
goes into the output buffer after the previous one (back to its start when it would run
past the end) and its (offset, size) into the status block's ring, then the count of
encoded frames grows: the host calls the program's callback for each
(``host/media/venc.py``). A picture that cannot be encoded (another size than the channel's,
not YUV420SP, a packet larger than the buffer) gets size 0 and the channel goes on.

Partial: rate control modes, the source frame rate and the I/P proportion are not applied
(x264/x265's defaults, the maximum bit rate as the target when set); a packet is valid until
the output buffer wraps onto it.

Threading model: ``_channels`` is touched only by the DVPP engine thread.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import av
import numpy as np

from npuemu.device import contracts
from npuemu.device.contracts import Card
from npuemu.device.exec import pictures
from npuemu.device.exec.pictures import DvppFailure, Picture
from npuemu.shared import media as m

_WORDS = ctypes.c_uint64 * (m.VENC_STATUS_BYTES // 8)


class _Channel:
    """An encoder and where its next packet goes in the output buffer."""

    def __init__(self, codec: str, width: int, height: int, gop: int, kbps: int) -> None:
        enc: Any = av.CodecContext.create(codec, "w")
        enc.width, enc.height, enc.pix_fmt = width, height, "yuv420p"
        enc.framerate = 30
        if gop:
            enc.gop_size = gop
        if kbps:
            enc.bit_rate = kbps * 1000
        enc.options = {"tune": "zerolatency"}
        self.encoder, self.cursor, self.pts = enc, 0, 0


_channels: dict[tuple[int, int], _Channel] = {}


def prepare(worker: Card, client: contracts.Client, pics: list[Picture],
            params: list[int]) -> Callable[[], None]:
    """Loop thread: check and resolve one ``venc`` task; returns its job."""
    if len(params) != 13 or len(pics) > 1:
        raise DvppFailure("venc task: at most one picture and 13 parameters")
    (key, fresh, end, fmt, width, height, gop, kbps, force_i, eos, buf, buf_size,
     status_addr) = params
    codec = m.VENC_CODECS.get(fmt)  # type: ignore[call-overload]
    if codec is None:
        raise DvppFailure(f"stream format {fmt} is not an acldvppStreamFormat")
    if not (m.VDEC_MIN <= width <= m.VDEC_MAX and m.VDEC_MIN <= height <= m.VDEC_MAX) \
            or width % 2 or height % 2 or gop > 65536 or kbps > 1 << 20:
        raise DvppFailure(f"venc channel of {width}x{height}, key frame interval {gop}, "
                          f"{kbps} kbit/s: even sizes of {m.VDEC_MIN} to {m.VDEC_MAX}")
    status = _WORDS.from_address(worker.resolve(client, status_addr, m.VENC_STATUS_BYTES))
    out = worker.resolve(client, buf, buf_size) if buf_size else 0
    pic = pics[0] if pics else None
    if pic is not None:
        pictures.resolve(worker, client, pic,
                         min(pic.size, pic.stride_w * pic.stride_h * 3 // 2))
    channel_key = (client.slot, key)

    def job() -> None:
        if end:
            _channels.pop(channel_key, None)
            return
        if fresh or channel_key not in _channels:
            _channels[channel_key] = _Channel(codec, width, height, gop, kbps)
        channel = _channels[channel_key]
        packet = b""
        if pic is not None:
            packet = _encode(channel, pic, width, height, force_i, eos)
        _publish(channel, status, out, buf_size, packet)

    return job


def _encode(channel: _Channel, pic: Picture, width: int, height: int, force_i: int,
            eos: int) -> bytes:
    if pic.fmt not in m.YUV420SP or (pic.width, pic.height) != (width, height) \
            or pic.stride_w < width or pic.stride_h < height \
            or pic.size < pic.stride_w * pic.stride_h * 3 // 2:
        return b""
    luma, chroma = pictures.yuv420_views(pic.addr, pic.stride_w, pic.stride_h, width, height)
    uv = chroma if pic.fmt == m.NV12 else chroma[:, :, ::-1]
    nv12 = av.VideoFrame.from_ndarray(
        _stack(luma, uv.reshape(height // 2, width)), format="nv12")
    nv12.pts = channel.pts
    channel.pts += 1
    if force_i:
        nv12.pict_type = av.video.frame.PictureType.I
    try:
        packets = list(channel.encoder.encode(nv12))
        if eos:
            packets += channel.encoder.encode(None)
    except av.error.FFmpegError:
        return b""
    return b"".join(bytes(p) for p in packets)


def _stack(luma: Any, chroma: Any) -> Any:
    return np.ascontiguousarray(np.concatenate([luma, chroma]))


def _publish(channel: _Channel, status: Any, out: int, buf_size: int, packet: bytes) -> None:
    """Write ``packet`` into the output buffer and its entry into the ring, then count it."""
    offset, size = 0, len(packet)
    if size > buf_size:
        size = 0
    elif size:
        if channel.cursor + size > buf_size:
            channel.cursor = 0
        offset = channel.cursor
        ctypes.memmove(out + offset, packet, size)
        channel.cursor += size
    n = status[0]
    entry = 8 + 2 * (n % m.VENC_ENTRIES)
    status[entry], status[entry + 1] = offset, size
    status[0] = n + 1  # counted last: the host reads the count while later tasks run
