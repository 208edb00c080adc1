"""Kernel binaries and launches on the device.

A binary is Python source (see ``shared/kernel.py`` for how kernels are declared); loading
executes it in a fresh module namespace of the worker, once per load. A launch runs the
kernel once per block on its engine's thread with a ``KernelContext`` whose ``tensor``
views are bounds-checked against the launching client's live allocations. Between blocks the
run checks ``task.cancelled`` (stream abort or destroy, execution timeout, client gone), so a
long launch stops at the next block boundary (one block that never returns cannot be stopped).

Threading model: ``load`` and ``launch`` run in the worker's loop thread; ``run`` and
``KernelContext`` run on an engine thread and reach shared state only through
``DeviceMemory.resolve`` (which takes the memory lock), ``Windows.find`` (one read of a
window's table, replaced whole by the loop), the client's ``Ranges`` (views checked
before, shared by the client's kernels on every engine: atomic dict operations, entries
added only under the allocation generation they were checked in; the loop bumps
``Worker.alloc_changes`` at every malloc, free, VMM map/unmap and IPC close),
``Faults.check_ranges`` (reads of the control block) and ``Worker.log`` (which takes the
log lock).

Failures of user code: every call of it here (the module of a binary at load, the lookup of
a kernel, the blocks of a launch) runs under ``containment.user_code``, so a kernel file or
kernel that raises anything, ``SystemExit`` and ``KeyboardInterrupt`` included, fails its
load (107000) or its task (its engine's exception code: AI Core 507015, AI Vector 507035,
AI CPU 507018, with a device log line) and never ends the thread that ran it.
"""

from __future__ import annotations

import ctypes
import math
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeGuard

from npuemu.device import contracts, engines
from npuemu.device.containment import user_code
from npuemu.shared import address, errors
from npuemu.shared.layout import DEVICE_CTL
from npuemu.shared.protocol import BadFrame


class MemoryFault(Exception):
    """A kernel touched memory outside its process's allocations (an MTE error)."""


class Ranges:
    """Tensor views kernels resolved, valid while no block of the card was allocated,
    freed or mapped since (``Worker.alloc_changes``): a client's (``Client.ranges``, shared
    by its kernels on every engine thread) or a model's. Dict operations are atomic; a view
    is only added under the generation it was checked in. The views are made over the
    arena's address (not its buffer), so they never pin the arena's mapping; they are used
    only by the client's tasks, which end before the worker unmaps its arenas."""

    __slots__ = ("gen", "table")

    def __init__(self) -> None:
        self.gen = -1
        # (ptr, dtype, count) -> flat numpy view; (ptr, dtype, shape) -> shaped (``view``)
        self.table: dict[tuple[int, Any, int | tuple[int, ...]], Any] = {}


class KernelClient(contracts.Client, Protocol):
    """A client as its kernels see it (``worker.Client``): its loaded binaries (kernel files
    and op binaries, by bin id) and the tensor views its kernels resolved."""

    binaries: dict[int, types.ModuleType]
    next_binary: int  # the last bin id given
    ranges: Ranges


MAX_VIEWS = 4096
"""Most views one ``Ranges`` keeps (a caller rotating buffers adds entries)."""
ARG_DEPTH = 4
"""Deepest nesting of arrays in a kernel's arguments (an op's shapes and tiling travel as
such arrays)."""
_SCALARS = (int, float, bool, str)


def check_args(value: object) -> None:
    """BadFrame unless ``value``, the kernel arguments of a ``LAUNCH`` or of a model step, is
    an array of ints, floats, bools, strings and arrays of those, nested at most
    ``ARG_DEPTH`` deep."""
    if not _array_ok(value, ARG_DEPTH + 1):
        raise BadFrame("kernel arguments must be an array of ints, floats, bools, strings "
                       f"or arrays of those (at most {ARG_DEPTH} deep)")


