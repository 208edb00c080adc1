"""Futex wait and wake on a 32-bit word of a shared mapping (Linux ``futex(2)``, called
through libc's ``syscall``; ctypes releases the GIL for the call).

One ``wake`` posts every sleeper of a word in one system call: the rank that arrives last
at a barrier wakes all its peers at once instead of posting one semaphore per peer (each
post lets the woken process preempt the poster, so p - 1 posts in a row cost p - 1 trips
through the scheduler on a loaded machine). The futexes are shared, not private: the word
lies in a POSIX shared-memory segment that several processes map.

Where ``futex(2)`` has no known number (``available`` False), ``wait`` sleeps a short
slice and ``wake`` does nothing: callers re-check their condition after every wait, so
they stay correct, only slower.
"""

from __future__ import annotations

import ctypes
import os
import time

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(os.uname().machine)
_WAIT, _WAKE = 0, 1
_ALL = 0x7FFFFFFF
_FALLBACK_S = 0.0005
available = _SYS_FUTEX is not None


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long


def wait(address: int, expected: int, timeout: float) -> None:
    """Sleep while the u32 at ``address`` equals ``expected`` (low 32 bits), for at most
    ``timeout`` seconds; returns at once if it differs. A wake, a signal or a spurious
    return ends it early: the caller re-checks what it waits for."""
    if _SYS_FUTEX is None:
        time.sleep(min(timeout, _FALLBACK_S))
        return
    timeout = max(timeout, 0.0)
    ts = _Timespec(int(timeout), int((timeout - int(timeout)) * 1e9))
    _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_long(_WAIT),
             ctypes.c_long(expected & 0xFFFFFFFF), ctypes.byref(ts), ctypes.c_void_p(0),
             ctypes.c_long(0))


def wake(address: int) -> None:
    """Wake every process and thread sleeping on the word at ``address`` (does not block)."""
    if _SYS_FUTEX is not None:
        _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_long(_WAKE),
                 ctypes.c_long(_ALL), ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_long(0))
