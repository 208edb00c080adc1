"""Property-based fuzz of a real device worker's submission ring (issue 8 §2, issue 9 tests).

A host attached as any pyACL program is (its own client slot, rings and tables) pushes
thousands of hypothesis-generated frames: random ops with random, wrong-typed, negative and
out-of-range fields, truncated frames, undecodable bytes and large frames. Meanwhile a
second, well-behaved host on the same card copies and checks data in a loop. The worker must
stay the same process, keep answering the fuzzing host, and never fail the second one.

``INJECT`` is left out: it is the fault-injection op, which by design can kill the card
("lost") or hang every later task.
"""

from __future__ import annotations

import json
import time

import pytest
from childprog import run_scenario

pytestmark = pytest.mark.integration

FUZZ = """
from hypothesis import HealthCheck, given, settings, strategies as st

ok(acl.rt.set_device(0))
pid = worker_pid()
l = link()
streams = [stream() for _ in range(2)]
slots = [slot_of(s) for s in streams]
p = malloc(1 << 16)
ops = [op for op in Op if op != Op.INJECT]
before = int(l.ctl[C.BAD_FRAMES])

fields = st.one_of(
    st.integers(-2**63, 2**64 - 1),
    st.sampled_from([0, 1, -1, 2**31, 2**32, 2**63, 2**64 - 1, p, p + 4096, p + (1 << 16)]),
    st.sampled_from(slots),
)
scalars = st.one_of(fields, st.text(max_size=12), st.floats(), st.none(), st.booleans(),
                    st.binary(max_size=32))
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4)
                      | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=8)
seqs = st.one_of(st.just(0), st.integers(2**40, 2**64 - 1), st.text(max_size=3), st.none())
frames = st.builds(lambda op, seq, args: [op, seq, *args], st.sampled_from(ops), seqs,
                   st.lists(values, max_size=7))
task_frames = st.builds(lambda op, args: [op, 0, *args],
                        st.sampled_from([op for op in ops if op >= Op.COPY_ASYNC]),
                        st.lists(fields, min_size=2, max_size=7))
packed = st.one_of(frames, task_frames).map(protocol.pack)
payloads = st.one_of(
    packed,
    packed.flatmap(lambda b: st.integers(0, max(len(b) - 1, 0)).map(lambda n: b[:n])),
    st.binary(max_size=64),
    st.builds(lambda n, op: protocol.pack([op, 0, slots[0], 7, os.urandom(n)]),  # large
              st.integers(64 << 10, 200 << 10), st.sampled_from(ops)),
)
count = [0]

@settings(max_examples=int(os.environ["EXAMPLES"]), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(payloads, min_size=1, max_size=12))
def fuzz(batch):
    for payload in batch:
        push_bytes(payload)
        count[0] += 1
    while l.cpl.pop() is not None:  # replies to frames that carried a seq
        pass

fuzz()
R["frames"] = count[0]
R["bad_frames"] = int(l.ctl[C.BAD_FRAMES]) - before
R["ping"] = call(Op.PING)[0]
R["serves"] = serves()
R["same_worker"] = worker_pid() == pid
"""

GOOD = """
ok(acl.rt.set_device(0))
n = 256 << 10
src, dst = malloc(n), malloc(n)
s = stream()
R["pid"] = worker_pid()
open(os.environ["READY"], "w").close()
R["rounds"] = R["failures"] = 0
while not os.path.exists(os.environ["STOP"]):
    value = R["rounds"] % 251
    h2d(src, bytes([value]) * n)
    ok(acl.rt.memset_async(src, n, value + 1, 4096, s), "memset_async")
    ok(acl.rt.memcpy_async(dst, n, src, n, 3, s), "memcpy_async")
    ret = acl.rt.synchronize_stream_with_timeout(s, 20000)
    got = d2h(dst, n)
    if ret != 0 or got != bytes([value + 1]) * 4096 + bytes([value]) * (n - 4096):
        R["failures"] += 1
    R["rounds"] += 1
R["same_worker"] = worker_pid() == R["pid"]
"""


def test_fuzzed_frames_never_stop_the_worker_nor_disturb_another_host(
        module_node, run_py, spawn_py, tmp_path):
    from test_worker_robust import PRELUDE

    name = module_node(devices=2, hbm="64M", ddr="32M")
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    good = spawn_py(PRELUDE + GOOD + '\nprint("RESULT " + json.dumps(R))\n',
                    env={"NPUEMU_NODE": name, "READY": str(ready), "STOP": str(stop)})
    t0 = time.monotonic()
    while not ready.exists():
        assert good.poll() is None, good.communicate()
        assert time.monotonic() - t0 < 60, "the well-behaved host never got going"
        time.sleep(0.05)
    try:
        r = run_scenario(run_py, PRELUDE, FUZZ, {"NPUEMU_NODE": name, "EXAMPLES": "450"},
                         timeout=120)
    finally:
        stop.touch()
    out, err = good.communicate(timeout=60)
    assert good.returncode == 0, out + err
    g = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert r["frames"] >= 1500  # about 2,200 on average
    assert r["bad_frames"] > 0
    assert r["ping"] == "ok" and r["serves"] and r["same_worker"]
    assert g["rounds"] > 0 and g["failures"] == 0 and g["same_worker"]
