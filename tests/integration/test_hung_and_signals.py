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
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
LOST_HEARTBEAT = 507010
STREAM_SYNC_TIMEOUT = 507046
RT_PARAM_INVALID = 107000
ABNORMAL, NORMAL = 1, 0
BOUND_S = 20.0
"""The bug was a wait of more than 20 s; a generous bound that load cannot reach."""

PRELUDE = CHILD_HELPERS + """
import signal
from npuemu.host.core import runtime
"""

HUNG = """
ok(acl.rt.set_device(1))
ok(acl.rt.set_device(0))  # current: the stream and the memory are on card 0
s = stream()
p = malloc(4096)
pid = runtime.get().devices[0].link.worker_pid
R["before"] = acl.rt.query_device_status(0)[0]
os.kill(pid, signal.SIGSTOP)
try:
    ok(acl.rt.memset_async(p, 4096, 1, 4096, s))  # queued: never runs while stopped
    t = time.monotonic()
    R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 3000)
    R["sync_s"] = time.monotonic() - t
    t = time.monotonic()
    R["malloc"] = acl.rt.malloc(64, 0)[1]
    R["malloc_s"] = time.monotonic() - t
    R["status"] = acl.rt.query_device_status(0)[0]
    R["other_card"] = acl.rt.query_device_status(1)[0]
    R["sync_after"] = acl.rt.synchronize_stream(s)
finally:
    os.kill(pid, signal.SIGCONT)
ok(acl.rt.reset_device_force(0))
ok(acl.rt.set_device(0))
R["again"] = acl.rt.malloc(64, 0)[1]
R["status_again"] = acl.rt.query_device_status(0)[0]
"""


def test_a_stopped_worker_is_detected_and_every_wait_is_bounded(run_py):
    r = run_scenario(run_py, PRELUDE, HUNG, ENV, timeout=120)
    assert r["before"] == NORMAL
    assert r["sync"] == STREAM_SYNC_TIMEOUT, r  # its own 3 s timeout, not the card's
    assert r["sync_s"] < BOUND_S, r
    assert r["malloc"] == LOST_HEARTBEAT, r
    assert r["malloc_s"] < BOUND_S, r
    assert r["status"] == ABNORMAL and r["other_card"] == NORMAL, r
    assert r["sync_after"] == LOST_HEARTBEAT, r
    assert r["again"] == 0 and r["status_again"] == NORMAL, r


BLOCKED = CHILD_HELPERS + """
KERNELS = '''
import time
from npuemu.shared.kernel import kernel

@kernel("aicpu")
def nap(ctx, seconds):
    time.sleep(seconds)
'''
ok(acl.rt.set_device(0))
s = stream()
b, ret = acl.rt.binary_load_from_data(KERNELS)
ok(ret)
f, ret = acl.rt.binary_get_function(b, "nap")
ok(ret)
ok(acl.rt.launch_kernel(f, 1, [30.0], s))
print("READY", flush=True)
acl.rt.synchronize_stream(s)
print("NOT REACHED", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_blocking_synchronize_ends_the_program(spawn_py, sig):
    proc = spawn_py(BLOCKED, env=ENV)
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


OVERFLOW = """
ok(acl.rt.set_device(0))
s = stream()
e = event()
ok(acl.rt.record_event(e, s))
R["wait"] = [acl.rt.stream_wait_event_with_timeout(s, e, 2**64) for _ in range(1100)]
R["create"] = sorted({acl.rt.create_stream_with_config(0, 2**64)[1] for _ in range(1100)})
R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 10000)
s2, ret = acl.rt.create_stream()
R["create_after"] = ret
ok(acl.rt.destroy_stream(s2))
"""


def test_ints_the_wire_cannot_carry_are_107000_before_anything_is_counted(run_py):
    r = run_scenario(run_py, PRELUDE, OVERFLOW, ENV, timeout=120)
    assert set(r["wait"]) == {RT_PARAM_INVALID}
    assert r["create"] == [RT_PARAM_INVALID]
    assert r["sync"] == 0 and r["create_after"] == 0, r
