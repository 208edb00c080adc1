"""Op -> handler table of the device worker.

A handler gets ``(worker, client, *args)`` and returns a tuple of results, or raises
``AclError`` (caller misuse: the code goes back in the reply) or ``TypeError``/``ValueError``
(a malformed frame). Nothing a client sends can stop the worker loop.
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from npuemu.shared import errors, protocol
from npuemu.shared.layout import DEVICE_CTL
from npuemu.shared.protocol import Op

if TYPE_CHECKING:
    from npuemu.device.worker import Client, Worker


def _ping(worker: Worker, client: Client) -> tuple:
    return (time.monotonic_ns(),)


def _malloc(worker: Worker, client: Client, size: int, policy: int) -> tuple:
    return worker.memory.malloc(client.slot, _int(size), _int(policy))


def _free(worker: Worker, client: Client, ptr: int) -> tuple:
    worker.memory.free(client.slot, _int(ptr))
    return ()


def _mem_info(worker: Worker, client: Client, attr: int) -> tuple:
    return worker.memory.mem_info(_int(attr))


def _copy(worker: Worker, client: Client, dst: int, src: int, count: int) -> tuple:
    """Device-to-device copy inside this device, done by its DMA engine (one memmove)."""
    count = _int(count)
    darena, doff = worker.memory.resolve(client.slot, _int(dst), count)
    sarena, soff = worker.memory.resolve(client.slot, _int(src), count)
    ctypes.memmove(darena.seg.address + doff, sarena.seg.address + soff, count)
    return ()


def _memset(worker: Worker, client: Client, ptr: int, value: int, count: int) -> tuple:
    count = _int(count)
    arena, off = worker.memory.resolve(client.slot, _int(ptr), count)
    ctypes.memset(arena.seg.address + off, _int(value) & 0xFF, count)
    return ()


def _snapshot(worker: Worker, client: Client) -> tuple:
    return (worker.memory.snapshot(),)


def _int(value: object) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(f"expected a non-negative integer, got {value!r}")
    return value


HANDLERS: dict[int, Callable[..., tuple]] = {
    Op.PING: _ping, Op.MALLOC: _malloc, Op.FREE: _free, Op.MEM_INFO: _mem_info,
    Op.COPY: _copy, Op.MEMSET: _memset, Op.SNAPSHOT: _snapshot,
}


def handle(worker: Worker, client: Client, payload: bytes) -> None:
    """Decode, run and (if asked) answer one frame."""
    seq = 0
    try:
        frame = protocol.unpack(payload)
        op, seq = frame[0], frame[1] if len(frame) > 1 else 0
        handler = HANDLERS.get(op)
        if handler is None:
            raise NotImplementedError(f"op={op!r} is not implemented by this worker")
        result = handler(worker, client, *frame[2:])
        if seq:
            client.reply((seq, 0, *result))
    except errors.AclError as err:
        if seq:
            client.reply((seq, err.code, err.detail or str(err)))
        else:
            _log(worker, f"async request failed: {err}")
    except (TypeError, ValueError, IndexError, NotImplementedError) as err:
        worker.ctl[DEVICE_CTL.BAD_FRAMES] += 1
        _log(worker, f"malformed frame dropped: {err}")
        if type(seq) is int and seq > 0:
            client.reply((seq, errors.ACL_ERROR_RT_PARAM_INVALID, f"malformed request: {err}"))


def _log(worker: Worker, message: str) -> None:
    """Device log (a shared-memory log ring comes with the diagnostics work; stderr now)."""
    print(f"[WARNING] DRV(device {worker.dev}): {message}", file=sys.stderr)
