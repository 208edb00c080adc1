"""Op kernel binaries on the card: placed in HBM, loaded from there, unloaded with their HBM.

The host's op compiler (``host/ops/compiler.py``) sends a self-contained binary: marshalled
Python byte code whose kernels are marked with ``npuemu.shared.kernel.kernel``. ``OP_LOAD``
allocates HBM for it in the client's name (so it shows in ``aclrtGetMemInfo`` and in the
client's usage), writes the bytes there, and executes the module *from the HBM copy*; the
worker never imports the op library. The module joins the client's binaries, so launches
use the ordinary ``LAUNCH`` task (streams, events, failures and exception callbacks as for
any kernel). ``OP_UNLOAD`` forgets the module and frees its HBM; launches already queued
keep the kernel they were bound to. A detaching client's binaries and HBM go with it.

| op        | args                    | results                          |
|-----------|-------------------------|----------------------------------|
| OP_LOAD   | code bytes, name        | bin id, ptr, span, [[kernel, engine], ...] |
| OP_UNLOAD | bin id, ptr             | (no reply wanted)                |
"""

from __future__ import annotations

import ctypes
import marshal
import types
from typing import TYPE_CHECKING

from npuemu.shared import errors
from npuemu.shared.protocol import BadFrame, Op

if TYPE_CHECKING:
    from npuemu.device.worker import Client, Worker

_HUGE_FIRST = 0


def op_load(worker: Worker, client: Client, code: bytes, name: str) -> tuple:
    """Place ``code`` in HBM and execute it from there; 107000 if it is not a binary."""
    if not isinstance(code, bytes) or not code or not isinstance(name, str):
        raise BadFrame("OP_LOAD takes code bytes and a name")
    ptr, span, _cls = worker.memory.malloc(client.slot, len(code), _HUGE_FIRST)
    try:
        arena, offset = worker.memory.resolve(client.slot, ptr, len(code))
        at = arena.seg.address + offset  # near or far (shared/pages.py): one address
        ctypes.memmove(at, code, len(code))
        image = ctypes.string_at(at, len(code))
        module = types.ModuleType(f"npuemu_op_{client.slot}_{client.next_binary + 1}")
        module.__file__ = name
        exec(marshal.loads(image), module.__dict__)
    except Exception as err:
        worker.memory.free(client.slot, ptr)
        if isinstance(err, errors.AclError):
            raise
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"op binary {name} does not load: {err!r}") from None
    kernels = [[k, fn.__npu_kernel__] for k, fn in vars(module).items()
               if callable(fn) and hasattr(fn, "__npu_kernel__")]
    client.next_binary += 1
    client.binaries[client.next_binary] = module
    if worker.debug:
        worker.log("DEBUG", f"op binary {name} loaded: bin {client.next_binary}, "
                            f"{len(code)} bytes at 0x{ptr:x}")
    return client.next_binary, ptr, span, kernels


def op_unload(worker: Worker, client: Client, bin_id: int, ptr: int) -> tuple:
    """Forget the binary and free its HBM."""
    client.binaries.pop(bin_id, None)
    worker.memory.free(client.slot, ptr)
    return ()


HANDLERS = {Op.OP_LOAD: op_load, Op.OP_UNLOAD: op_unload}
