"""IPC between host processes on one node: ``aclrtMemExportToShareableHandle``,
``aclrtMemSetPidToShareableHandle``, ``aclrtMemImportFromShareableHandle``. Device side:
``device/memory/ipc.py``.

Process A exports a physical handle (``aclrtMallocPhysical``, ``host/core/vmm.py``) and gets
a share key (a u64 naming the base allocation on its card); it allows process B's pid; B
imports the key on that card and gets a physical handle of its own for the same memory,
which it maps into a reserved range (``aclrtMapMem``) and copies through. B's copies go
straight to the card's memory (the worker checks B's right to it for device-side work).
B's ``aclrtFreePhysical`` closes the import. Imports are counted per process, as the real
runtime's reference count does: B importing one key twice holds two handles for the same
memory, which stays in B's tables (and imported on the card) until both are closed. If A
frees its handle first, the memory stays alive for B until B closes it; if A dies, the
same; if B dies, its imports are dropped. An import without A's permission, of an unknown
key, or by a process of another node's card is 107000 (our choice of code), and so is
importing one's own export. ``handleType`` must be DEFAULT (1) or FABRIC (2) and ``flags`` 0.

Each call is one round trip to the card's worker (blocks for it).

Threading model: no threads of its own; callers' threads share ``_lock``, which guards
``_exported`` (key -> handle of this process) and ``_imports`` (block start -> its table
entry and the live import count); it is taken after ``runtime.lock`` when both are held.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

from npuemu.host.core import runtime, vmm
from npuemu.host.core.runtime import Allocation, index
from npuemu.host.driver.interface import Link
from npuemu.shared import errors
from npuemu.shared.protocol import Op

__all__ = ["close_import", "export", "import_handle", "set_pids"]


@dataclass(eq=False)
class _Import:
    """An imported block: its table entry, and the live imports of it in this process."""

    alloc: Allocation
    count: int


_lock = threading.Lock()
_exported: dict[int, vmm.Physical] = {}
_imports: dict[int, _Import] = {}  # block start -> its import


def export(handle: object, handle_type: object = 1, flags: object = 0) -> int:
    """Mirrors ``aclrtMemExportToShareableHandle(V2)``: the share key of a physical handle."""
    phys = vmm.lookup_physical(handle)
    kind = index(handle_type, errors.ACL_ERROR_INVALID_PARAM, "handleType")
    if kind not in (1, 2) or index(flags, errors.ACL_ERROR_INVALID_PARAM, "flags"):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM,
                               f"handleType {kind} must be DEFAULT (1) or FABRIC (2), flags 0")
    if phys.imported:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               "an imported handle cannot be exported again")
    key: int
    (key,) = phys.link.call(Op.IPC_EXPORT, phys.alloc.ptr)
    with _lock:
        _exported[key] = phys
    return key


def set_pids(key: object, pids: object) -> None:
    """Mirrors ``aclrtMemSetPidToShareableHandle(key, pids, num)``: let those host processes
    import ``key``. 107000 unless this process exported it."""
    key = index(key, errors.ACL_ERROR_INVALID_PARAM, "shareable handle")
    if isinstance(pids, int):
        pids = [pids]
    if not isinstance(pids, list | tuple) or not pids:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "pids must be a non-empty list")
    pids = [index(p, errors.ACL_ERROR_INVALID_PARAM, "pid") for p in pids]
    if any(p <= 0 for p in pids):
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"bad pid in {pids}")
    with _lock:
        phys = _exported.get(key)
    if phys is None or phys.destroyed:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"{key!r} is not a share key exported by this process")
    for pid in pids:
        phys.link.call(Op.IPC_SET_PID, key, pid)


def import_handle(key: object, dev: object) -> vmm.Physical:
    """Mirrors ``aclrtMemImportFromShareableHandle(key, dev, &handle)``: a physical handle
    of this process for the memory behind ``key`` on card ``dev``."""
    key = index(key, errors.ACL_ERROR_INVALID_PARAM, "shareable handle")
    dev = index(dev, errors.ACL_ERROR_INVALID_PARAM, "device")
    rt = runtime.get()
    rt.check_device_id(dev)
    link = rt.open_device(dev).link
    ptr, span = link.call(Op.IPC_IMPORT, key)
    alloc = _count_import(rt, ptr, span, link)
    if alloc is None:
        link.call(Op.IPC_CLOSE, ptr)
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"{key:#x} is this process's own export: use its handle")
    return rt.register(vmm.Physical(alloc, span, link, imported=True))


def _count_import(rt: runtime.Runtime, ptr: int, span: int, link: Link) -> Allocation | None:
    """One more import of the block at ``ptr``: its table entry (made by the first import,
    so this process may copy through it); None if the block is this process's own memory."""
    with rt.lock, _lock:
        entry = _imports.get(ptr)
        if entry is not None:
            entry.count += 1
            return entry.alloc
        if ptr in rt.allocations:
            return None
        alloc = Allocation(ptr, span, span, 0, 0, link)
        rt.allocations[ptr] = alloc
        bisect.insort(rt.starts, ptr)
        _imports[ptr] = _Import(alloc, 1)
        return alloc


def close_import(phys: vmm.Physical) -> None:
    """The imported side of ``aclrtFreePhysical``: one import closed on the card; the block
    leaves this process's tables with its last import."""
    rt = runtime.get()
    ptr = phys.alloc.ptr
    with rt.lock, _lock:
        entry = _imports.get(ptr)
        if entry is not None and entry.alloc is phys.alloc:
            entry.count -= 1
            if not entry.count:
                del _imports[ptr]
                if rt.allocations.get(ptr) is phys.alloc:
                    del rt.allocations[ptr]
                    del rt.starts[bisect.bisect_left(rt.starts, ptr)]
    if phys.link.alive():
        phys.link.call(Op.IPC_CLOSE, ptr)


def _forget(link: Link) -> None:
    """The card is released: imported blocks leave the tables quietly (the worker drops the
    imports when this process detaches), exports of this process go."""
    rt = runtime.get()
    for obj in list(rt.handles.values()):
        if type(obj) is vmm.Physical and obj.link is link and obj.imported:
            rt.allocations.pop(obj.alloc.ptr, None)
    with _lock:
        for key in [k for k, p in _exported.items() if p.link is link]:
            del _exported[key]
        for ptr in [p for p, entry in _imports.items() if entry.alloc.link is link]:
            del _imports[ptr]


runtime.on_close_device(_forget)


vmm.close_import = close_import
