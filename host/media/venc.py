"""VENC (``aclvenc*``): video encode channels and frame configs. The card's DVPP engine
encodes (x264/x265 through PyAV, ``device/exec/venc.py``); the program's callback,
``callback(input_pic_desc, output_stream_desc, user_data)``, runs on the thread it named
(``aclvencSetChannelDescThreadId``) from ``process_report``, once per picture sent, in order.

A channel has a stream of its own (created with the channel on the current device, its
reports subscribed to the channel's thread), a status block in pinned memory and an output
buffer in device memory (the program's, ``aclvencSetChannelDescBufAddr``/``BufSize``, or
one of ``VENC_DEFAULT_BUFFER`` bytes from ``dvpp_malloc``, freed with the channel). Each
``send_frame`` queues one ``venc`` task and, behind it, a callback for the channel's thread
that calls the program's callback for every frame encoded since, with a stream descriptor
(valid during the callback) holding the packet's device address and size in the output
buffer (size 0 and ret code 1 for a picture that could not be encoded), its ``eos`` set on
the last frame. ``destroy_channel`` waits (blocks) until the channel's thread has called
back for every picture.

Codes: 100000 for a bad handle, a channel without callback, thread, width or height, an
input picture that is not YUV420SP of the channel's size with strides a multiple of 16 and
2 in device memory of this process (checked at the call).

Threading model: ``_lock`` guards every channel's ``pending`` queue and ``delivered`` count;
the program's callback runs on its own thread with the lock released.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from npuemu.host.core import callbacks, memory, plog, runtime
from npuemu.host.core import stream as streams
from npuemu.host.media import desc as d
from npuemu.host.media import memory as dvpp_memory
from npuemu.host.media import ops
from npuemu.host.media import vdec as _vdec
from npuemu.shared import errors, logring
from npuemu.shared import media as m

_P = m.PIC_DESC
_lock = threading.Lock()
_keys = itertools.count(1)


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


@dataclass(eq=False)
class VencChannelDesc:
    """``aclvencChannelDesc`` and, once created, its channel."""

    thread_id: int = 0
    callback: Any = None
    en_type: int = int(m.StreamFormat.H265_MAIN_LEVEL)
    pic_format: int = int(m.NV12)
    pic_width: int = 0
    pic_height: int = 0
    key_frame_interval: int = 0
    buf_addr: int = 0
    buf_size: int = 0
    rc_mode: int = 0
    src_rate: int = 0
    max_bit_rate: int = 0
    ip_prop: int = 0
    stream: streams.Stream | None = None
    status: int = 0  # pinned block address
    owned_buffer: int = 0
    key: int = 0
    fresh: bool = False
    pending: deque[tuple[int, Any, int]] = field(default_factory=deque)
    delivered: int = 0


@dataclass(eq=False)
class VencFrameConfig:
    """``aclvencFrameConfig``: force an I frame, end of stream."""

    force_i_frame: int = 0
    eos: int = 0


def set_channel_field(handle: object, name: str, value: object) -> None:
    """One ``aclvencSetChannelDesc*`` setter."""
    chan = d.lookup(handle, VencChannelDesc, "venc channel descriptor")
    if name == "callback":
        if not callable(value):
            raise _param("the venc callback must be callable")
        chan.callback = value
        return
    number = runtime.index(value, errors.ACL_ERROR_INVALID_PARAM, name)
    wide = name in ("thread_id", "buf_addr")
    if not 0 <= number < 1 << (64 if wide else 32):
        raise _param(f"{name} {number} out of range")
    if name == "en_type" and number not in tuple(m.StreamFormat):
        raise _param(f"en_type {number} is not an acldvppStreamFormat")
    if name == "pic_format" and number not in m.YUV420SP:
        raise _param(f"VENC takes YUV420SP (1, 2), not format {number}")
    if name == "ip_prop" and number > 100:
        raise _param(f"ip_prop {number}: 0 (the default) or 1 to 100")
    setattr(chan, name, number)


PARAMS = ("thread_id", "callback", "pic_format", "en_type", "pic_width", "pic_height",
          "key_frame_interval", "buf_addr", "buf_size", "rc_mode", "src_rate", "max_bit_rate",
          "ip_prop")
"""The fields ``aclvencChannelDescParamType`` names, by value (``ACL_VENC_THREAD_ID_UINT64``
= 0 to ``ACL_VENC_MAX_IP_PROP_UINT32`` = 12)."""


def _param_field(param_type: object) -> str:
    number = runtime.index(param_type, errors.ACL_ERROR_INVALID_PARAM, "param type")
    if not 0 <= number < len(PARAMS):
        raise _param(f"{number} is not an aclvencChannelDescParamType (0 to {len(PARAMS) - 1})")
    return PARAMS[number]


def set_param(handle: object, param_type: object, value: object) -> None:
    """Mirrors ``aclvencSetChannelDescParam``: the setter of the field ``param_type``
    names, with its checks."""
    set_channel_field(handle, _param_field(param_type), value)


def get_param(handle: object, param_type: object) -> Any:
    """Mirrors ``aclvencGetChannelDescParam``: the field ``param_type`` names (the callback
    itself for ``ACL_VENC_CALLBACK_PTR``; pyACL raises ``RuntimeError`` when none is set)."""
    chan = d.lookup(handle, VencChannelDesc, "venc channel descriptor")
    name = _param_field(param_type)
    if name == "callback" and chan.callback is None:
        raise RuntimeError("did not set callback, failed")
    return getattr(chan, name)


def channel_id(handle: object) -> int:
    """Mirrors ``aclvencGetChannelDescChannelId``: the number the channel got at
    ``aclvencCreateChannel`` (npuemu numbers a process's VENC channels from 1 in creation
    order); 0 before the channel is created or for an unknown handle."""
    chan = d.getter(handle, VencChannelDesc, "stream", None)
    return d.getter(handle, VencChannelDesc, "key") if chan is not None else 0


def set_frame_field(handle: object, name: str, value: object) -> None:
    cfg = d.lookup(handle, VencFrameConfig, "venc frame config")
    number = runtime.index(value, errors.ACL_ERROR_INVALID_PARAM, name)
    if number not in (0, 1):
        raise _param(f"{name} {number} is not 0 or 1")
    setattr(cfg, name, number)


def create_channel(handle: object) -> None:
    """Mirrors ``aclvencCreateChannel`` (round trips: a stream, maybe an output buffer)."""
    chan = d.lookup(handle, VencChannelDesc, "venc channel descriptor")
    if chan.stream is not None:
        raise _param("the venc channel is already created")
    if chan.callback is None or not chan.thread_id:
        raise _param("a venc channel needs its callback and thread id first")
    if not (m.VDEC_MIN <= chan.pic_width <= m.VDEC_MAX and chan.pic_width % 2 == 0
            and m.VDEC_MIN <= chan.pic_height <= m.VDEC_MAX and chan.pic_height % 2 == 0):
        raise _param(f"venc picture {chan.pic_width}x{chan.pic_height}: even, "
                     f"{m.VDEC_MIN} to {m.VDEC_MAX}")
    stream = streams.create_stream()
    try:
        callbacks.subscribe_report(chan.thread_id, stream.handle)
        if not chan.buf_addr:
            chan.owned_buffer = dvpp_memory.dvpp_malloc(m.VENC_DEFAULT_BUFFER)
        else:
            ops.device_range(stream, chan.buf_addr, chan.buf_size, "venc output buffer")
    except errors.AclError:
        streams.destroy_stream(stream.handle)
        raise
    pinned, _staging = runtime.get().pools()
    chan.status = pinned.malloc(m.VENC_STATUS_BYTES)
    ctypes.memset(chan.status, 0, m.VENC_STATUS_BYTES)
    chan.stream, chan.key, chan.fresh, chan.delivered = stream, next(_keys), True, 0
    chan.pending.clear()


def _buffer(chan: VencChannelDesc) -> tuple[int, int]:
    if chan.owned_buffer:
        return chan.owned_buffer, m.VENC_DEFAULT_BUFFER
    return chan.buf_addr, chan.buf_size


def _task(chan: VencChannelDesc, records: list[d.PicDesc], end: int, force_i: int,
          eos: int) -> None:
    assert chan.stream is not None
    rt = runtime.get()
    assert rt.pinned is not None
    seg = rt.pinned.find(chan.status)
    assert seg is not None
    memory.pin(chan.stream.link, seg.address, seg)
    buf, size = _buffer(chan)
    ops.submit(chan.stream, "venc", records,
               [chan.key, int(chan.fresh), end, chan.en_type, chan.pic_width, chan.pic_height,
                chan.key_frame_interval, chan.max_bit_rate, force_i, eos, buf, size,
                chan.status])
    chan.fresh = False


def send_frame(handle: object, input_handle: object, _reserve: object, config: object,
               user_data: Any) -> None:
    """Mirrors ``aclvencSendFrame``: queues the picture's encode and the callback behind it.
    Does not block. No picture (``input`` 0) with a frame config whose ``eos`` is 1 ends the
    stream, as the samples end it: the encoder holds no frame back (zero latency), so it
    queues nothing and no callback follows (our choice: the reference shows the call, not
    whether it calls back); without ``eos`` it is 100000."""
    chan = d.lookup(handle, VencChannelDesc, "venc channel descriptor")
    if chan.stream is None:
        raise _param("the venc channel is not created (aclvencCreateChannel)")
    cfg = d.lookup(config, VencFrameConfig, "venc frame config") if config else \
        VencFrameConfig()
    if input_handle == 0 and cfg.eos == 1:
        return
    pic = d.lookup(input_handle, d.PicDesc, "venc input picture descriptor")
    fmt, w, h = pic.get(_P.FORMAT), pic.get(_P.WIDTH), pic.get(_P.HEIGHT)
    sw, sh, size = pic.get(_P.WIDTH_STRIDE), pic.get(_P.HEIGHT_STRIDE), pic.get(_P.SIZE)
    if fmt not in m.YUV420SP or (w, h) != (chan.pic_width, chan.pic_height) \
            or sw % 16 or sw < w or sh % 2 or sh < h or size < sw * sh * 3 // 2:
        raise _param(f"venc input: YUV420SP of {chan.pic_width}x{chan.pic_height} with "
                     f"strides a multiple of 16 and 2 and stride_w*stride_h*3/2 bytes, not "
                     f"format {fmt} {w}x{h} strides {sw}x{sh} size {size}")
    ops.device_range(chan.stream, pic.get(_P.DATA), size, "venc input")
    with _lock:
        chan.pending.append((int(input_handle), user_data, cfg.eos))  # type: ignore[call-overload]
    _task(chan, [pic], 0, cfg.force_i_frame, cfg.eos)
    callbacks.launch_callback(lambda _: _deliver(chan), None, 0, chan.stream.handle)


def _deliver(chan: VencChannelDesc) -> None:
    """On the channel's thread: the program's callback for every frame encoded since."""
    if not chan.status:
        return
    words = (ctypes.c_uint64 * (m.VENC_STATUS_BYTES // 8)).from_address(chan.status)
    buf, _size = _buffer(chan)
    while True:
        with _lock:
            if chan.delivered >= words[0] or not chan.pending:
                return
            entry = 8 + 2 * (chan.delivered % m.VENC_ENTRIES)
            offset, size = int(words[entry]), int(words[entry + 1])
            chan.delivered += 1
            input_handle, user_data, eos = chan.pending.popleft()
        out = _vdec.StreamDesc(data=buf + offset if size else 0, size=size,
                               format=chan.en_type, ret_code=0 if size else 1, eos=eos)
        handle = d.register(out)
        try:
            chan.callback(input_handle, handle, user_data)
        except Exception as exc:  # the program's bug must not stop its other frames
            plog.log(logring.ERROR, f"venc callback raised {type(exc).__name__}: {exc}",
                     module="DVPP")
        finally:
            d.destroy(handle, _vdec.StreamDesc, "stream descriptor")


def destroy_channel(handle: object) -> None:
    """Mirrors ``aclvencDestroyChannel``: waits (blocks) for the channel's callbacks, then
    ends the channel, its stream and the buffer it allocated."""
    chan = d.lookup(handle, VencChannelDesc, "venc channel descriptor")
    stream = chan.stream
    if stream is None:
        raise _param("the venc channel is not created")
    _task(chan, [], 1, 0, 0)
    callbacks.launch_callback(lambda _: _deliver(chan), None, 1, stream.handle)
    try:
        streams.synchronize_stream(stream.handle)
    finally:
        chan.stream = None
        try:
            callbacks.unsubscribe_report(chan.thread_id, stream.handle)
        finally:
            streams.destroy_stream(stream.handle)
            if chan.owned_buffer:
                dvpp_memory.dvpp_free(chan.owned_buffer)
                chan.owned_buffer = 0
            pinned, _staging = runtime.get().pools()
            pinned.free(chan.status)
            chan.status = 0
