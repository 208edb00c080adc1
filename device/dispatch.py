"""Op -> handler table of the device worker, and the one place where a frame's exceptions
are classified (``handle``). Nothing a client sends can stop the worker loop:

| raised              | meaning                                  | answer (if ``seq``)         |
|---------------------|------------------------------------------|-----------------------------|
| ``BadFrame``        | the frame breaks the protocol table      | 107000; ``bad_frames`` += 1 |
| ``AclError``        | a well-formed request the card refuses   | its code                    |
| ``OSError``         | shared memory the request named (a pinned | ``_os_code``: 107000,      |
|                     | block already gone, /dev/shm full)       | 207001 or 507899            |
| anything else       | a bug of ours: traceback to the device log | 507000 (internal error)   |
| any other BaseException (``SystemExit``, ...) | likewise: the worker goes on | 507000 |

The one BaseException that passes is the worker's own stop (``containment.is_stop``: the
KeyboardInterrupt of a hand-run worker's SIGINT handler). User code a request runs (a
kernel file's module at ``BINARY_LOAD``, a kernel looked up at ``LAUNCH``) is contained
where it is called (``exec/kernels.py``), so its ``SystemExit`` is a 107000 (the binary
does not load, or has no such kernel), not a 507000.

A handler gets ``(worker, client, *args)`` and returns a tuple of results. Before the call,
``protocol.check_request`` checks the frame against the op's row of
``protocol.REQUEST_FIELDS`` (the count, type and range of every argument), so handlers get
checked values and check only what the table cannot say (a pinned block's name is of this
node, a model's steps, which ``exec/model.py`` checks field by field); a ``TypeError``
raised *inside* a handler is a bug, never reported as a malformed frame. Stream-task frames
are validated by ``Scheduler.enqueue`` inside the same error handling.

Threading model: loop thread only.
"""

from __future__ import annotations

import ctypes
import errno
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from npuemu.device import containment
from npuemu.device.exec import collective, graph, kernels, model, opbin
from npuemu.shared import errors, protocol, shm
from npuemu.shared.layout import DEVICE_CTL
from npuemu.shared.memcopy import move
from npuemu.shared.protocol import TASK_OPS, BadFrame, Op

if TYPE_CHECKING:
    from npuemu.device.worker import Client, Worker


def _ping(worker: Worker, client: Client) -> tuple[int]:
    return (time.monotonic_ns(),)


def _malloc(worker: Worker, client: Client, size: int, policy: int) -> tuple[int, int, int]:
    result = worker.memory.malloc(client.slot, size, policy)
    if worker.debug:
        worker.log("DEBUG", f"malloc size={size} policy={policy:#x} ptr=0x{result[0]:x} "
                            f"span={result[1]} client={client.slot}", module="DEVMM")
    return result


def _free(worker: Worker, client: Client, ptr: int) -> tuple[()]:
    span = worker.memory.free(client.slot, ptr)
    if worker.debug:
        worker.log("DEBUG", f"free ptr=0x{ptr:x} span={span} client={client.slot}",
                   module="DEVMM")
    return ()


def _mem_info(worker: Worker, client: Client, attr: int) -> tuple[int, int]:
    return worker.memory.mem_info(attr)


def _copy(worker: Worker, client: Client, dst: int, src: int, count: int) -> tuple[()]:
    """Device-to-device copy by this device's DMA engine (one memmove, arena to arena, also
    to or from a peer card's arena)."""
    d, s = worker.resolve(client, dst, count), worker.resolve(client, src, count)
    worker.faults.check_ranges((dst, count), (src, count))
    peers = worker.count_p2p(dst, src, count)
    worker.faults.check_copy(peers)
    beating_memmove(worker.beat, d, s, count)
    for dev in peers:
        worker.peer(dev)  # raises 507057 if the peer died during the copy
    return ()


def _memset(worker: Worker, client: Client, ptr: int, value: int, count: int) -> tuple[()]:
    arena, off = worker.memory.resolve(client.slot, ptr, count)
    addr, byte = arena.seg.address + off, value & 0xFF
    for step in range(0, count, BEAT_BYTES):
        ctypes.memset(addr + step, byte, min(BEAT_BYTES, count - step))
        worker.beat()
    return ()


BEAT_BYTES = 64 << 20
"""A synchronous copy or memset runs in the loop thread in steps of this many bytes, with a
heartbeat after each (``Worker.beat``): many GiB must not make the card look hung."""


def beating_memmove(beat: Callable[[], None], dst: int, src: int, count: int) -> None:
    """``memmove(dst, src, count)`` in ``BEAT_BYTES`` steps (``memcopy.move``: around 4K
    aliasing, as two neighbouring blocks are), calling ``beat`` after each. Overlapping
    ranges stay correct: the steps run backwards when ``dst`` lies inside
    ``(src, src + count)``, as memmove itself would copy."""
    steps = range(0, count, BEAT_BYTES)
    order: Iterable[int] = reversed(steps) if src < dst < src + count else steps
    for step in order:
        move(dst + step, src + step, min(BEAT_BYTES, count - step))
        beat()


