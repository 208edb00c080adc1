"""Control channel between host processes (and the CLI) and a node's supervisor.

An abstract Unix stream socket named ``\\0npuemu.<node>`` (no file, gone when the supervisor
dies). Messages are ``u32 length`` + a msgpack array, both ways. The data plane never uses it:
it carries node management only (hello, attach a client slot, detach, stop). A host keeps
its connection open for as long as it uses the node, so the supervisor learns of a host's
death from the EOF and reclaims what it had.

| request                 | reply                              |
|-------------------------|------------------------------------|
| ``["hello", pid, owner]``| ``[0, devices, hbm, ddr, soc, version]`` |
| ``["attach", dev]``     | ``[0, slot]`` or ``[code, detail]`` (starts the worker if needed) |
| ``["detach", dev, slot]``| ``[0]``                           |
| ``["stop"]``            | ``[0]``, then the node stops       |
"""

from __future__ import annotations

import socket
import struct

import msgpack

_LEN = struct.Struct("<I")
MAX_MESSAGE = 1 << 20


def address(node: str) -> str:
    return f"\0npuemu.{node}"


def connect(node: str, timeout: float | None = None) -> socket.socket:
    """Connect to a node's supervisor; ConnectionRefusedError/FileNotFoundError if none."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(address(node))
    except OSError:
        sock.close()
        raise
    return sock


def send(sock: socket.socket, message: list | tuple) -> None:
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


def recv(sock: socket.socket) -> tuple:
    (n,) = _LEN.unpack(_recv_exact(sock, 4))
    if n > MAX_MESSAGE:
        raise ValueError(f"control message of {n} bytes")
    return tuple(msgpack.unpackb(_recv_exact(sock, n), use_list=False, raw=False))


def call(sock: socket.socket, message: list | tuple) -> tuple:
    send(sock, message)
    return recv(sock)


class Reader:
    """Incremental decoder for the supervisor's non-blocking side."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[tuple]:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            (n,) = _LEN.unpack_from(self.buf)
            if n > MAX_MESSAGE:
                raise ValueError(f"control message of {n} bytes")
            if len(self.buf) < 4 + n:
                break
            out.append(tuple(msgpack.unpackb(bytes(self.buf[4 : 4 + n]), use_list=False,
                                             raw=False)))
            del self.buf[: 4 + n]
        return out
