"""POSIX shared-memory segments and semaphores, named per node.

Every name npuemu creates starts with ``/npuemu.<node>.`` so that a node's supervisor (and
the test suite's leak check) can find and unlink everything a node ever made, even after a
``kill -9``. posix_ipc has no resource tracker: ownership and cleanup are ours.

| name                                  | kind      | created by | content                  |
|---------------------------------------|-----------|------------|--------------------------|
| ``/npuemu.<node>.reg``                | segment   | supervisor | node registry            |
| ``/npuemu.<node>.d<id>.ctl``          | segment   | worker     | device control/telemetry |
| ``/npuemu.<node>.d<id>.hbm`` / ``.ddr``| segment  | worker     | sparse memory arenas     |
| ``/npuemu.<node>.d<id>.hbm.pages``   | segment   | worker     | far page tables of the   |
|   / ``.ddr.pages``                    |           |            | arenas (``pages.py``)    |
| ``/npuemu.<node>.d<id>.bell``         | semaphore | worker     | doorbell: wakes worker   |
| ``/npuemu.<node>.d<id>.log``          | segment   | worker     | device log ring (kept    |
|                                       |           |            | until the node stops)    |
| ``/npuemu.<node>.d<id>.c<slot>``      | segment   | host       | rings, stream and event  |
|                                       |           |            | tables of one client     |
| ``/npuemu.<node>.d<id>.c<slot>.wake`` | semaphore | host       | reply ready              |
| ``/npuemu.<node>.d<id>.c<slot>.sync`` | semaphore | host       | tasks completed          |
| ``/npuemu.<node>.d<id>.c<slot>.report``| semaphore| host       | exception/callback report|
| ``/npuemu.<node>.p<pid>.<token>``     | segment   | host       | pinned host memory       |
| ``/npuemu.<node>.hccl.<token>``       | segment   | host       | communicator (collectives)|
| ``/npuemu.<node>.p<pid>.hccl.<token>.r<rank>``| semaphore| host (rank)| wakes a waiting rank |

Ownership and safety (a node belongs to the user who started it):

- every name is created with ``O_EXCL`` and mode 0600 (``Segment(create=True)``,
  ``semaphore(create=True)``): an existing name is never adopted;
- every segment opened (not created) is checked with ``fstat`` on the open descriptor before
  it is mapped: it must belong to this process's effective uid and give no access to group or
  others, else ``PermissionError``. A name another user planted is therefore refused by hosts
  and workers alike. Semaphores are checked the same way by ``stat`` of their file after the
  open (posix_ipc gives no descriptor);
- pinned host blocks carry a random token (``pinned_name``), so their names cannot be guessed
  and planted in advance;
- :func:`clean_dead` removes the names of dead nodes of this user: only names whose node has
  no supervisor listening and that no live process maps.

posix_ipc errors are converted here, and only here, into ``OSError``/``FileNotFoundError``.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import secrets
import stat

import posix_ipc

from npuemu.shared import pages

PREFIX = "npuemu."
SHM_DIR = "/dev/shm"


def node_prefix(node: str) -> str:
    """Common prefix of every segment name of ``node`` (without the leading slash)."""
    return f"{PREFIX}{node}."


def name(node: str, *parts: object) -> str:
    """``/npuemu.<node>.<part>.<part>...``: a segment or semaphore name."""
    return "/" + node_prefix(node) + ".".join(str(p) for p in parts)


def comm_semaphore(segment: str, rank: int, pid: int) -> str:
    """The semaphore of ``rank`` of communicator ``segment`` (``/npuemu.<node>.hccl.<token>``),
    named under the rank's host pid: the supervisor removes it with that process's other
    ``p<pid>.`` names when the process goes, however it ends."""
    prefix, _, token = segment.rpartition(".hccl.")
    return f"{prefix}.p{pid}.hccl.{token}.r{rank}"


class Segment:
    """One mapped shared-memory segment (mirrors ``multiprocessing.shared_memory``).

    ``close()`` releases this process's mapping; ``unlink()`` removes the name for every
    process. The creator owns ``unlink``. Sparse: a 64 GiB segment costs nothing until touched.
    """

    buf: memoryview
    """The mapping's bytes; released by ``close()`` (any use after it raises ValueError)."""
    mm: mmap.mmap | None = None
    _addr_anchor: ctypes.Array[ctypes.c_char] | None = None

    _far_base = 0  # a far mapping (``far=True``): its reservation, and length
    _far_span = 0

    def __init__(self, name: str, size: int = 0, *, create: bool = False,
                 far: bool = False) -> None:
        """``far``: an arena (``pages.py``): the segment is mapped at the start of a
        reservation of ``pages.span(size)`` bytes that far pages are mapped into."""
        self.name = name
        flags = posix_ipc.O_CREX if create else 0
        try:
            shm = posix_ipc.SharedMemory(name, flags, mode=0o600, size=size if create else 0)
        except posix_ipc.ExistentialError as err:
            kind = FileExistsError if create else FileNotFoundError
            raise kind(f"shared memory {name}: {err}") from err
        except posix_ipc.PermissionsError as err:
            raise PermissionError(f"shared memory {name}: {err}") from err
        if not create:
            try:
                check_owner(os.fstat(shm.fd), name)
            except PermissionError:
                shm.close_fd()
                raise
        if not create and shm.size == 0:  # its creator has not sized it yet
            shm.close_fd()
            raise FileNotFoundError(f"shared memory {name} is not ready yet")
        try:
            self.size = shm.size
            if far:
                self._map_far(shm.fd)
            else:
                self.mm = mmap.mmap(shm.fd, shm.size)
                self.buf = memoryview(self.mm)
            self.fd = os.dup(shm.fd)
        except BaseException:
            if create:
                with contextlib.suppress(posix_ipc.ExistentialError):
                    shm.unlink()
            raise
        finally:
            shm.close_fd()

    def _map_far(self, fd: int) -> None:
        length = pages.span(self.size)
        base = pages.reserve(length)
        try:
            pages.map_memory(base, self.size, pages.PROT_RW, pages.MAP_SHARED | pages.MAP_FIXED,
                             fd, 0)
        except BaseException:
            pages.unmap_memory(base, length)
            raise
        self._far_base, self._far_span = base, length
        self.buf = memoryview((ctypes.c_char * self.size).from_address(base)).cast("B")

    @property
    def address(self) -> int:
        """Address of byte 0 of this mapping in this process (for ``ctypes.memmove``)."""
        if self._far_base:
            return self._far_base
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
        self.buf.release()  # idempotent
        if self.mm is not None:
            with contextlib.suppress(BufferError):
                self.mm.close()
            self.mm = None
            os.close(self.fd)
        elif self._far_base:
            pages.unmap_memory(self._far_base, self._far_span)
            self._far_base = 0
            os.close(self.fd)

    def unlink(self) -> None:
        """Remove the name (idempotent)."""
        unlink_segment(self.name)

    def __repr__(self) -> str:
        return f"Segment({self.name!r}, size={self.size})"


