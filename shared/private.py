"""Files and directories only their owner may read, as the node's shared-memory segments are:
the host's logs (``host/core/plog.py``), the device logs the CLIs export
(``tools/msnpureport.py``) and profiler output (``host/prof/``, ``tools/msprof.py``) hold
kernel names, addresses and timings of the user's program.

A file these helpers create is 0600 and a directory 0700 whatever the umask (a umask only
takes bits away). What exists already keeps its mode: a user who made a log directory
group-readable on purpose keeps it so.

Threading model: no state; any thread.
"""

from __future__ import annotations

import os
import shutil
from typing import IO, Any

__all__ = ["DIR_MODE", "FILE_MODE", "copy_file", "makedirs", "open_file"]

FILE_MODE = 0o600
DIR_MODE = 0o700


def makedirs(path: str, exist_ok: bool = True) -> None:
    """``os.makedirs`` whose every new directory (the parents it makes too) is 0700."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        if not exist_ok:
            raise FileExistsError(path)
        return
    parent = os.path.dirname(path)
    if parent != path:
        makedirs(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not (exist_ok and os.path.isdir(path)):
            raise


def open_file(path: str, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """``open(path, mode, **kwargs)`` for writing; a file it creates is 0600."""
    if not set(mode) & set("wax"):
        raise ValueError(f"open_file writes: mode {mode!r} has none of w, a, x")
    return open(path, mode, opener=_private_opener, **kwargs)


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, FILE_MODE)


def copy_file(src: str, dst: str) -> None:
    """Copy ``src``'s bytes to ``dst``, created 0600 (``shutil.copyfile`` would use the
    umask)."""
    with open(src, "rb") as f, open_file(dst, "wb") as out:
        shutil.copyfileobj(f, out)
