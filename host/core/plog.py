"""Host-side logs ("plog"), as the real runtime writes them.

File: ``<root>/debug/plog/plog-<pid>_<YYYYmmddHHMMSSmmm>.log`` where root is
``ASCEND_PROCESS_LOG_PATH``, else ``ASCEND_WORK_PATH``, else ``$HOME/ascend/log``. Lines use
the slog format of ``shared/logring.py``; the level comes from ``ASCEND_GLOBAL_LOG_LEVEL`` /
``ASCEND_MODULE_LOG_LEVEL`` (default ERROR), read once. The file is created on the first
line written, so a program that logs nothing leaves no file. The file is created 0600 and
the directories it makes 0700 whatever the umask (``shared/private.py``): only its owner
reads what the program did. At DEBUG every malloc/free,
stream/event create/destroy and task submission is logged, so a host log and a device log
can be aligned by time. With ``ASCEND_LOG_PRINT_TO_STDOUT=1`` (or its older name
``ASCEND_SLOG_PRINT_TO_STDOUT=1``; read once) each line is also printed to stdout; the real
runtime then prints instead of writing the file, npuemu keeps the file too (the tools read it).

Threading model: no threads of its own; any thread logs. ``_lock`` guards ``_file`` (opened
by the first line written) and each line's write and flush, so lines never interleave.
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import threading
from typing import IO, Any

from npuemu.shared import config, logring, private

_lock = threading.Lock()
_file: IO[Any] | None = None  # opened in text mode
_level = logring.parse_global_level()
_modules = logring.parse_module_levels()
_proc = os.path.basename(sys.argv[0] or "python") or "python"
_to_stdout = config.log_to_stdout()
debug = min([_level, *_modules.values()]) <= logring.DEBUG
"""True when DEBUG lines are written (callers test it before formatting a message)."""


def root() -> str:
    for var in ("ASCEND_PROCESS_LOG_PATH", "ASCEND_WORK_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    return os.path.join(os.path.expanduser("~"), "ascend", "log")


def enabled(level: int, module: str = "RUNTIME") -> bool:
    threshold = _modules.get(module, _level)
    return threshold != logring.NULL and level >= threshold


def log(level: int, message: str, module: str = "RUNTIME") -> None:
    """Append one line to this process's plog if ``level`` is enabled for ``module``."""
    if not enabled(level, module):
        return
    global _file
    line = logring.format_line(level, module, os.getpid(), _proc, message)
    with _lock:
        if _file is None:
            _file = _open()
            if _file is not None:
                atexit.register(_file.close)  # flushed after every line; closed at exit
        if _file is not None:
            _file.write(line)
            _file.flush()
        if _to_stdout:
            sys.stdout.write(line)
            sys.stdout.flush()


def _open() -> IO[Any] | None:
    folder = os.path.join(root(), "debug", "plog")
    now = datetime.datetime.now()
    stamp = now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"
    try:
        private.makedirs(folder)
        return private.open_file(os.path.join(folder, f"plog-{os.getpid()}_{stamp}.log"), "a",
                                 encoding="utf-8")
    except OSError as err:
        print(f"npuemu: cannot write host log in {folder}: {err}", file=sys.stderr)
        return None


def path() -> str | None:
    """The plog file of this process, if one was written."""
    return None if _file is None else _file.name
