"""Op kernel binaries on the card: placed in HBM, compiled and loaded from there, unloaded with
their HBM.

The host's op compiler (``host/ops/compiler.py``) sends a kernel as its generated Python
*source* (a ``str``, at most ``protocol.OP_SOURCE_MAX`` UTF-8 bytes), never as byte code: the
worker compiles it itself with ``compile()``, so every code object it runs comes from CPython's
own compiler (marshalled byte code is never verified and a crafted code object crashes the
interpreter). A frame carrying bytes instead is refused with 107000.

``OP_LOAD`` allocates HBM for the UTF-8 text in the client's name (so it shows in
``aclrtGetMemInfo`` and in the client's usage), writes it there, then compiles and executes
the module *from the HBM copy*; the worker never imports the op library. Any exception while
compiling or executing the module, ``BaseException`` included (SyntaxError, RecursionError,
MemoryError, SystemExit, KeyboardInterrupt, ...), frees that HBM and answers 107000
(``ACL_ERROR_RT_PARAM_INVALID``); the worker goes on serving. The module joins the client's
binaries, so launches use the ordinary ``LAUNCH`` task (streams, events, failures and
exception callbacks as for any kernel). ``OP_UNLOAD`` forgets the module and frees its HBM;
launches already queued keep the kernel they were bound to. A detaching client's binaries and
HBM go with it.

A client holds at most ``MAX_OP_BINARIES`` op binaries at once; one more is
``ACL_ERROR_RT_OVER_LIMIT`` (207012), and the host's op map then evicts its oldest compiled
entries and tries once more (``host/ops/cache.py`` ``shed``).

| op        | args                    | results                          |
|-----------|-------------------------|----------------------------------|
| OP_LOAD   | source str, name str    | bin id, ptr, span, [[kernel, engine], ...] |
| OP_UNLOAD | bin id, ptr             | (no reply wanted); 107000 unless the pair was loaded |

Partial: the module's top level runs in the worker's loop thread with no time limit, so a
source that loops forever at import holds that card's loop (its kernels, once loaded, run
under the engines' execution timeouts as any kernel does).

Threading model: loop thread only (``device/dispatch.py``).
"""

from __future__ import annotations

import ctypes
import types
from collections.abc import Callable
from typing import Any, Protocol

from npuemu.device.contracts import Card
from npuemu.device.exec.kernels import KernelClient
from npuemu.shared import errors, protocol
from npuemu.shared.protocol import Op, u64


class OpClient(KernelClient, Protocol):
    """A client as its op binaries see it (``worker.Client``): each one's bin id and HBM."""

    op_bins: dict[int, int]  # OP_LOAD bin id -> the HBM pointer of its source

_HUGE_FIRST = 0
MAX_OP_BINARIES = 1 << 15
"""Op binaries one client may hold loaded: 32768. The host's op map keeps at most 20000
compiled entries by default (``aclopSetMaxOpQueueNum``; several entries share one binary),
and a single-op model directory of over 12000 ops is not a real one, so a real program stays
below it; one that raised the op map's capacity far above the default has its oldest entries
evicted instead (the host sheds and retries). A runaway loader meets it long before the
card's HBM is gone. The code is ``ACL_ERROR_RT_OVER_LIMIT`` (207012, "a runtime limit was
exceeded"): a count limit, not a memory shortage (207001) nor a failed allocation of a
resource (207005)."""


def op_load(worker: Card, client: OpClient, source: str,
            name: str) -> tuple[int, int, int, list[list[str]]]:
    """Place ``source`` in HBM, compile and execute it from there (``aclrtBinaryLoad`` of a
    kernel the op compiler built); 107000 if it is not loadable source."""
    image = protocol.op_load_args(source, name)
    if len(client.op_bins) >= MAX_OP_BINARIES:
        raise errors.error_for(errors.ACL_ERROR_RT_OVER_LIMIT,
                               f"client holds {len(client.op_bins)} op binaries "
                               f"(at most {MAX_OP_BINARIES})")
    ptr, span, _cls = worker.memory.malloc(client.slot, len(image), _HUGE_FIRST)
    module_name = f"npuemu_op_{client.slot}_{client.next_binary + 1}"
    try:
        module = _execute(worker, client, ptr, image, name, module_name)
    except BaseException as err:  # SystemExit & co. must not stop the card
        worker.memory.free(client.slot, ptr)
        if isinstance(err, errors.AclError):
            raise
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"op binary {name!r:.80} does not load: "
                               f"{type(err).__name__}: {str(err)[:200]}") from None
    kernels = [[k, fn.__npu_kernel__] for k, fn in vars(module).items()
               if callable(fn) and hasattr(fn, "__npu_kernel__")]
    client.next_binary += 1
    client.binaries[client.next_binary] = module
    client.op_bins[client.next_binary] = ptr
    if worker.debug:
        worker.log("DEBUG", f"op binary {name} loaded: bin {client.next_binary}, "
                            f"{len(image)} bytes at 0x{ptr:x}")
    return client.next_binary, ptr, span, kernels


def _execute(worker: Card, client: OpClient, ptr: int, image: bytes, name: str,
             module_name: str) -> types.ModuleType:
    """Write ``image`` at ``ptr``, read it back and run it as a fresh module."""
    arena, offset = worker.memory.resolve(client.slot, ptr, len(image))
    at = arena.seg.address + offset  # near or far (shared/pages.py): one address
    ctypes.memmove(at, image, len(image))
    text = ctypes.string_at(at, len(image)).decode("utf-8")
    module = types.ModuleType(module_name)
    module.__file__ = name
    exec(compile(text, name, "exec", dont_inherit=True), module.__dict__)
    return module


def op_unload(worker: Card, client: OpClient, bin_id: int, ptr: int) -> tuple[()]:
    """Forget an op binary and free its HBM (``aclrtBinaryUnLoad``); 107000 unless ``(bin_id,
    ptr)`` is an op binary this client loaded and still holds."""
    bin_id, ptr = u64(bin_id), u64(ptr)
    if client.op_bins.get(bin_id) != ptr:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"no op binary {bin_id} at 0x{ptr:x}")
    del client.op_bins[bin_id]
    client.binaries.pop(bin_id, None)
    worker.memory.free(client.slot, ptr)
    return ()


HANDLERS: dict[int, Callable[..., tuple[Any, ...]]] = {Op.OP_LOAD: op_load,
                                                      Op.OP_UNLOAD: op_unload}