def is_array(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """``value`` is an array of a frame: a list or a tuple (no subclass: the checks of a
    frame never run code of the values they look at)."""
    return type(value) is list or type(value) is tuple


def _arg_ok(value: object, depth: int) -> bool:
    return type(value) in _SCALARS or _array_ok(value, depth)


def _array_ok(value: object, depth: int) -> bool:
    """``value`` is an array of arguments, each nested at most ``depth - 1`` deep."""
    return is_array(value) and depth > 0 and all(_arg_ok(v, depth - 1) for v in value)


class KernelContext:
    """What a kernel sees of its launch: its block and the device memory. ``tensor`` checks
    a range the first time it meets it since the card's allocations last changed; later
    calls return the same view (``Ranges``), so a kernel launched again on the same
    buffers pays no check; ``view`` keeps the shaped view too. Isolated pages are still
    checked on every call once the card has any."""

    def __init__(self, worker: contracts.Card, client: KernelClient, block_idx: int,
                 block_num: int, ranges: Ranges | None = None) -> None:
        self.block_idx, self.block_num = block_idx, block_num
        self._worker, self._client = worker, client
        self._ranges = client.ranges if ranges is None else ranges

    def split(self, n: int) -> tuple[int, int]:
        """This block's ``[lo, hi)`` share of ``n`` items (blocks get near-equal shares)."""
        return n * self.block_idx // self.block_num, n * (self.block_idx + 1) // self.block_num

    def tensor(self, ptr: int, dtype: Any, count: int) -> Any:
        """``count`` elements of ``dtype`` at device pointer ``ptr`` as a writable numpy view.
        ``ptr`` and ``count`` must be non-negative ints and the whole range must lie in one
        live allocation of the launching process, or in mapped pieces of one of its reserved
        ranges (``memory/windows.py``: one view over the pieces' pages, however many; the
        isolated-page check does not apply there), MemoryFault otherwise, before any view."""
        ranges, worker = self._ranges, self._worker
        if ranges.gen != worker.alloc_changes:
            ranges.table.clear()
            ranges.gen = worker.alloc_changes
        view = ranges.table.get((ptr, dtype, count))
        if view is None:
            return self._miss(ptr, dtype, count)
        if worker.ctl[_POISONED]:  # an isolated page may have appeared since
            worker.faults.check_ranges((ptr, view.nbytes))
        return view

    def view(self, ptr: int, dtype: Any, shape: tuple[int, ...]) -> Any:
        """``tensor(ptr, dtype, prod(shape)).reshape(shape)``, the shaped view kept in the
        same ``Ranges`` (same generation, same isolated-page check on every call), so a
        kernel launched again on the same buffers builds no view at all. The op compiler's
        kernels call it with the shapes baked into their source (tuples of ints); a shape
        that is not hashable is served uncached, exactly as ``tensor`` and ``reshape``."""
        ranges, worker = self._ranges, self._worker
        if ranges.gen != worker.alloc_changes:
            ranges.table.clear()
            ranges.gen = worker.alloc_changes
        try:
            view = ranges.table.get((ptr, dtype, shape))
        except TypeError:  # an unhashable shape (a list)
            return self.tensor(ptr, dtype, math.prod(shape)).reshape(shape)
        if view is None:
            gen = worker.alloc_changes
            view = self.tensor(ptr, dtype, math.prod(shape)).reshape(shape)
            if view.size and type(dtype) is str and ptr < _VIRT_BASE \
                    and gen == ranges.gen == worker.alloc_changes:
                if len(ranges.table) >= MAX_VIEWS:
                    ranges.table.clear()
                ranges.table[(ptr, dtype, shape)] = view
            return view
        if worker.ctl[_POISONED]:  # an isolated page may have appeared since
            worker.faults.check_ranges((ptr, view.nbytes))
        return view

    def _miss(self, ptr: int, dtype: Any, count: int) -> Any:
        gen = self._worker.alloc_changes
        view = self._check(ptr, dtype, count)
        if count and type(dtype) is str and ptr < _VIRT_BASE:  # virtual ranges: not kept
            ranges = self._ranges
            if len(ranges.table) >= MAX_VIEWS:
                ranges.table.clear()
            if gen == ranges.gen == self._worker.alloc_changes:
                ranges.table[(ptr, dtype, count)] = view
        return view

    def _check(self, ptr: int, dtype: Any, count: int) -> Any:
        """Every check of ``tensor``; the view, made over the address (not the arena's
        buffer, so it never pins the mapping)."""
        np = _numpy()
        dt = _DTYPES.get(dtype) if type(dtype) is str else None
        if dt is None:
            dt = np.dtype(dtype)
        if type(ptr) is not int or type(count) is not int or ptr < 0 or count < 0:
            where = f"0x{ptr:x}" if type(ptr) is int and ptr >= 0 else repr(ptr)
            raise MemoryFault(f"tensor({where}, {dtype}, count={count!r}): pointer and count "
                              "must be non-negative integers")
        nbytes = count * dt.itemsize
        if not nbytes:  # an empty view touches nothing
            return np.empty(0, dt)
        worker = self._worker
        if ptr >= _VIRT_BASE:
            window, ptr = self._window(ptr, nbytes)
            if window is not None:
                return np.frombuffer((ctypes.c_char * nbytes).from_address(window), dt, count)
        try:
            arena, offset = worker.memory.resolve(self._client.slot, ptr, nbytes)
        except errors.AclError as err:
            raise MemoryFault(err.detail) from None
        if worker.ctl[_POISONED]:  # some page of this card is isolated: 507054 if touched
            worker.faults.check_ranges((ptr, nbytes))
        raw = (ctypes.c_char * nbytes).from_address(arena.seg.address + offset)
        return np.frombuffer(raw, dt, count)


    def _window(self, ptr: int, nbytes: int) -> tuple[int | None, int]:
        """``(window address or None, physical pointer of its first byte)`` of a virtual
        range, each block under it checked live and the client's (a block freed under a
        mapping by a raw frame must not show its next owner's bytes). MemoryFault
        otherwise."""
        memory, slot = self._worker.memory, self._client.slot
        try:
            window, spans = self._client.windows.find(ptr, nbytes)
            for phys, n in spans:
                memory.resolve(slot, phys, n)
        except errors.AclError as err:
            raise MemoryFault(err.detail) from None
        return window, spans[0][0]


_VIRT_BASE = address.VIRT_BASE
_DTYPES: dict[str, Any] = {}
"""numpy dtypes by the names kernels pass (filled on first use of each)."""
_POISONED = DEVICE_CTL.POISONED


def _numpy() -> Any:
    """numpy, imported on the first tensor (a worker that runs no kernel never loads it)."""
    global _np
    if _np is None:
        import numpy

        _np = numpy
        for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                     "uint8", "uint16", "uint32", "uint64", "bool", "complex64"):
            _DTYPES[name] = numpy.dtype(name)
    return _np


