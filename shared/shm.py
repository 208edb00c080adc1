"""POSIX shared-memory segments and semaphores, named per node.

Every name npuemu creates starts with ``/npuemu.<node>.`` so that a node's supervisor (and
the test suite's leak check) can find and unlink everything a node ever made, even after a
``kill -9``. posix_ipc has no resource tracker: ownership and cleanup are ours.

| name                                  | kind      | created by | content                  |
|---------------------------------------|-----------|------------|--------------------------|
| ``/npuemu.<node>.reg``                | segment   | supervisor | node registry            |
| ``/npuemu.<node>.d<id>.ctl``          | segment   | worker     | device control/telemetry |
| ``/npuemu.<node>.d<id>.hbm`` / ``.ddr``| segment  | worker     | sparse memory arenas     |
| ``/npuemu.<node>.d<id>.bell``         | semaphore | worker     | doorbell: wakes worker   |
| ``/npuemu.<node>.d<id>.log``          | segment   | worker     | device log ring (kept    |
|                                       |           |            | until the node stops)    |
| ``/npuemu.<node>.d<id>.c<slot>``      | segment   | host       | rings, stream and event  |
|                                       |           |            | tables of one client     |
| ``/npuemu.<node>.d<id>.c<slot>.wake`` | semaphore | host       | reply ready              |
| ``/npuemu.<node>.d<id>.c<slot>.sync`` | semaphore | host       | tasks completed          |
| ``/npuemu.<node>.d<id>.c<slot>.report``| semaphore| host       | exception/callback report|
| ``/npuemu.<node>.p<pid>.<n>``         | segment   | host       | pinned host memory       |

posix_ipc errors are converted here, and only here, into ``OSError``/``FileNotFoundError``.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os

import posix_ipc

PREFIX = "npuemu."
SHM_DIR = "/dev/shm"


def node_prefix(node: str) -> str:
    """Common prefix of every segment name of ``node`` (without the leading slash)."""
    return f"{PREFIX}{node}."


def name(node: str, *parts: object) -> str:
    """``/npuemu.<node>.<part>.<part>...``: a segment or semaphore name."""
    return "/" + node_prefix(node) + ".".join(str(p) for p in parts)


class Segment:
    """One mapped shared-memory segment (mirrors ``multiprocessing.shared_memory``).

    ``close()`` releases this process's mapping; ``unlink()`` removes the name for every
    process. The creator owns ``unlink``. Sparse: a 64 GiB segment costs nothing until touched.
    """

    mm: mmap.mmap | None = None
    buf: memoryview | None = None
    _addr_anchor: ctypes.Array | None = None

    def __init__(self, name: str, size: int = 0, *, create: bool = False) -> None:
        self.name = name
        flags = posix_ipc.O_CREX if create else 0
        try:
            shm = posix_ipc.SharedMemory(name, flags, mode=0o600, size=size if create else 0)
        except posix_ipc.ExistentialError as err:
            kind = FileExistsError if create else FileNotFoundError
            raise kind(f"shared memory {name}: {err}") from err
        if not create and shm.size == 0:  # its creator has not sized it yet
            shm.close_fd()
            raise FileNotFoundError(f"shared memory {name} is not ready yet")
        try:
            self.size = shm.size
            self.mm = mmap.mmap(shm.fd, shm.size)
            self.fd = os.dup(shm.fd)
        except BaseException:
            if create:
                with contextlib.suppress(posix_ipc.ExistentialError):
                    shm.unlink()
            raise
        finally:
            shm.close_fd()
        self.buf = memoryview(self.mm)

    @property
    def address(self) -> int:
        """Address of byte 0 of this mapping in this process (for ``ctypes.memmove``)."""
        if self._addr_anchor is None:
            self._addr_anchor = (ctypes.c_char * self.size).from_buffer(self.mm)
        return ctypes.addressof(self._addr_anchor)

    def commit(self, offset: int, length: int) -> None:
        """Back ``[offset, offset+length)`` with real pages now; ``OSError(ENOSPC)`` if
        /dev/shm is full. Touching an uncommitted page of a full tmpfs raises SIGBUS instead."""
        os.posix_fallocate(self.fd, offset, length)

    def close(self) -> None:
        """Unmap in this process. Views handed out earlier must have been released."""
        self._addr_anchor = None
        if self.buf is not None:
            self.buf.release()
            self.buf = None
        if self.mm is not None:
            with contextlib.suppress(BufferError):
                self.mm.close()
            self.mm = None
            os.close(self.fd)

    def unlink(self) -> None:
        """Remove the name (idempotent)."""
        unlink_segment(self.name)

    def __repr__(self) -> str:
        return f"Segment({self.name!r}, size={self.size})"


def unlink_segment(name: str) -> None:
    with contextlib.suppress(posix_ipc.ExistentialError):
        posix_ipc.unlink_shared_memory(name)


def semaphore(name: str, *, create: bool = False) -> posix_ipc.Semaphore:
    """Open (or exclusively create, value 0) a named semaphore."""
    try:
        if create:
            return posix_ipc.Semaphore(name, posix_ipc.O_CREX, mode=0o600, initial_value=0)
        return posix_ipc.Semaphore(name)
    except posix_ipc.ExistentialError as err:
        raise FileNotFoundError(f"semaphore {name}: {err}") from err


def unlink_semaphore(name: str) -> None:
    with contextlib.suppress(posix_ipc.ExistentialError):
        posix_ipc.unlink_semaphore(name)


def wait(sem: posix_ipc.Semaphore, timeout: float) -> bool:
    """Block on ``sem`` for at most ``timeout`` seconds; True if it was posted."""
    try:
        sem.acquire(timeout)
    except posix_ipc.BusyError:
        return False
    return True


def leftovers(node: str | None = None) -> list[str]:
    """Names in /dev/shm that belong to ``node`` (or to any npuemu node)."""
    pre = node_prefix(node) if node else PREFIX
    try:
        entries = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    return sorted(e for e in entries if e.startswith(pre) or e.startswith("sem." + pre))


def unlink_all(node: str, only: str = "", keep: str = "") -> int:
    """Unlink every segment and semaphore of ``node`` whose name continues with ``only``,
    except the one named ``keep``."""
    pre = node_prefix(node) + only
    count = 0
    for entry in leftovers(node):
        if entry.startswith("sem."):
            if entry[4:].startswith(pre):
                unlink_semaphore("/" + entry[4:])
                count += 1
        elif entry.startswith(pre) and "/" + entry != keep:
            unlink_segment("/" + entry)
            count += 1
    return count
