"""Is another process alive? ``ProcessWatch`` answers through a pidfd.

``os.kill(pid, 0)`` succeeds for a zombie: a process that was killed but not yet reaped by
its parent still has its pid, so a collective's survivors would wait the whole
HCCL_EXEC_TIMEOUT for a rank that can never arrive. A pidfd becomes readable as soon as its
process exits, reaped or not, and it names that process, not whichever later takes its pid
(from the moment it is opened: a pid reused before the watch was made is not detected). A
poll costs about as much as ``os.kill`` (1-3 us here); a process found dead stays dead
without further polls. Where pidfds are missing (Linux before 5.3), psutil's process
status decides (a zombie is dead), at 10-20 us.

Threading model: no threads; a watch holds no lock and may be polled from any thread (each
poll makes its own poll object). Its pidfd is closed by ``close`` (psutil decides after
that) or when the watch is collected.
"""

from __future__ import annotations

import os
import select

import psutil

__all__ = ["ProcessWatch", "alive_now"]


class ProcessWatch:
    """One process, watched from the moment the watch is made."""

    def __init__(self, pid: int) -> None:
        self.pid, self.fd, self.dead = pid, -1, False
        try:
            self.fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.dead = True
        except OSError:  # no pidfds here: psutil decides at each poll
            self.fd = -1

    def alive(self) -> bool:
        """False once the process has exited (a zombie included). Does not block."""
        if self.dead:
            return False
        if self.fd < 0:
            self.dead = not alive_now(self.pid)
        else:
            poll = select.poll()
            poll.register(self.fd, select.POLLIN)
            self.dead = bool(poll.poll(0))
        return not self.dead

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


def alive_now(pid: int) -> bool:
    """One look (psutil, 10-20 us): True if ``pid`` names a process that is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # exists, but we may not look at it
        return True
