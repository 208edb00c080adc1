"""C bodies of the video calls of ``libacl_dvpp.so`` (``acl/ops/acl_dvpp.h``): stream
descriptors, VDEC and VENC channel descriptors (each field's setter and getter, and the
``Get/SetChannelDescParam`` forms, here with the image channel's
``acldvppSet/GetChannelDescParam``: the same pointer and length rules), frame configs and the
send-frame calls.

Each mirrors the C call of its name through ``acl.media`` (``host/media/vdec.py``,
``host/media/venc.py``), with the same checks and codes as a Python program; a getter of an
unknown handle returns the C type's default (0, NULL), a setter 100000. The program's C
callback runs as the real runtime runs it: on the C thread the channel names
(``aclvdecSetChannelDescThreadId`` / ``aclvencSetChannelDescThreadId``, a pthread id), from
inside that thread's ``aclrtProcessReport``, with the descriptors as pointers valid during the
call and the ``userData`` pointer the program passed to the send-frame call. It is called with
the GIL released (cffi's default), so it may call back into the runtime.
``aclvdecDestroyChannel`` and ``aclvencDestroyChannel`` block until the channel's thread has
called back for every frame; nothing else here waits for the card.

Imported by ``dvpp.py`` (the library's face) after its helpers exist; ``_ffi`` is that
library's FFI.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import media
from npuemu.host.capi import dvpp
from npuemu.host.capi.exports import export

_fields: Any = media  # its per-field calls are made in loops: type checkers do not see them


class CCallback:
    """A channel's C callback as the Python face calls it: ``(input, output, user_data)``
    with the descriptors as the face's int handles, passed on as the C pointer types."""

    def __init__(self, fn: Any, kinds: tuple[str, str]) -> None:
        self.fn, self.kinds = fn, kinds

    def __call__(self, first: int, second: int, user_data: Any) -> None:
        ffi = dvpp._ffi
        self.fn(ffi.cast(f"{self.kinds[0]} *", first), ffi.cast(f"{self.kinds[1]} *", second),
                ffi.NULL if user_data is None else user_data)


def _callback_calls(side: str, kinds: tuple[str, str]) -> None:
    """``acl<side>SetChannelDescCallback`` (NULL: 100000) and its getter (NULL unless a C
    callback was set)."""
    setter = getattr(media, f"{side}_set_channel_desc_callback")
    getter = getattr(media, f"{side}_get_channel_desc_callback")

    def set_callback(handle: Any, fn: Any) -> int:
        if fn == dvpp._ffi.NULL:
            return dvpp._invalid(f"acl{side}SetChannelDescCallback")
        return int(setter(dvpp._addr(handle), CCallback(fn, kinds)))

    def get_callback(handle: Any) -> Any:
        body = getter(dvpp._addr(handle))
        return body.fn if isinstance(body, CCallback) else dvpp._ffi.NULL

    set_callback.__name__ = set_callback.__qualname__ = f"acl{side}SetChannelDescCallback"
    get_callback.__name__ = get_callback.__qualname__ = f"acl{side}GetChannelDescCallback"
    export(set_callback)
    export(get_callback)


def _pointer_getter(name: str, fn: Any) -> None:
    def get(handle: Any) -> Any:
        return dvpp._ffi.cast("void *", fn(dvpp._addr(handle)))

    get.__name__ = get.__qualname__ = name
    export(get)


def _accessors(prefix: str, py_prefix: tuple[str, str],
               fields: tuple[tuple[str, str], ...]) -> None:
    """``<prefix>Set<C>`` / ``<prefix>Get<C>`` over the face's ``<py_prefix>set_/get_<py>``."""
    for c_name, py_name in fields:
        dvpp._handle_call(f"{prefix}Set{c_name}",
                          getattr(_fields, f"{py_prefix[0]}set_{py_prefix[1]}{py_name}"))
        dvpp._handle_call(f"{prefix}Get{c_name}",
                          getattr(_fields, f"{py_prefix[0]}get_{py_prefix[1]}{py_name}"))