def _mem_pools(worker: Worker, client: Client) -> tuple[list[list[list[str | int]]]]:
    return ([[pool.as_row() for pool in arena] for arena in worker.memory.pools()],)


def _ipc_export(worker: Worker, client: Client, ptr: int) -> tuple[int]:
    return (worker.memory.export(client.slot, ptr),)


def _ipc_set_pid(worker: Worker, client: Client, key: int, pid: int) -> tuple[()]:
    worker.memory.allow_pid(client.slot, key, pid)
    return ()


def _ipc_import(worker: Worker, client: Client, key: int) -> tuple[int, int]:
    pid = worker.client_pid(client.slot)
    return worker.memory.import_block(client.slot, pid, key)


def _ipc_close(worker: Worker, client: Client, ptr: int) -> tuple[()]:
    worker.memory.close_import(client.slot, ptr)
    worker.alloc_changes += 1  # kernels' cached views of the block (exec/kernels.py) go
    return ()


def _vmm_map(worker: Worker, client: Client, va: int, size: int, offset: int, phys: int,
             length: int) -> tuple[()]:
    """A mapping of the client's physical block (its own, or imported) on this card."""
    arena, arena_offset = worker.memory.resolve(client.slot, phys, length)
    client.windows.map(va, size, offset, phys, length, arena.seg.fd,
                       arena.file_runs(arena_offset, length), idle=not client.inflight)
    worker.alloc_changes += 1  # views cached by models may change
    return ()


def _vmm_unmap(worker: Worker, client: Client, va: int, offset: int) -> tuple[()]:
    client.windows.unmap(va, offset)
    worker.alloc_changes += 1
    return ()


def _mem_merge(worker: Worker, client: Client) -> tuple[int]:
    return (worker.memory.merge_free(),)


def _snapshot(worker: Worker, client: Client) -> tuple[list[tuple[int, int, int, int]]]:
    return (worker.memory.snapshot(),)


def _stream_create(worker: Worker, client: Client, slot: int, priority: int,
                   flags: int) -> tuple[int]:
    sid = worker.scheduler.create(client, slot, priority, flags)
    if worker.debug:
        worker.log("DEBUG", f"stream {sid} created (priority {priority}, flags {flags:#x})")
    return (sid,)


def _stream_destroy(worker: Worker, client: Client, slot: int) -> tuple[()]:
    worker.scheduler.destroy(client, slot)
    if worker.debug:
        worker.log("DEBUG", f"stream slot {slot} of client {client.slot} destroyed")
    return ()


def _stream_mode(worker: Worker, client: Client, slot: int, mode: int) -> tuple[()]:
    worker.scheduler.set_mode(client, slot, mode)
    return ()


def _stream_abort(worker: Worker, client: Client, slot: int) -> tuple[()]:
    worker.scheduler.abort(client, slot)
    return ()


def _pin(worker: Worker, client: Client, host_addr: int, size: int, name: str) -> tuple[()]:
    """Map a pinned host block (``aclrtMallocHost``) so async copies can reach it."""
    if not name.startswith(shm.name(worker.node, "p")):
        raise BadFrame(f"{name!r:.80} is not a pinned block of this node")
    if host_addr not in client.pinned:
        try:
            # refuses a name another user owns or can open; FileNotFoundError (-> 107000)
            # if the block was freed meanwhile
            seg = shm.Segment(name)
        except PermissionError as err:
            worker.log("WARNING", f"pinned block refused: {err}")
            raise errors.error_for(errors.ACL_ERROR_RT_NO_PERMISSION, str(err)) from None
        if seg.size < size:
            seg.close()
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"pinned block {name} is smaller than {size}")
        client.pinned[host_addr] = seg
    return ()


def _unpin(worker: Worker, client: Client, host_addr: int) -> tuple[()]:
    """Forget a pinned block. Its mapping stays until the client detaches: an engine may
    still be copying through it, and unmapping under it would crash the worker."""
    seg = client.pinned.pop(host_addr, None)
    if seg is not None:
        client.unpinned.append(seg)
        worker.alloc_changes += 1  # checks kept by DVPP tasks may name its records
    return ()


def _binary_load(worker: Worker, client: Client, source: str,
                 filename: str) -> tuple[int, list[list[str]]]:
    return kernels.load(client, source, filename)


def _binary_unload(worker: Worker, client: Client, bin_id: int) -> tuple[()]:
    if client.binaries.pop(bin_id, None) is None:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"no binary {bin_id}")
    return ()


