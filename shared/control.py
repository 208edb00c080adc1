"""Control channel between host processes (and the CLI) and a node's supervisor.

An abstract Unix stream socket named ``\\0npuemu.<node>`` (no file, gone when the supervisor
dies). Messages are ``u32 length`` + a msgpack array, both ways. The data plane never uses it:
it carries node management only (hello, attach a client slot, detach, stop). A host keeps
its connection open for as long as it uses the node, so the supervisor learns of a host's
death from the EOF and reclaims what it had.

| request                   | reply                                                      |
|---------------------------|------------------------------------------------------------|
| ``["hello", pid, owner]`` | ``[0, devices, hbm, ddr, soc, version]``                   |
| ``["attach", dev]``       | ``[0, slot]`` or ``[code, detail]`` (starts the worker)    |
| ``["detach", dev, slot]`` | ``[0]``                                                    |
| ``["stop"(, force)]``     | ``[0]``, then the node stops; or, when other programs are  |
|                           | attached and ``force`` is not set, ``[code, detail, pids]``|
| (refused at connect)      | ``[207006, detail]``, then the connection is closed        |

Who may talk (an abstract socket has no file permissions, so the kernel's word is used):

- the supervisor reads each peer's pid and uid with ``SO_PEERCRED`` at accept and serves
  only the uid it runs as — the node owner's. Root is served only when the owner is root;
  root does not get into another user's node (nor does anyone else);
- the pid a ``hello`` carries is ignored: the peer's pid is the kernel's;
- every request is checked against ``SCHEMA`` (verb, argument count and types) by
  :func:`validate`; anything else — undecodable bytes, a non-array, a wrong type, an
  over-long length — raises :class:`BadMessage`, and the supervisor closes that connection
  only;
- :func:`connect` checks the other way too: the socket must be served by this user's uid,
  so a name squatted by another user is refused (``PermissionError``).
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

import msgpack

_LEN = struct.Struct("<I")
_CRED = struct.Struct("3i")
MAX_MESSAGE = 1 << 16
"""Longest control message either side accepts (requests are a few dozen bytes)."""

SCHEMA: dict[str, tuple[tuple[type, ...], ...]] = {
    "hello": ((int,), (bool, int)),
    "attach": ((int,),),
    "detach": ((int,), (int,)),
    "stop": ((bool, int),),
}
"""Arguments of each request verb: the allowed types of each, in order. ``stop``'s ``force``
argument may be left out."""

_OPTIONAL_FROM = {"stop": 0}

Message = tuple[Any, ...]
"""A decoded control message: the verb (or a reply's status) first, then its arguments."""


class BadMessage(ValueError):
    """A control message that does not decode or does not match ``SCHEMA``."""


def address(node: str) -> str:
    return f"\0npuemu.{node}"


def peer_cred(sock: socket.socket) -> tuple[int, int, int]:
    """``(pid, uid, gid)`` of the process at the other end, as the kernel recorded them when
    the connection was made (``SO_PEERCRED``)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    return _CRED.unpack(raw)


def connect(node: str, timeout: float | None = None) -> socket.socket:
    """Connect to a node's supervisor; ConnectionRefusedError/FileNotFoundError if none,
    PermissionError if the socket is served by another user."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(address(node))
        _, uid, _ = peer_cred(sock)
        if uid != os.geteuid():
            raise PermissionError(f"npuemu node {node!r} is served by uid {uid}, not by this "
                                  f"user ({os.geteuid()}): refused")
    except OSError:
        sock.close()
        raise
    return sock


def send(sock: socket.socket, message: list[Any] | Message) -> None:
    body = msgpack.packb(message, use_bin_type=True)
    sock.sendall(_LEN.pack(len(body)) + body)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionResetError("npuemu supervisor closed the control connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket) -> Message:
    (n,) = _LEN.unpack(_recv_exact(sock, 4))
    if n > MAX_MESSAGE:
        raise BadMessage(f"control message of {n} bytes")
    return decode(_recv_exact(sock, n))


def call(sock: socket.socket, message: list[Any] | Message) -> Message:
    send(sock, message)
    return recv(sock)


def decode(body: bytes) -> Message:
    """One message body as a tuple; BadMessage if it is not a msgpack array."""
    try:
        msg = msgpack.unpackb(body, use_list=False, raw=False)
    except Exception as err:  # msgpack raises several unrelated types for bad input
        raise BadMessage(f"undecodable control message: {err!r}") from None
    if type(msg) is not tuple:
        raise BadMessage(f"control message is a {type(msg).__name__}, not an array")
    return msg


def validate(msg: Message) -> Message:
    """``msg`` if it is a request of ``SCHEMA`` with arguments of the right types (``bool``
    is not taken for an ``int`` argument, nor an ``int`` outside 0..2**31 for either)."""
    if not msg or type(msg[0]) is not str or msg[0] not in SCHEMA:
        raise BadMessage(f"unknown control request {msg[:1]!r}")
    spec, args = SCHEMA[msg[0]], msg[1:]
    least = _OPTIONAL_FROM.get(msg[0], len(spec))
    if not least <= len(args) <= len(spec):
        raise BadMessage(f"{msg[0]!r} takes {len(spec)} arguments, got {len(args)}")
    for value, types in zip(args, spec, strict=False):
        if type(value) not in types or (type(value) is int and not 0 <= value < 1 << 31):
            raise BadMessage(f"{msg[0]!r}: bad argument {value!r}")
    return msg


class Reader:
    """Incremental decoder for the supervisor's non-blocking side. ``feed`` returns the
    complete messages so far (validated); BadMessage on anything malformed."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[Message]:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            (n,) = _LEN.unpack_from(self.buf)
            if n > MAX_MESSAGE:
                raise BadMessage(f"control message of {n} bytes")
            if len(self.buf) < 4 + n:
                break
            out.append(validate(decode(bytes(self.buf[4 : 4 + n]))))
            del self.buf[: 4 + n]
        return out