def check_owner(st: os.stat_result, name: str) -> None:
    """Refuse a name that another user owns or that group or others may open."""
    if st.st_uid != os.geteuid():
        raise PermissionError(f"{name} belongs to uid {st.st_uid}, not to this user "
                              f"({os.geteuid()}): refused")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise PermissionError(f"{name} has mode {stat.S_IMODE(st.st_mode):o}: open to other "
                              "users, refused")


def pinned_name(node: str, pid: int) -> str:
    """A fresh, unguessable name for one pinned host block of process ``pid``."""
    return name(node, f"p{pid}", secrets.token_hex(8))


def unlink_segment(name: str) -> None:
    """Remove a segment name; a name that is gone or not ours to remove is left alone."""
    with contextlib.suppress(posix_ipc.ExistentialError, posix_ipc.PermissionsError):
        posix_ipc.unlink_shared_memory(name)


def semaphore(name: str, *, create: bool = False) -> posix_ipc.Semaphore:
    """Open (or exclusively create, value 0) a named semaphore."""
    try:
        if create:
            return posix_ipc.Semaphore(name, posix_ipc.O_CREX, mode=0o600, initial_value=0)
        sem = posix_ipc.Semaphore(name)
    except posix_ipc.ExistentialError as err:
        raise FileNotFoundError(f"semaphore {name}: {err}") from err
    except posix_ipc.PermissionsError as err:
        raise PermissionError(f"semaphore {name}: {err}") from err
    try:
        check_owner(os.stat(f"{SHM_DIR}/sem.{name[1:]}"), name)
    except (FileNotFoundError, PermissionError) as err:  # unlinked since the open, or foreign
        sem.close()
        raise err from None
    return sem


