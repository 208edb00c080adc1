"""VDEC (``aclvdec*``): video decode channels, stream descriptors and frame configs. The card's
DVPP engine decodes (FFmpeg through PyAV, ``device/exec/vdec.py``); the program's callback
runs on the thread it named (``aclvdecSetChannelDescThreadId``) from ``process_report``, as
the real runtime calls it.

A channel has a stream of its own (created with the channel on the current device, its
reports subscribed to the channel's thread) and a status record in pinned memory. Each
``send_frame`` queues one ``vdec`` task and, behind it, a callback for the channel's thread;
that callback calls the program's callback, ``callback(input_stream_desc,
output_pic_desc, user_data)``, once for every output the card has delivered so far (the
status record's count), oldest first. The decoder keeps frames back to reorder them, so the
callback of a frame can come with a later ``send_frame``; an input with ``eos`` set drains
the decoder and every output still waiting is delivered (those that got no frame with a
nonzero ret code). ``send_skipped_frame`` decodes without output (its callback gets output
0). ``destroy_channel`` waits (blocks) until the channel's thread has called back for every
output, then ends the channel: called from that thread itself, it would wait for ever, as a
real channel's would.

Codes: 100000 for a bad handle, a channel without callback or thread, an input that is not
device memory of this process, an output that is not YUV420SP of 128x128 to 4096x4096 with
a width stride a multiple of 16 and an even height stride (checked at the call); 107000
from ``subscribe_report`` for a thread id that names no live thread.

Partial: see ``device/exec/vdec.py`` (video encode is ``venc.py``).

Threading model: ``_lock`` guards every channel's ``pending`` queue and ``delivered`` count;
the program's callback runs on its own thread with the lock released.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from npuemu.host.core import callbacks, plog, runtime
from npuemu.host.core import stream as streams
from npuemu.host.media import desc as d
from npuemu.host.media import ops
from npuemu.shared import errors, logring
from npuemu.shared import media as m

_P, _S = m.PIC_DESC, m.VDEC_STATUS
_lock = threading.Lock()
_keys = itertools.count(1)


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


@dataclass(eq=False)
class VdecChannelDesc:
    """``aclvdecChannelDesc`` and, once created, its channel."""

    channel_id: int = 0
    thread_id: int = 0
    callback: Any = None
    en_type: int = int(m.StreamFormat.H265_MAIN_LEVEL)
    out_pic_format: int = int(m.NV12)
    out_pic_width: int = 0
    out_pic_height: int = 0
    ref_frame_num: int = 0
    bit_depth: int = 0
    out_mode: int = 0
    csc_matrix: int = 0
    stream: streams.Stream | None = None
    status: d.PicDesc | None = None
    key: int = 0
    fresh: bool = False
    pending: deque[tuple[int, int, Any]] = field(default_factory=deque)
    delivered: int = 0


@dataclass(eq=False)
class StreamDesc:
    """``acldvppStreamDesc``: one input of a video decoder."""

    data: int = 0
    size: int = 0
    format: int = int(m.StreamFormat.H264_MAIN_LEVEL)
    timestamp: int = 0
    ret_code: int = 0
    eos: int = 0


@dataclass(eq=False)
class FrameConfig:
    """``aclvdecFrameConfig`` (nothing to configure here)."""


_FIELDS_U32 = ("channel_id", "en_type", "out_pic_format", "out_pic_width", "out_pic_height",
               "ref_frame_num", "bit_depth", "out_mode")


def set_channel_field(handle: object, name: str, value: object) -> None:
    """One ``aclvdecSetChannelDesc*`` setter (thread id: u64; callback: a callable)."""
    chan = d.lookup(handle, VdecChannelDesc, "vdec channel descriptor")
    if name == "callback":
        if not callable(value):
            raise _param("the vdec callback must be callable")
        chan.callback = value
        return
    if name == "thread_id":
        number = runtime.index(value, errors.ACL_ERROR_INVALID_PARAM, "thread id")
        if not 0 <= number < 1 << 64:
            raise _param(f"thread id {number} is not a uint64_t")
        chan.thread_id = number
        return
    number = d._u32(value, name)
    if name == "en_type" and number not in tuple(m.StreamFormat):
        raise _param(f"en_type {number} is not an acldvppStreamFormat")
    if name == "out_pic_format" and number not in m.YUV420SP:
        raise _param(f"VDEC writes YUV420SP (1, 2), not format {number}")
    if name == "channel_id" and number > 255:
        raise _param(f"channel id {number} not in [0, 255]")
    setattr(chan, name, number)


CSC_MATRICES = 6
"""``acldvppCscMatrix``: BT601 wide and narrow, BT709 wide and narrow, BT2020 wide and
narrow (0 to 5)."""


def set_param(handle: object, param_type: object, value: object) -> None:
    """Mirrors ``aclvdecSetChannelDescParam``: ``ACL_VDEC_CSC_MATRIX_UINT32`` (0), the only
    type, takes an ``acldvppCscMatrix``. The matrix converts YUV to RGB: VDEC writes YUV420SP
    here, so it is kept and read back, and changes no output."""
    chan = d.lookup(handle, VdecChannelDesc, "vdec channel descriptor")
    if runtime.index(param_type, errors.ACL_ERROR_INVALID_PARAM, "param type") != 0:
        raise _param(f"{param_type} is not an aclvdecChannelDescParamType (0)")
    number = d._u32(value, "csc matrix")
    if number >= CSC_MATRICES:
        raise _param(f"csc matrix {number} is not an acldvppCscMatrix (0 to 5)")
    chan.csc_matrix = number


def get_param(handle: object, param_type: object) -> tuple[int, int]:
    """Mirrors ``aclvdecGetChannelDescParam``: ``(size written, value)``, 4 bytes of the
    CSC matrix."""
    chan = d.lookup(handle, VdecChannelDesc, "vdec channel descriptor")
    if runtime.index(param_type, errors.ACL_ERROR_INVALID_PARAM, "param type") != 0:
        raise _param(f"{param_type} is not an aclvdecChannelDescParamType (0)")
    return 4, chan.csc_matrix


def create_channel(handle: object) -> None:
    """Mirrors ``aclvdecCreateChannel``: a stream on the current device (one round trip),
    subscribed to the channel's thread."""
    chan = d.lookup(handle, VdecChannelDesc, "vdec channel descriptor")
    if chan.stream is not None:
        raise _param("the vdec channel is already created")
    if chan.callback is None or not chan.thread_id:
        raise _param("a vdec channel needs its callback and thread id first")
    stream = streams.create_stream()
    try:
        callbacks.subscribe_report(chan.thread_id, stream.handle)
    except errors.AclError:
        streams.destroy_stream(stream.handle)
        raise
    chan.stream, chan.status = stream, d.lookup(d.create_pic_desc(), d.PicDesc, "status")
    chan.key, chan.fresh, chan.delivered = next(_keys), True, 0
    chan.pending.clear()


