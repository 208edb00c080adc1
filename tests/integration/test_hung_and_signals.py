"""What crosses the driver seam when a card stops answering or the program is signalled.

- A SIGSTOPped worker: a wait with its own timeout ends by it; a call
  without one ends once the heartbeat is older than ``DEVICE_LOST_TIMEOUT_S`` (507010);
  ``query_device_status`` says ABNORMAL; after SIGCONT, reset + set attaches afresh.
- SIGTERM / SIGINT during a blocking synchronize end the program as any Python program
  does: no ``posix_ipc.SignalError`` traceback, nothing left behind.
- Ints beyond 64 bits on a real link: 107000, and the stream still
  completes.
"""

from __future__ import annotations

import signal
import time

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
LOST_HEARTBEAT = 507010
STREAM_SYNC_TIMEOUT = 507046
RT_PARAM_INVALID = 107000
ABNORMAL, NORMAL = 1, 0
BOUND_S = 20.0
"""The bug was a wait of more than 20 s; a generous bound that load cannot reach."""

PROG = "hung_and_signals.py"
"""The child program (``tests/progs/hung_and_signals.py``), one scenario a test."""


def test_a_stopped_worker_is_detected_and_every_wait_is_bounded(run_prog):
    r = run_program(run_prog, PROG, "hung", env=ENV, timeout=120)
    assert r["before"] == NORMAL
    assert r["sync"] == STREAM_SYNC_TIMEOUT, r  # its own 3 s timeout, not the card's
    assert r["sync_s"] < BOUND_S, r
    assert r["malloc"] == LOST_HEARTBEAT, r
    assert r["malloc_s"] < BOUND_S, r
    assert r["status"] == ABNORMAL and r["other_card"] == NORMAL, r
    assert r["sync_after"] == LOST_HEARTBEAT, r
    assert r["again"] == 0 and r["status_again"] == NORMAL, r


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_blocking_synchronize_ends_the_program(spawn_prog, sig):
    proc = spawn_prog(PROG, "blocked", env=ENV)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "READY", (line, proc.stderr.read() if proc.poll() is not None else "")
    time.sleep(0.3)  # inside the synchronize's sleep on the doorbell
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert "SignalError" not in err, err
    assert "NOT REACHED" not in out
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    else:
        assert proc.returncode != 0 and "KeyboardInterrupt" in err, err


def test_ints_the_wire_cannot_carry_are_107000_before_anything_is_counted(run_prog):
    r = run_program(run_prog, PROG, "overflow", env=ENV, timeout=120)
    assert set(r["wait"]) == {RT_PARAM_INVALID}
    assert r["create"] == [RT_PARAM_INVALID]
    assert r["sync"] == 0 and r["create_after"] == 0, r