# stream descriptors ----------------------------------------------------------------------------
dvpp._creator("acldvppCreateStreamDesc", "acldvppStreamDesc", media.dvpp_create_stream_desc)
dvpp._handle_call("acldvppDestroyStreamDesc", media.dvpp_destroy_stream_desc)
_accessors("acldvpp", ("dvpp_", "stream_desc_"),
           (("StreamDescSize", "size"), ("StreamDescFormat", "format"),
            ("StreamDescTimestamp", "timestamp"), ("StreamDescRetCode", "ret_code"),
            ("StreamDescEos", "eos")))
dvpp._handle_call("acldvppSetStreamDescData", _fields.dvpp_set_stream_desc_data, "p")
_pointer_getter("acldvppGetStreamDescData", _fields.dvpp_get_stream_desc_data)

# video decode ----------------------------------------------------------------------------------
def _channel_calls(side: str) -> None:
    """``acl<side>`` channel descriptor and frame config creators and destroyers, channel
    creation and destruction."""
    for kind, py in (("ChannelDesc", "channel_desc"), ("FrameConfig", "frame_config")):
        dvpp._creator(f"acl{side}Create{kind}", f"acl{side}{kind}",
                      getattr(media, f"{side}_create_{py}"))
        dvpp._handle_call(f"acl{side}Destroy{kind}", getattr(media, f"{side}_destroy_{py}"))
    for verb in ("create", "destroy"):
        dvpp._handle_call(f"acl{side}{verb.title()}Channel",
                          getattr(media, f"{side}_{verb}_channel"))


_channel_calls("vdec")
_accessors("aclvdec", ("vdec_", "channel_desc_"),
           (("ChannelDescChannelId", "channel_id"), ("ChannelDescThreadId", "thread_id"),
            ("ChannelDescEnType", "entype"), ("ChannelDescOutPicFormat", "out_pic_format"),
            ("ChannelDescOutPicWidth", "out_pic_width"),
            ("ChannelDescOutPicHeight", "out_pic_height"),
            ("ChannelDescRefFrameNum", "ref_frame_num"), ("ChannelDescOutMode", "out_mode"),
            ("ChannelDescBitDepth", "bit_depth")))
_callback_calls("vdec", ("acldvppStreamDesc", "acldvppPicDesc"))


# video encode ----------------------------------------------------------------------------------
_channel_calls("venc")
dvpp._handle_call("aclvencGetChannelDescChannelId", media.venc_get_channel_desc_channel_id)
_accessors("aclvenc", ("venc_", "channel_desc_"),
           (("ChannelDescThreadId", "thread_id"), ("ChannelDescEnType", "entype"),
            ("ChannelDescPicFormat", "pic_format"), ("ChannelDescPicWidth", "pic_width"),
            ("ChannelDescPicHeight", "pic_height"),
            ("ChannelDescKeyFrameInterval", "key_frame_interval"),
            ("ChannelDescBufSize", "buf_size"), ("ChannelDescRcMode", "rc_mode"),
            ("ChannelDescSrcRate", "src_rate"), ("ChannelDescMaxBitRate", "max_bit_rate")))
_accessors("aclvenc", ("venc_", "frame_config_"),
           (("FrameConfigForceIFrame", "force_i_frame"), ("FrameConfigEos", "eos")))
dvpp._handle_call("aclvencSetChannelDescBufAddr", _fields.venc_set_channel_desc_buf_addr, "p")
_pointer_getter("aclvencGetChannelDescBufAddr", _fields.venc_get_channel_desc_buf_addr)
_callback_calls("venc", ("acldvppPicDesc", "acldvppStreamDesc"))


def _send_call(name: str, fn: Any) -> None:
    """``name``'s body (``aclvdecSendFrame``, ``aclvdecSendSkippedFrame``,
    ``aclvencSendFrame``): ``fn`` with every pointer as the face's int but the last,
    ``userData``, which reaches the callback as the program passed it. Queues the frame and
    its callback; does not block."""

    def call(*args: Any) -> int:
        *pointers, user_data = args
        return int(fn(*map(dvpp._addr, pointers), user_data))

    call.__name__ = call.__qualname__ = name
    export(call)


