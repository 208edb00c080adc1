"""The on-disk compile cache: kernel binaries (their Python source and metadata) as files, so a
second run of the same program compiles nothing.

Where: ``ACL_OP_COMPILER_CACHE_DIR`` (``acl.set_compile_opt``), else ``ASCEND_CACHE_PATH``,
else ``$HOME/atc_data``; files live in ``<dir>/npuemu_kernels/``. When: the real runtime's
default ``ACL_OP_COMPILER_CACHE_MODE`` is ``disable``; npuemu enables the cache when that
option is ``enable``/``force`` **or when ``ASCEND_CACHE_PATH`` is set** (our choice: setting
the variable states the intent). ``force`` empties the directory once, then caches.
``ACL_OP_DEBUG_LEVEL`` other than 0 disables it, as the real runtime does.

Trust (checked on every read and every write, as ssh's StrictModes checks a user's files):
what this process compiles from is executed on the card, so the cache is used only if no
other user could have written it.

- ``npuemu_kernels`` itself is opened with ``O_NOFOLLOW`` (not a symlink) and must be a
  directory owned by the running uid (or root), not group- or world-writable.
- Every directory above it, up to ``/`` (the real path), must be owned by the running uid or
  root and not group- or world-writable, unless its sticky bit is set (``/tmp``: there
  others cannot rename or remove what they do not own, so the path below cannot be swapped).
- Each file is opened relative to that directory (``openat``) with ``O_NOFOLLOW``, then
  ``fstat``'ed: a regular file owned by the uid, not group- or world-writable, at most
  ``FILE_MAX`` bytes.

Directories the cache creates are 0700 and its files 0600. A directory that fails the check
is not used at all (nothing is read from or written to it): the op is compiled fresh and the
host log (plog, WARNING) says why, once per directory and reason per process; a file that
fails it is a miss. ``STATS["refused"]`` counts both.

Threading model: any thread may read and write the cache (the executor holds only its card's
op-map lock); files are replaced atomically by rename, so concurrent writers of one entry
leave one whole file. ``STATS``, ``_warned`` and ``_flushed`` are updated without a lock: a
lost count or a repeated warning under a race is harmless.

Content: a file holds the key digest, the kernel's metadata (JSON: name, digest, tiling,
workspace) and its *source* (text, never byte code), with a SHA-256 over both. A truncated,
tampered or undecodable file is a miss (deleted and rebuilt), never executed; metadata that
does not describe the op is refused by ``compiler.from_record`` and rebuilt the same way.

Size cap: ``ASCEND_MAX_OP_CACHE_SIZE`` in MB (default 500; ``-1`` disables aging) and
``ASCEND_REMAIN_CACHE_SIZE_RATIO`` (1..100, default 50), or the same keys in
``<dir>/op_cache.ini`` section ``[op_compiler_cache]`` (the ini wins when both of its keys are
valid). After a write that takes the directory past the cap, files not used for more than
half an hour (``AGE_S``) are deleted, least recently used first, until the total is at most
ratio % of the cap; newer files are never deleted, so the cache may stay above the cap.

Several processes: a file is written to a temporary name in the same directory and renamed
into place (atomic). A hit refreshes the file's mtime (the "last used" time aging reads).

File layout: ``MAGIC`` (8 bytes) | u32 meta length | meta JSON | source UTF-8 |
SHA-256(meta JSON + source).
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import importlib.util
import json
import os
import secrets
import stat
import struct
import time

from npuemu.host.core import device, plog
from npuemu.shared import config, logring
from npuemu.shared.protocol import OP_SOURCE_MAX

MAGIC = b"NPUOPK2\n"
AGE_S = 30 * 60
SUBDIR = "npuemu_kernels"
FILE_MAX = OP_SOURCE_MAX + (64 << 10)
"""Largest cache file read: the largest kernel source plus room for its metadata."""
OPTIONS: dict[str, str] = {}
"""Compile options set by ``acl.set_compile_opt`` (names as the real enum)."""
STATS = {"reads": 0, "writes": 0, "corrupt": 0, "aged": 0, "refused": 0}
_flushed: set[str] = set()
_warned: set[tuple[str, str]] = set()
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def directory() -> str | None:
    """The cache directory if the cache is enabled (created 0700 if absent), else None."""
    mode = OPTIONS.get("ACL_OP_COMPILER_CACHE_MODE", "")
    if OPTIONS.get("ACL_OP_DEBUG_LEVEL", "0") not in ("", "0"):
        return None
    env = config.op_disk_cache_path()
    if mode not in ("enable", "force") and not (env and mode != "disable"):
        return None
    base = OPTIONS.get("ACL_OP_COMPILER_CACHE_DIR") or env or os.path.join(
        os.path.expanduser("~"), "atc_data")
    path = os.path.join(os.path.abspath(base), SUBDIR)
    with contextlib.suppress(OSError):  # the trust check reports what is wrong
        _make_dirs(path)
    return path


def _make_dirs(path: str) -> None:
    """Create ``path`` and missing parents, each 0700 (the umask may only remove bits)."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)


