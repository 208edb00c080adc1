"""Device side of IPC shareable handles (``aclrtMemExportToShareableHandle``,
``aclrtMemSetPidToShareableHandle``, ``aclrtMemImportFromShareableHandle``).

A share key names one live block (its arena and start offset, the base allocation; a
process that imports it gets the whole block). Only the exporting client may export a block
and allow pids; a client imports only if its host pid was allowed. An importing client may
copy through the block as if it were its own (``DeviceMemory.resolve``) until it closes the
import or detaches. Imports are counted per client: a client that imports one key twice
holds two imports and needs two closes (``aclrtFreePhysical`` of each imported handle),
as the real runtime's reference count does.

Lifetime: when the owner frees the block (or dies) while imports remain, the block becomes
an orphan: the owner's accounting drops it at once, its export key is gone (no new
imports), and the heap keeps it until the last importer closes or detaches; then it is
freed. A dead importer's imports are dropped by ``DeviceMemory.reclaim``. Nothing leaks:
every path ends in the heap's free. (Our choice: CANN's documentation
does not say what an importer sees after the exporter frees; keeping the memory alive for
it is what CUDA IPC and POSIX shared memory do.)

Pure bookkeeping over ``(arena kind, offset)`` block keys; no locks of its own
(``DeviceMemory.lock`` guards it).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

__all__ = ["ORPHAN", "Export", "Shares"]

ORPHAN = -1
"""Client of a block whose owner freed it while it is still imported."""


@dataclass
class Export:
    owner: int
    block: tuple[int, int]  # (arena kind, offset)
    pids: set[int] = field(default_factory=set)


class Shares:
    """Export keys, allowed pids and importers of the blocks of one device."""

    def __init__(self) -> None:
        self.exports: dict[int, Export] = {}
        self.key_of: dict[tuple[int, int], int] = {}
        self.importers: dict[tuple[int, int], dict[int, int]] = {}  # client -> imports

    def export(self, owner: int, block: tuple[int, int]) -> int:
        key = self.key_of.get(block)
        if key is None:
            key = secrets.randbits(63) | 1
            self.exports[key] = Export(owner, block)
            self.key_of[block] = key
        return key

    def imported(self, client: int, block: tuple[int, int]) -> bool:
        users = self.importers.get(block)
        return users is not None and client in users

    def add_importer(self, client: int, block: tuple[int, int]) -> None:
        """One more import of ``block`` by ``client``."""
        users = self.importers.setdefault(block, {})
        users[client] = users.get(client, 0) + 1

    def drop_importer(self, client: int, block: tuple[int, int], every: bool = False) -> bool:
        """Forget one import (all of ``client``'s with ``every``: it detached); True if the
        block has no importer left."""
        users = self.importers.get(block)
        if users is None or client not in users:
            return False
        users[client] -= 1
        if every or not users[client]:
            del users[client]
        if not users:
            del self.importers[block]
            return True
        return False

    def unexport(self, block: tuple[int, int]) -> None:
        key = self.key_of.pop(block, None)
        if key is not None:
            del self.exports[key]

    def blocks_imported_by(self, client: int) -> list[tuple[int, int]]:
        return [b for b, users in self.importers.items() if client in users]
