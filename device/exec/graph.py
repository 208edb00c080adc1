"""Copy and memset steps of a card-side task list: what a captured stream (``aclmdlRI*``)
adds to the kernel steps of a model (``model.py``).

A captured stream is registered on the card as a model task list with no inputs and no
outputs (``MODEL_LOAD``) and replayed as one ``MODEL_EXECUTE`` task; its kernels are
kernel steps as a model's are, its event records and waits between the capture's streams
are the steps' event ids, and its copies and memsets are the steps this module checks
and runs. A memory step is ``[stream, op, [args], [waited event ids], [recorded event
ids]]`` (five fields, where a kernel step has eight): op ``COPY_ASYNC`` with ``[dst, src,
count]`` or ``MEMSET_ASYNC`` with ``[ptr, value, count]``, addresses as the stream tasks of
the same op take them (device memory of the client, a peer card's, or the client's pinned
host memory).

The addresses are resolved at every replay, when the step runs (memory may be freed and
allocated again between replays, as on the real card, where a replay reads whatever the
addresses hold then): a bad range fails the replay with 107000 at that step, an isolated
page with its code, as the same stream task would. The bytes move on the replay's engine
thread (or a helper thread of the model's extra streams), one ``memmove`` / ``memset``,
checked for cancellation only between steps (a copy already under way finishes).

Threading model: ``memory_step`` runs in the worker's loop thread (``MODEL_LOAD``);
``MemoryStep.__call__`` runs on the thread that runs its lane of the replay and reads the
client's pinned-block table (``Worker.resolve`` takes a snapshot of it) and the allocator
(``DeviceMemory.resolve`` is locked).
"""

from __future__ import annotations

import ctypes
from typing import Any

from npuemu.device import contracts, engines
from npuemu.shared.protocol import BadFrame, Op, u64

MEMORY_STEP_FIELDS = 5
"""Fields of a copy or memset step (a kernel step has 8)."""
_COPY, _MEMSET = int(Op.COPY_ASYNC), int(Op.MEMSET_ASYNC)
_COUNT_LIMIT = 1 << 63


class MemoryStep:
    """The run function of one copy or memset step: ``step(None, a, b, count)``, called as
    a model step's kernel is (one block, no context)."""

    __slots__ = ("client", "op", "worker")
    __npu_kernel__ = engines.DMA

    def __init__(self, worker: contracts.Card, client: contracts.Client, op: int) -> None:
        self.worker, self.client, self.op = worker, client, op

    def __call__(self, _ctx: object, a: int, b: int, count: int) -> None:
        worker, client = self.worker, self.client
        if self.op == _COPY:
            dst, src = worker.resolve(client, a, count), worker.resolve(client, b, count)
            worker.faults.check_ranges((a, count), (b, count))
            ctypes.memmove(dst, src, count)
        else:
            ptr = worker.resolve(client, a, count)
            worker.faults.check_ranges((a, count))
            ctypes.memset(ptr, b & 0xFF, count)


def memory_step(worker: contracts.Card, client: contracts.Client,
                row: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    """The prepared step of a five-field row (``model.py``'s step tuple: run function,
    name, engine, args, slots, block contexts, stream, waits, records); BadFrame for a row
    that breaks the table."""
    stream, op, args, waits, records = row
    if op not in (_COPY, _MEMSET) or type(op) is not int:
        raise BadFrame(f"a memory step's op is COPY_ASYNC or MEMSET_ASYNC, not {op!r:.40}")
    if type(args) not in (list, tuple) or len(args) != 3:
        raise BadFrame("a memory step's args are [dst, src, count] or [ptr, value, count]")
    a, b, count = (u64(v) for v in args)
    if count >= _COUNT_LIMIT:
        raise BadFrame(f"count {count} too large")
    name = "memcpy" if op == _COPY else "memset"
    return (MemoryStep(worker, client, op), name, engines.DMA, (a, b, count), (), (None,),
            stream, waits, records)