# trust ------------------------------------------------------------------------------------------
def dir_problem(st: os.stat_result, uid: int, *, leaf: bool) -> str | None:
    """Why a directory with status ``st`` cannot be trusted by ``uid`` (None if it can):
    owned by ``uid`` or root, and not g/o-writable, except (not for ``leaf``, the cache
    directory itself) a sticky one."""
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid not in (uid, 0):
        return f"owned by uid {st.st_uid}, not {uid} or root"
    if st.st_mode & 0o022 and (leaf or not st.st_mode & stat.S_ISVTX):
        return f"mode {stat.S_IMODE(st.st_mode):04o} lets others write it"
    return None


def file_problem(st: os.stat_result, uid: int) -> str | None:
    """Why a cache file with status ``st`` cannot be trusted by ``uid`` (None if it can)."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not {uid}"
    if st.st_mode & 0o022:
        return f"mode {stat.S_IMODE(st.st_mode):04o} lets others write it"
    if st.st_size > FILE_MAX:
        return f"{st.st_size} bytes (at most {FILE_MAX})"
    return None


def _chain_problem(path: str, uid: int) -> str | None:
    """The first directory above ``path`` (its real path, up to /) that fails the check."""
    folder = os.path.dirname(os.path.realpath(path))
    while True:
        try:
            problem = dir_problem(os.stat(folder), uid, leaf=False)
        except OSError as err:
            return f"{folder}: {err.strerror}"
        if problem is not None:
            return f"{folder} is {problem}"
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def open_dir(path: str) -> int | None:
    """An fd of the cache directory ``path`` if it passes the trust check (see the module
    docstring), else None after a warning."""
    uid = os.geteuid()
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as err:
        _refuse(path, f"cannot be opened as a directory without following links: "
                      f"{err.strerror}")
        return None
    problem = dir_problem(os.fstat(fd), uid, leaf=True)
    problem = f"{path} is {problem}" if problem else _chain_problem(path, uid)
    if problem is not None:
        os.close(fd)
        _refuse(path, problem)
        return None
    return fd


def _refuse(path: str, why: str) -> None:
    STATS["refused"] += 1
    if (path, why) not in _warned:
        _warned.add((path, why))
        plog.log(logring.WARNING, f"op compile cache {path} not used ({why}): ops are "
                                  "compiled fresh, nothing is read from or written to it")


def _read_file(fd: int, name: str, path: str) -> bytes | None:
    """The bytes of ``name`` in the directory ``fd`` if it is a trusted file, else None."""
    try:
        file_fd = os.open(name, _READ_FLAGS, dir_fd=fd)
    except OSError:
        return None  # absent (a miss), or a symlink (ELOOP): nothing to read
    try:
        problem = file_problem(os.fstat(file_fd), os.geteuid())
        if problem is not None:
            _refuse(os.path.join(path, name), problem)
            return None
        data = _read_capped(file_fd)
        with contextlib.suppress(OSError):
            os.utime(file_fd)
        return data
    except OSError:
        return None
    finally:
        os.close(file_fd)


def _read_capped(fd: int) -> bytes:
    """Everything up to ``FILE_MAX + 1`` bytes of ``fd`` (more means too large)."""
    chunks, left = [], FILE_MAX + 1
    while left > 0 and (chunk := os.read(fd, left)):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# entries -----------------------------------------------------------------------------------------
def key_digest(key: tuple) -> str:
    """A digest of an op-map key that is stable across processes and Python builds. The
    node's SoC is part of it: a kernel's tiling follows the SoC's core count, so a file
    written on another SoC's node is not this one's (as ATC caches kernels per SoC)."""
    text = repr((importlib.util.MAGIC_NUMBER, device.soc_name(), key))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _open() -> tuple[int, str] | None:
    """``(fd, path)`` of the enabled and trusted cache directory, emptied first once per
    process in ``force`` mode; None when there is none to use."""
    path = directory()
    fd = open_dir(path) if path is not None else None
    if fd is None or path is None:
        return None
    if path not in _flushed and OPTIONS.get("ACL_OP_COMPILER_CACHE_MODE") == "force":
        _flushed.add(path)
        _empty(fd)
    return fd, path


def read(key: tuple) -> tuple[dict, str] | None:
    """``(meta, source)`` cached for ``key``; None if absent, untrusted or corrupt (a
    corrupt file is deleted)."""
    opened = _open()
    if opened is None:
        return None
    fd, path = opened
    try:
        digest = key_digest(key)
        data = _read_file(fd, digest + ".npuop", path)
        if data is None:
            return None
        found = parse(data, digest)
        if found is None:
            _discard(fd, path, digest, "is corrupt")
            return None
        STATS["reads"] += 1
        return found
    finally:
        os.close(fd)


def parse(data: bytes, digest: str) -> tuple[dict, str] | None:
    """``(meta, source)`` of a cache file's bytes, or None unless they are intact."""
    if not 12 + 32 <= len(data) <= FILE_MAX or not data.startswith(MAGIC):
        return None
    (n,) = struct.unpack_from("<I", data, 8)
    if 12 + n > len(data) - 32:
        return None
    body, check = data[12:-32], data[-32:]
    if hashlib.sha256(body).digest() != check:
        return None
    try:
        meta = json.loads(body[:n])
        source = body[n:].decode("utf-8")
    except (ValueError, RecursionError):
        return None
    if not isinstance(meta, dict) or meta.get("key") != digest or not source:
        return None
    return meta, source