def _callback_done(worker: Worker, client: Client, slot: int, seq: int) -> tuple[()]:
    if not graph.callback_done(client, seq):  # else a replay's callback step (exec/graph.py)
        worker.scheduler.callback_done(client, slot, seq)
    return ()


def _inject(worker: Worker, client: Client, kind: str,
            params: dict[str, Any]) -> tuple[()]:
    try:
        worker.faults.inject(kind, params)
    except TypeError as err:  # wrong parameter names or types for that fault
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"fault {kind}: {err}") from None
    return ()


def _set_timeout(worker: Worker, client: Client, timeout_us: int) -> tuple[()]:
    """``aclrtSetOpExecuteTimeOut*``: this client's task execution timeout (0 = defaults)."""
    worker.scheduler.set_timeout(client, timeout_us)
    return ()


HANDLERS: dict[int, Callable[..., tuple[Any, ...]]] = {
    Op.PING: _ping, Op.MALLOC: _malloc, Op.FREE: _free, Op.MEM_INFO: _mem_info,
    Op.COPY: _copy, Op.MEMSET: _memset, Op.SNAPSHOT: _snapshot,
    Op.STREAM_CREATE: _stream_create, Op.STREAM_DESTROY: _stream_destroy,
    Op.STREAM_MODE: _stream_mode, Op.STREAM_ABORT: _stream_abort, Op.PIN: _pin,
    Op.UNPIN: _unpin, Op.BINARY_LOAD: _binary_load, Op.BINARY_UNLOAD: _binary_unload,
    Op.CALLBACK_DONE: _callback_done, Op.INJECT: _inject, Op.SET_TIMEOUT: _set_timeout,
    **opbin.HANDLERS, **model.HANDLERS,
    Op.MEM_POOLS: _mem_pools, Op.IPC_EXPORT: _ipc_export, Op.IPC_SET_PID: _ipc_set_pid,
    Op.IPC_IMPORT: _ipc_import, Op.IPC_CLOSE: _ipc_close, Op.MEM_MERGE: _mem_merge,
    Op.COMM_ATTACH: collective.attach, Op.VMM_MAP: _vmm_map, Op.VMM_UNMAP: _vmm_unmap,
}
"""Every request op of ``protocol.REQUEST_FIELDS``; a handler takes ``(worker, client)`` and
that op's fields, already checked."""


def _os_code(err: OSError) -> int:
    """ACL code of an OSError met on shared memory a request named."""
    if err.errno in (errno.ENOSPC, errno.ENOMEM):
        return errors.ACL_ERROR_RT_MEMORY_ALLOCATION
    if isinstance(err, FileNotFoundError | PermissionError | FileExistsError) or err.errno in (
            errno.ENOENT, errno.EACCES, errno.EPERM, errno.EINVAL, errno.ENAMETOOLONG):
        return errors.ACL_ERROR_RT_PARAM_INVALID
    return errors.ACL_ERROR_RT_DRV_INTERNAL_ERROR


def handle(worker: Worker, client: Client, payload: bytes) -> None:
    """Decode, run and (if asked) answer one frame; see the module docstring for how each
    exception is answered."""
    seq = 0
    try:
        frame = protocol.unpack(payload)
        op = frame[0]
        if type(op) is int and op in TASK_OPS:  # field 1 is a submit stamp: never answered
            worker.scheduler.enqueue(client, frame)
            if worker.debug:
                worker.log("DEBUG", f"task {frame[3]} (op {op}) submitted to stream slot "
                                    f"{frame[2]}")
            return
        seq = protocol.reply_seq(frame)
        op, args = protocol.check_request(frame)
        result = HANDLERS[op](worker, client, *args)  # one per request op (a unit test says)
        if seq:
            client.reply((seq, 0, *result))
    except BadFrame as err:
        worker.ctl[DEVICE_CTL.BAD_FRAMES] += 1
        worker.log("WARNING", f"malformed frame dropped: {err}")
        if seq:
            client.reply((seq, errors.ACL_ERROR_RT_PARAM_INVALID, f"malformed request: {err}"))
    except errors.AclError as err:
        _answer(worker, client, seq, err.code, err.detail or str(err))
    except OSError as err:
        _answer(worker, client, seq, _os_code(err), f"shared memory: {err}")
    except BaseException as err:
        if containment.is_stop(err):
            raise
        worker.internal_error(f"request {payload[:40]!r}")
        _answer(worker, client, seq, errors.ACL_ERROR_RT_INTERNAL_ERROR,
                f"internal error of device {worker.dev}: {err!r}")


def _answer(worker: Worker, client: Client, seq: int, code: int, detail: str) -> None:
    if seq:
        client.reply((seq, code, detail))
    else:
        worker.log("WARNING", f"async request failed, ret={code}: {detail}")