def unlink_semaphore(name: str) -> None:
    with contextlib.suppress(posix_ipc.ExistentialError, posix_ipc.PermissionsError):
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


def listening_nodes() -> list[str]:
    """Nodes whose supervisor listens: the abstract sockets ``@npuemu.<node>`` of
    ``/proc/net/unix`` (see shared/control.py)."""
    found = []
    with contextlib.suppress(OSError), open("/proc/net/unix") as f:
        for line in f:
            parts = line.split()
            path = parts[7] if len(parts) >= 8 else ""
            if path.startswith("@" + PREFIX):
                found.append(path[1 + len(PREFIX):])
    return found


def _mapped_names() -> set[str]:
    """Entries of /dev/shm (``npuemu.*``, ``sem.npuemu.*``) that some live process maps or
    holds open. Reads ``/proc/<pid>/maps`` and ``/proc/<pid>/fd`` of every process we may read
    (a process of another user cannot hold our 0600 names anyway). Matched by inode, not by
    path: glibc's ``sem_open`` creates a semaphore under a temporary name, maps it and then
    links it, so its creator's maps show ``/dev/shm/sem.XXXXXX (deleted)``."""
    inodes: set[int] = set()
    marker = SHM_DIR + "/"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/maps") as f:
            for line in f:
                if marker in line:  # address perms offset dev inode path
                    inodes.add(int(line.split(maxsplit=5)[4]))
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(marker):
                        inodes.add(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
    held: set[str] = set()
    for entry in leftovers():
        with contextlib.suppress(OSError):
            if os.stat(f"{SHM_DIR}/{entry}").st_ino in inodes:
                held.add(entry)
    return held


def clean_dead() -> dict[str, int]:
    """Remove the names of dead nodes of this user; returns ``{node: names removed}``.

    A name is removed only if (1) it belongs to this effective uid, (2) no node whose
    supervisor listens has it (a supervisor binds its socket before it creates any name, and
    a node's names all start with ``npuemu.<node>.``), and (3) no live process maps it or
    holds it open. /proc is scanned only when some name passes (1) and (2), so a start with
    nothing stale costs one ``listdir`` and one read of ``/proc/net/unix``.
    """
    entries = leftovers()
    if not entries:
        return {}
    live = tuple(node_prefix(n) for n in listening_nodes())
    me = os.geteuid()
    candidates = []
    for entry in entries:
        bare = entry[4:] if entry.startswith("sem.") else entry
        if bare.startswith(live):
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"{SHM_DIR}/{entry}").st_uid == me:
                candidates.append((entry, bare))
    if not candidates:
        return {}
    held = _mapped_names()
    removed: dict[str, int] = {}
    for entry, bare in candidates:
        if entry in held:
            continue
        if entry.startswith("sem."):
            unlink_semaphore("/" + bare)
        else:
            unlink_segment("/" + bare)
        node = bare[len(PREFIX):].split(".", 1)[0]
        removed[node] = removed.get(node, 0) + 1
    return removed


def open_arena(node: str, dev: int, kind: int, size: int = 0,
               create: bool = False) -> tuple[Segment, Segment, pages.FarPages]:
    """An arena of card ``dev`` (``address.ARENA_NAMES[kind]``) with its far pages: the
    arena segment, its page table segment and this process's :class:`pages.FarPages`.
    ``create``: the card's side (exclusive names, a table of unused pages)."""
    base = name(node, f"d{dev}", ("hbm", "ddr")[kind])
    seg = Segment(base, size, create=create, far=True)
    try:
        table = Segment(base + ".pages", pages.table_size(seg.size), create=create)
    except BaseException:
        if create:
            seg.unlink()
        seg.close()
        raise
    make = pages.FarPages.create if create else pages.FarPages
    return seg, table, make(table.buf, seg.address, seg.fd, seg.size)