def invalid(key: tuple, why: str) -> None:
    """Delete the entry of ``key`` whose content the caller refused (``why``)."""
    opened = _open()
    if opened is not None:
        fd, path = opened
        try:
            _discard(fd, path, key_digest(key), why)
        finally:
            os.close(fd)


def _discard(fd: int, path: str, digest: str, why: str) -> None:
    STATS["corrupt"] += 1
    plog.log(logring.WARNING, f"op cache file {path}/{digest}.npuop {why}: rebuilt")
    with contextlib.suppress(OSError):
        os.unlink(digest + ".npuop", dir_fd=fd)


def encode(digest: str, meta: dict, source: str) -> bytes:
    """The bytes of one cache file."""
    body = json.dumps({**meta, "key": digest}).encode()
    text = source.encode("utf-8")
    return (MAGIC + struct.pack("<I", len(body)) + body + text
            + hashlib.sha256(body + text).digest())


def write(key: tuple, meta: dict, source: str) -> None:
    """Store a binary (atomically, 0600), then age the directory if it is over its cap."""
    opened = _open()
    if opened is None:
        return
    fd, path = opened
    try:
        digest = key_digest(key)
        if _store(fd, digest + ".npuop", encode(digest, meta, source)):
            STATS["writes"] += 1
            age(path, fd)
    finally:
        os.close(fd)


def _store(fd: int, name: str, data: bytes) -> bool:
    tmp = f".tmp-{secrets.token_hex(8)}.npuop"
    try:
        file_fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=fd)
        with os.fdopen(file_fd, "wb") as f:
            f.write(data)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        return True
    except OSError as err:
        plog.log(logring.WARNING, f"op cache write failed: {err}")
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        return False


def _empty(fd: int) -> None:
    """``force`` mode: delete every cache file once per process."""
    for name in os.listdir(fd):
        if name.endswith(".npuop"):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)


# aging -------------------------------------------------------------------------------------------
def limits(path: str) -> tuple[int, int]:
    """``(cap MB or -1, remain ratio %)`` from op_cache.ini, else the env vars."""
    ini = configparser.ConfigParser()
    with contextlib.suppress(OSError, configparser.Error, KeyError, ValueError):
        ini.read(os.path.join(os.path.dirname(path), "op_cache.ini"))
        sec = ini["op_compiler_cache"]
        cap, ratio = int(sec["max_op_cache_size"]), int(sec["remain_cache_size_ratio"])
        if _valid(cap, ratio):
            return cap, ratio
    return config.op_disk_cache_limits()


def _valid(cap: int, ratio: int) -> bool:
    return (cap == -1 or 1 <= cap < 2**31 - 1) and 1 <= ratio <= 100


def age(path: str, fd: int) -> None:
    """Delete files unused for more than ``AGE_S`` (oldest first) while over the cap;
    ``fd`` is the (checked) directory ``path``."""
    cap_mb, ratio = limits(path)
    if cap_mb == -1:
        return
    files = []
    for name in os.listdir(fd):
        if name.endswith(".npuop") and not name.startswith(".tmp-"):
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                files.append((st.st_mtime, st.st_size, name))
    total = sum(size for _t, size, _n in files)
    if total <= cap_mb << 20:
        return
    keep = (cap_mb << 20) * ratio // 100
    now = time.time()
    for mtime, size, name in sorted(files):
        if total <= keep or now - mtime <= AGE_S:
            break
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
            total -= size
            STATS["aged"] += 1
