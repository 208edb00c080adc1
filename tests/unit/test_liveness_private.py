"""``shared/liveness.py`` (a zombie is dead, though ``os.kill(pid, 0)`` still succeeds) and
``shared/private.py`` (0600 files and 0700 directories under any umask; existing directories
keep their mode)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

from npuemu.shared import liveness, private


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_zombie_is_dead_for_a_watch_but_not_for_kill_0() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watch = liveness.ProcessWatch(child.pid)
        assert watch.alive() and liveness.alive_now(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while watch.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(child.pid, 0)  # still there: a zombie, not yet reaped
        assert not watch.alive() and not liveness.alive_now(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not watch.alive()  # dead stays dead after the reap
    watch.close()
    assert not liveness.ProcessWatch(child.pid).alive()  # a reaped pid: dead at once


def test_private_files_and_directories_under_umask_0(tmp_path) -> None:
    old = os.umask(0)
    try:
        shared = tmp_path / "shared"
        shared.mkdir(0o755)  # exists already: keeps its mode
        private.makedirs(str(shared / "a" / "b"))
        with private.open_file(str(shared / "a" / "b" / "x.txt"), "w", encoding="utf-8") as f:
            f.write("x")
            assert f.name == str(shared / "a" / "b" / "x.txt")
        with private.open_file(str(shared / "a" / "y.bin"), "ab") as f:
            f.write(b"y")
        private.copy_file(str(shared / "a" / "y.bin"), str(shared / "z.bin"))
        with open(tmp_path / "plain.txt", "w") as f:  # what the umask alone gives
            f.write("p")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "plain.txt") == 0o666
    assert _mode(shared) == 0o755
    assert [_mode(shared / p) for p in ("a", "a/b")] == [0o700, 0o700]
    assert [_mode(shared / p) for p in ("a/b/x.txt", "a/y.bin", "z.bin")] == [0o600] * 3
    assert (shared / "z.bin").read_bytes() == b"y"