_np: Any = None


def load(client: KernelClient, source: str, filename: str) -> tuple[int, list[list[str]]]:
    """Execute a binary; returns ``(bin_id, [[kernel name, engine], ...])``."""
    module = types.ModuleType(f"npuemu_kernels_{client.slot}_{len(client.binaries)}")
    module.__file__ = filename
    try:
        with user_code:
            exec(compile(source, filename, "exec"), module.__dict__)
            kernels = [[name, fn.__npu_kernel__] for name, fn in vars(module).items()
                       if callable(fn) and hasattr(fn, "__npu_kernel__")]
    except Exception as err:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"kernel binary {filename} does not load: {err!r}") from None
    client.next_binary += 1
    client.binaries[client.next_binary] = module
    return client.next_binary, kernels


def lookup(client: KernelClient, bin_id: object, name: object) -> Any:
    """The kernel function ``name`` of a loaded binary, or None (also when the binary's own
    code, a module ``__getattr__`` say, fails while it is looked up)."""
    module = client.binaries.get(bin_id) if type(bin_id) is int else None
    if module is None or not isinstance(name, str):
        return None
    try:
        with user_code:
            fn = getattr(module, name, None)
            return fn if hasattr(fn, "__npu_kernel__") else None
    except Exception:
        return None


PREBUILT_BLOCKS = 64
"""A launch of at most this many blocks has its block contexts built once, with its run:
the scheduler's fast path runs a repeated launch's run again (``_inline_fast``), which then
builds none (a context holds only the card, the client, the block and the count)."""


def _contexts(worker: contracts.Card, client: KernelClient,
              num_blocks: int) -> Iterator[KernelContext]:
    """The block contexts of a launch of more than ``PREBUILT_BLOCKS``, one at a time."""
    for block in range(num_blocks):
        yield KernelContext(worker, client, block, num_blocks)


def launch(worker: contracts.Card, client: KernelClient,
           task: contracts.Job) -> tuple[str, Callable[[contracts.Job], int]]:
    """The engine of a LAUNCH task and the function that runs it (the kernel was bound when
    the task was queued, so unloading the binary since does not affect it)."""
    bin_id, name, num_blocks, args, fn = task.args
    if fn is None:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"no kernel {name!r} in binary {bin_id}")
    engine = fn.__npu_kernel__
    worker.faults.check_launch(engine, name)
    contexts = ([KernelContext(worker, client, block, num_blocks) for block in range(num_blocks)]
                if num_blocks <= PREBUILT_BLOCKS else None)

    def run(task: contracts.Job) -> int:
        try:
            with user_code:  # SystemExit & co. fail the task as any exception does
                for ctx in contexts or _contexts(worker, client, num_blocks):
                    if task.cancelled:  # aborted, timed out, stream destroyed or client gone
                        return errors.ACL_ERROR_RT_TASK_ABORT_STOP
                    fn(ctx, *args)
        except errors.AclError as err:  # an isolated page was touched
            worker.log("ERROR", f"kernel {name}: {err}")
            return err.code
        except MemoryFault as fault:
            worker.log("ERROR", f"kernel {name} memory fault: {fault}")
            return errors.ACL_ERROR_RT_DEVICE_MEM_ERROR
        except Exception:
            code = engines.FAILURE_CODE[engine]
            worker.log("ERROR", f"{engine} kernel execute failed, ret={code}, kernel_name="
                                f"{name}\n{traceback.format_exc(limit=-3)}")
            return code
        return 0

    return engine, run
