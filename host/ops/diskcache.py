"""The on-disk compile cache (reference §2.7): compiled kernel binaries as files, so a second
run of the same program compiles nothing.

Where: ``ACL_OP_COMPILER_CACHE_DIR`` (``acl.set_compile_opt``), else ``ASCEND_CACHE_PATH``,
else ``$HOME/atc_data``; files live in ``<dir>/npuemu_kernels/``. When: the reference's
default ``ACL_OP_COMPILER_CACHE_MODE`` is ``disable``; npuemu enables the cache when that
option is ``enable``/``force`` **or when ``ASCEND_CACHE_PATH`` is set** (our choice: setting
the variable states the intent). ``force`` empties the directory once, then caches.
``ACL_OP_DEBUG_LEVEL`` other than 0 disables it, as the reference says.

Size cap: ``ASCEND_MAX_OP_CACHE_SIZE`` in MB (default 500; ``-1`` disables aging) and
``ASCEND_REMAIN_CACHE_SIZE_RATIO`` (1..100, default 50), or the same keys in
``<dir>/op_cache.ini`` section ``[op_compiler_cache]`` (the ini wins when both of its keys are
valid). After a write that takes the directory past the cap, files not used for more than
half an hour (``AGE_S``) are deleted, least recently used first, until the total is at most
ratio % of the cap; newer files are never deleted, so the cache may stay above the cap.

Safety with several processes: a file is written to a temporary name in the same directory
and renamed into place (atomic); its header carries the key digest and the byte code's
SHA-256, so a truncated or corrupted file is deleted and rebuilt, never trusted. A hit
refreshes the file's mtime (the "last used" time aging reads).

File layout: ``MAGIC`` (8 bytes) | u32 meta length | meta JSON | code | SHA-256(code).
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import importlib.util
import json
import os
import struct
import tempfile
import time

from npuemu.host.core import plog
from npuemu.shared import config, logring

MAGIC = b"NPUOPK1\n"
AGE_S = 30 * 60
SUBDIR = "npuemu_kernels"
OPTIONS: dict[str, str] = {}
"""Compile options set by ``acl.set_compile_opt`` (names as the reference's enum)."""
STATS = {"reads": 0, "writes": 0, "corrupt": 0, "aged": 0}
_flushed: set[str] = set()


def directory() -> str | None:
    """The cache directory if the cache is enabled, else None."""
    mode = OPTIONS.get("ACL_OP_COMPILER_CACHE_MODE", "")
    if OPTIONS.get("ACL_OP_DEBUG_LEVEL", "0") not in ("", "0"):
        return None
    env = config.op_disk_cache_path()
    if mode not in ("enable", "force") and not (env and mode != "disable"):
        return None
    base = OPTIONS.get("ACL_OP_COMPILER_CACHE_DIR") or env or os.path.join(
        os.path.expanduser("~"), "atc_data")
    path = os.path.join(base, SUBDIR)
    os.makedirs(path, exist_ok=True)
    if mode == "force" and path not in _flushed:
        _flushed.add(path)
        for name in os.listdir(path):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, name))
    return path


def key_digest(key: tuple) -> str:
    """A digest of an op-map key that is stable across processes and Python builds."""
    text = repr((importlib.util.MAGIC_NUMBER, key))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def read(key: tuple) -> tuple[dict, bytes] | None:
    """``(meta, code)`` cached for ``key``; None if absent or corrupt (a corrupt file is
    deleted)."""
    path = directory()
    if path is None:
        return None
    digest = key_digest(key)
    file = os.path.join(path, digest + ".npuop")
    try:
        with open(file, "rb") as f:
            data = f.read()
    except OSError:
        return None
    found = _parse(data, digest)
    if found is None:
        STATS["corrupt"] += 1
        plog.log(logring.WARNING, f"op cache file {file} is corrupt: rebuilt")
        with contextlib.suppress(OSError):
            os.unlink(file)
        return None
    with contextlib.suppress(OSError):
        os.utime(file)
    STATS["reads"] += 1
    return found


def _parse(data: bytes, digest: str) -> tuple[dict, bytes] | None:
    if len(data) < 12 + 32 or not data.startswith(MAGIC):
        return None
    (n,) = struct.unpack_from("<I", data, 8)
    try:
        meta = json.loads(data[12 : 12 + n])
    except ValueError:
        return None
    code, check = data[12 + n : -32], data[-32:]
    if not isinstance(meta, dict) or meta.get("key") != digest \
            or hashlib.sha256(code).digest() != check:
        return None
    return meta, code


def write(key: tuple, meta: dict, code: bytes) -> None:
    """Store a compiled binary (atomically), then age the directory if it is over its cap."""
    path = directory()
    if path is None:
        return
    digest = key_digest(key)
    blob = json.dumps({**meta, "key": digest}).encode()
    data = MAGIC + struct.pack("<I", len(blob)) + blob + code + hashlib.sha256(code).digest()
    fd, tmp = tempfile.mkstemp(dir=path, prefix=".tmp-", suffix=".npuop")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(path, digest + ".npuop"))
    except OSError as err:
        plog.log(logring.WARNING, f"op cache write failed: {err}")
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    STATS["writes"] += 1
    age(path)


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


def age(path: str) -> None:
    """Delete files unused for more than ``AGE_S`` (oldest first) while over the cap."""
    cap_mb, ratio = limits(path)
    if cap_mb == -1:
        return
    files = []
    for name in os.listdir(path):
        if name.endswith(".npuop") and not name.startswith(".tmp-"):
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(path, name))
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
            os.unlink(os.path.join(path, name))
            total -= size
            STATS["aged"] += 1
