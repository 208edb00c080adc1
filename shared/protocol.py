"""Wire protocol between a host client and a device worker (frames on the rings).

Every frame is one msgpack array (never a dict, never pickle).

Request (host -> device, submission ring): ``[op, seq, arg0, arg1, ...]``
  ``seq`` > 0 asks for a reply carrying the same ``seq``; ``seq`` == 0 is fire-and-forget
  (the worker reports a failure in its device log and in ``bad_frames``, never by reply).
Reply (device -> host, completion ring): ``[seq, ret, result0, ...]``; ``ret`` is an ACL code
  (0 = success); on failure the only result is a detail string.

| op          | args                          | results                 | notes             |
|-------------|-------------------------------|-------------------------|-------------------|
| PING        |                               | device monotonic ns     | round-trip probe  |
| MALLOC      | size, policy                  | ptr, span, page_class   | aclrtMalloc       |
| FREE        | ptr                           |                         | aclrtFree (async) |
| MEM_INFO    | attr                          | free, total             | aclrtGetMemInfo   |
| COPY        | dst, src, count               |                         | D2D by the DMA engine |
| MEMSET      | ptr, value, count             |                         | by the DMA engine |
| SNAPSHOT    |                               | [[ptr, span, class, client], ...] | live allocations |

``PROTOCOL_VERSION`` is written in every region header; a worker rejects a client whose
version differs (client slot state REJECTED), so mixed installs fail at attach, not later.
"""

from __future__ import annotations

import enum

import msgpack

PROTOCOL_VERSION = 1


class Op(enum.IntEnum):
    PING = 1
    MALLOC = 2
    FREE = 3
    MEM_INFO = 4
    COPY = 5
    MEMSET = 6
    SNAPSHOT = 7


_packer = msgpack.Packer(autoreset=True, use_bin_type=True)


def pack(frame: list | tuple) -> bytes:
    """Encode one frame (not thread-safe: one caller at a time per process side)."""
    return _packer.pack(frame)


def unpack(payload: bytes) -> tuple:
    """Decode one frame; raises ValueError for anything that is not a non-empty array."""
    try:
        frame = msgpack.unpackb(payload, use_list=False, raw=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise ValueError(f"undecodable frame: {err}") from err
    if not isinstance(frame, tuple) or not frame:
        raise ValueError(f"frame is not a non-empty array: {frame!r}")
    return frame