def send_frame(handle: object, input_handle: object, output_handle: object,
               config: object, user_data: Any, skipped: bool = False) -> None:
    """Mirrors ``aclvdecSendFrame`` (``aclvdecSendSkippedFrame`` with ``skipped``): queues
    the frame's decode and the callback behind it. Does not block."""
    chan = d.lookup(handle, VdecChannelDesc, "vdec channel descriptor")
    if chan.stream is None or chan.status is None:
        raise _param("the vdec channel is not created (aclvdecCreateChannel)")
    src = d.lookup(input_handle, StreamDesc, "stream descriptor")
    if config:
        d.lookup(config, FrameConfig, "vdec frame config")
    records = [chan.status]
    if not skipped:
        out = d.lookup(output_handle, d.PicDesc, "vdec output picture descriptor")
        _check_output(chan.stream, out)
        records.append(out)
    if src.size:
        ops.device_range(chan.stream, src.data, src.size, "vdec input")
    elif not src.eos:
        raise _param("a vdec input of 0 bytes that is not the end of stream")
    with _lock:
        chan.pending.append((int(input_handle),  # type: ignore[call-overload]
                             0 if skipped else int(output_handle),  # type: ignore[call-overload]
                             user_data))
    ops.submit(chan.stream, "vdec", records,
               [chan.key, src.data, src.size, chan.en_type, src.eos, int(chan.fresh), 0])
    chan.fresh = False
    callbacks.launch_callback(lambda _: _deliver(chan), None, 0, chan.stream.handle)