for _name, _fn in (("aclvdecSendFrame", media.vdec_send_frame),
                   ("aclvdecSendSkippedFrame", media.vdec_send_skipped_frame),
                   ("aclvencSendFrame", media.venc_send_frame)):
    _send_call(_name, _fn)


# the Get/SetChannelDescParam forms: the value behind a pointer, sized by the type -------------
_VENC_CTYPES = {0: "uint64_t", 1: "aclvencCallback", 7: "void *"}
"""``aclvencChannelDescParamType`` -> the C type of its value (the others: ``uint32_t``)."""
_DVPP_CTYPES = {2: "uint64_t", 5: "int32_t"}
"""``acldvppChannelDescParamType`` -> the C type of its value (the others: ``uint32_t``)."""


def _param_ctype(side: str, param_type: int) -> str:
    table = {"venc": _VENC_CTYPES, "dvpp": _DVPP_CTYPES}.get(side, {})
    return table.get(param_type, "uint32_t")


def _set_param(side: str, handle: Any, param_type: int, length: int, param: Any) -> int:
    """``acl<side>SetChannelDescParam``: 100000 for a NULL ``param`` or a ``length`` below
    the type's size, then the face's setter of that field."""
    ffi, name = dvpp._ffi, f"acl{side}SetChannelDescParam"
    ctype = _param_ctype(side, param_type)
    if param == ffi.NULL or length < ffi.sizeof(ctype):
        return dvpp._invalid(name)
    value = ffi.cast(f"{ctype} *", param)[0]
    if ctype == "aclvencCallback":
        if value == ffi.NULL:
            return dvpp._invalid(name)
        value = CCallback(value, ("acldvppPicDesc", "acldvppStreamDesc"))
    elif ctype == "void *":
        value = dvpp._addr(value)
    if side == "vdec":
        return int(media.vdec_set_channel_desc_param(dvpp._addr(handle), param_type, value)[1])
    if side == "dvpp":
        return int(media.dvpp_set_channel_desc_param(dvpp._addr(handle), param_type, value)[1])
    return int(media.venc_set_channel_desc_param(dvpp._addr(handle), param_type, value))


def _get_param(side: str, handle: Any, param_type: int, length: int, ret_size: Any,
               param: Any) -> int:
    """``acl<side>GetChannelDescParam``: the field into ``*param`` and its size into
    ``*paramRetSize`` (100000 for NULL outputs, a short ``length``, an unknown handle or
    type, a callback that is not a C one)."""
    ffi, name = dvpp._ffi, f"acl{side}GetChannelDescParam"
    ctype = _param_ctype(side, param_type)
    if dvpp._null(ret_size, param) or length < ffi.sizeof(ctype):
        return dvpp._invalid(name)
    if side == "vdec":
        _size, value, ret = media.vdec_get_channel_desc_param(dvpp._addr(handle), param_type)
    elif side == "dvpp":
        _size, value, ret = media.dvpp_get_channel_desc_param(dvpp._addr(handle), param_type)
    elif ctype == "aclvencCallback":
        body = _fields.venc_get_channel_desc_callback(dvpp._addr(handle))
        if not isinstance(body, CCallback):
            return dvpp._invalid(name)
        value, ret = body.fn, 0
    else:
        value, ret = media.venc_get_channel_desc_param(dvpp._addr(handle), param_type)
    if ret == 0:
        ffi.cast(f"{ctype} *", param)[0] = ffi.cast("void *", value) if ctype == "void *" \
            else value
        ret_size[0] = ffi.sizeof(ctype)
    return int(ret)


def _param_calls(side: str) -> None:
    def set_param(handle: Any, param_type: int, length: int, param: Any) -> int:
        return _set_param(side, handle, param_type, length, param)

    def get_param(handle: Any, param_type: int, length: int, ret_size: Any, param: Any) -> int:
        return _get_param(side, handle, param_type, length, ret_size, param)

    set_param.__name__ = set_param.__qualname__ = f"acl{side}SetChannelDescParam"
    get_param.__name__ = get_param.__qualname__ = f"acl{side}GetChannelDescParam"
    export(set_param)
    export(get_param)


_param_calls("vdec")
_param_calls("venc")
_param_calls("dvpp")
