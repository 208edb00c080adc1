"""VDEC on the DVPP engine: H.264/H.265 decode of one channel's frames (``aclvdecSendFrame``,
``aclvdecSendSkippedFrame``), by FFmpeg through PyAV.

A ``vdec`` task (the table of ``device/exec/dvpp.py``) carries the channel's status record
(``shared/media.py``: ``VDEC_STATUS``) and the output picture (none for a skipped frame);
its parameters are the channel key, the input's address and size, the decoder
(``acldvppStreamFormat``), end of stream, whether the channel starts afresh (its first frame)
and whether it ends (``aclvdecDestroyChannel``). The decoder keeps frames back to reorder
them, as the hardware's default output mode does, so an output picture waits in the
channel's queue until a frame comes out for it: each decoded frame fills the oldest waiting
output (NV12 or NV21 at that picture's strides; the card writes its width and height, ret
code 0), a skipped frame's is dropped, and the status record counts the outputs delivered;
the host calls the program's callbacks for that many (``host/media/vdec.py``). End of
stream drains the decoder. A frame FFmpeg refuses, or an output buffer too small for the
frame, is delivered with a nonzero ret code; the task itself succeeds (the channel goes on,
as the hardware's does). Partial: damage FFmpeg conceals gives no error, and frames then
fill the oldest waiting outputs whichever input they came from.

Partial: output scaling (``out_pic_width``/``height`` other than the stream's size) is not
done (the frame is written at its own size if the picture holds it); 10-bit output, the
channel's reference frame count and out mode 1 (no reordering) are not emulated.

Threading model: ``_channels`` is touched only by the DVPP engine thread (every job runs
there); ``prepare`` (loop thread) only reads records and resolves addresses. A channel whose
client detached without destroying it stays until a channel of the same key starts afresh.
"""

from __future__ import annotations

import collections
import ctypes
from collections.abc import Callable
from typing import Any

import av

from npuemu.device import contracts
from npuemu.device.contracts import Card
from npuemu.device.exec import pictures
from npuemu.device.exec.pictures import DvppFailure, Picture
from npuemu.shared import media as m

_S = m.VDEC_STATUS
_P = m.PIC_DESC


class _Channel:
    """A decoder and the output pictures waiting for its frames (None: a skipped frame)."""

    def __init__(self, codec: str) -> None:
        self.codec = codec
        self.decoder: Any = av.CodecContext.create(codec, "r")
        self.waiting: collections.deque[Picture | None] = collections.deque()


_channels: dict[tuple[int, int], _Channel] = {}


def prepare(worker: Card, client: contracts.Client, pics: list[Picture],
            params: list[int]) -> Callable[[], None]:
    """Loop thread: check and resolve one ``vdec`` task; returns its job."""
    if len(params) != 7 or not 1 <= len(pics) <= 2:
        raise DvppFailure("vdec task: a status record, an output and 7 parameters")
    key, data, size, fmt, eos, fresh, end = params
    status, out = pics[0], (pics[1] if len(pics) == 2 else None)
    codec = m.VDEC_CODECS.get(fmt)  # type: ignore[call-overload]
    if codec is None:
        raise DvppFailure(f"stream format {fmt} is not an acldvppStreamFormat")
    blob = b""
    if size:
        blob = ctypes.string_at(worker.resolve(client, data, size), size)
    if out is not None:
        if out.fmt not in m.YUV420SP:
            raise DvppFailure(f"VDEC writes YUV420SP (1, 2), not format {out.fmt}")
        pictures.resolve(worker, client, out, out.size)
    channel_key = (client.slot, key)

    def job() -> None:
        if fresh or channel_key not in _channels:
            _channels[channel_key] = _Channel(codec)
        channel = _channels[channel_key]
        if end:
            _channels.pop(channel_key, None)
            return
        channel.waiting.append(out)
        _decode(channel, blob, eos, status.record)
        if eos:
            channel.decoder = av.CodecContext.create(channel.codec, "r")

    return job


def _decode(channel: _Channel, blob: bytes, eos: int, status: Any) -> None:
    frames: list[Any] = []
    try:
        if blob:
            frames += channel.decoder.decode(av.Packet(blob))
        if eos:
            frames += channel.decoder.decode(None)
    except av.error.FFmpegError:
        _deliver(channel, None, status)  # the picture of this input: failed
        return
    for frame in frames:
        _deliver(channel, frame, status)
    if eos:  # nothing more will come out: the pictures still waiting get nothing
        while channel.waiting:
            _deliver(channel, None, status)


def _deliver(channel: _Channel, frame: Any, status: Any) -> None:
    """Fill the oldest waiting picture with ``frame`` (None: mark it failed)."""
    if not channel.waiting:
        return  # more frames than pictures (a stream of several frames per input)
    pic = channel.waiting.popleft()
    if pic is not None:
        if frame is not None and _write(pic, frame):
            pic.record[_P.RET_CODE] = 0
        else:
            pic.fail()
    # counted last: the host may read the count while this task still runs, and calls back
    # for a picture only once its bytes and record are written
    status[_S.OUTPUTS] += 1


def _write(pic: Picture, frame: Any) -> bool:
    w, h = frame.width & ~1, frame.height & ~1
    sw, sh = pic.stride_w, pic.stride_h
    if sw < w or sh < h or sw % 16 or sh % 2 or pic.size < sw * sh * 3 // 2:
        return False
    nv12 = frame.to_ndarray(format="nv12")
    luma, chroma = pictures.yuv420_views(pic.addr, sw, sh, w, h)
    luma[:] = nv12[:h, :w]
    uv = nv12[frame.height:frame.height + h // 2, :w].reshape(h // 2, w // 2, 2)
    chroma[:] = uv if pic.fmt == m.NV12 else uv[:, :, ::-1]
    pic.record[_P.WIDTH], pic.record[_P.HEIGHT] = w, h
    return True