def _check_output(stream: streams.Stream, out: d.PicDesc) -> None:
    fmt, w, h = out.get(_P.FORMAT), out.get(_P.WIDTH), out.get(_P.HEIGHT)
    sw, sh, size = out.get(_P.WIDTH_STRIDE), out.get(_P.HEIGHT_STRIDE), out.get(_P.SIZE)
    if fmt not in m.YUV420SP:
        raise _param(f"VDEC writes YUV420SP (1, 2), not format {fmt}")
    if not (m.VDEC_MIN <= w <= m.VDEC_MAX and m.VDEC_MIN <= h <= m.VDEC_MAX):
        raise _param(f"vdec output {w}x{h} outside {m.VDEC_MIN}x{m.VDEC_MIN} to "
                     f"{m.VDEC_MAX}x{m.VDEC_MAX}")
    if sw % 16 or sw < w or sh % 2 or sh < h or size < sw * sh * 3 // 2:
        raise _param(f"vdec output strides {sw}x{sh} and size {size} for {w}x{h}: width "
                     "stride a multiple of 16, height stride even, size stride_w*stride_h*3/2")
    ops.device_range(stream, out.get(_P.DATA), size, "vdec output")


def _deliver(chan: VdecChannelDesc) -> None:
    """On the channel's thread: the program's callback for every output delivered since."""
    status = chan.status
    if status is None:
        return
    while True:
        with _lock:
            if chan.delivered >= status.get(_S.OUTPUTS) or not chan.pending:
                return
            chan.delivered += 1
            input_handle, output_handle, user_data = chan.pending.popleft()
        try:
            chan.callback(input_handle, output_handle, user_data)
        except Exception as exc:  # the program's bug must not stop its other frames
            plog.log(logring.ERROR, f"vdec callback raised {type(exc).__name__}: {exc}",
                     module="DVPP")


def destroy_channel(handle: object) -> None:
    """Mirrors ``aclvdecDestroyChannel``: waits for the channel's frames (blocks, bounded
    by the card's liveness), then ends the channel and its stream."""
    chan = d.lookup(handle, VdecChannelDesc, "vdec channel descriptor")
    stream, status = chan.stream, chan.status
    if stream is None or status is None:
        raise _param("the vdec channel is not created")
    ops.submit(stream, "vdec", [status], [chan.key, 0, 0, chan.en_type, 0, 0, 1])
    # a blocking callback last: the stream (and so this wait) ends once the channel's thread
    # has called back for every output
    callbacks.launch_callback(lambda _: _deliver(chan), None, 1, stream.handle)
    try:
        streams.synchronize_stream(stream.handle)
    finally:
        chan.stream = chan.status = None
        try:
            callbacks.unsubscribe_report(chan.thread_id, stream.handle)
        finally:
            streams.destroy_stream(stream.handle)
            d.destroy_pic_desc(status.addr)


def set_stream_field(handle: object, name: str, value: object) -> None:
    """One ``acldvppSetStreamDesc*`` setter."""
    desc = d.lookup(handle, StreamDesc, "stream descriptor")
    number = runtime.index(value, errors.ACL_ERROR_INVALID_PARAM, name)
    limit = 1 << (64 if name in ("data", "timestamp") else 8 if name == "eos" else 32)
    if not 0 <= number < limit:
        raise _param(f"{name} {number} out of range")
    if name == "format" and number not in tuple(m.StreamFormat):
        raise _param(f"stream format {number} is not an acldvppStreamFormat")
    setattr(desc, name, number)
