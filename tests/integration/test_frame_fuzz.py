"""Property-based fuzz of a real device worker's submission ring, every op of the protocol.

A host attached as any pyACL program is (its own client slot, rings and tables) pushes
thousands of hypothesis-made frames of every op of ``shared/protocol.py``'s ``Op`` but
``INJECT`` (the fault-injection op, which by design can kill the card or hang every later
task): each starts from the op's argument shape with values near the real ones (its buffer,
streams, binary, model, a communicator segment of the card, reserved addresses) and is then
mutated (wrong types, huge values, truncated or extra arguments, lists of thousands of
elements), with undecodable bytes, cut frames and large frames mixed in
(``tests/progs/frame_fuzz.py``): 200 hypothesis examples of 1 to 10 frames of random ops and
mutations (about 1500 frames with the junk), then a sweep of every op with every mutation,
twice (480 frames). Meanwhile a bystander host on the same card copies, fills
and runs a kernel in a loop, checking each round (``tests/progs/frame_bystander.py``). The
worker must stay the same process, keep answering the fuzzing host, keep its threads and
memory bounded, and never fail the bystander.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from npuemu.device.exec import collective, model
from npuemu.shared.protocol import Op

pytestmark = pytest.mark.integration

PROGS = Path(__file__).resolve().parent.parent / "progs"
FUZZ, BYSTANDER = PROGS / "frame_fuzz.py", PROGS / "frame_bystander.py"
MUTATIONS = ("shaped", "wrong_type", "huge", "truncated", "extra", "counts")
NO_ARGS = {Op.PING, Op.SNAPSHOT, Op.MEM_POOLS, Op.MEM_MERGE}
"""Ops without arguments: only ``extra`` and ``counts`` mutate them (``shaped`` too)."""


def _runner(path: Path) -> str:
    return f"import runpy; runpy.run_path({str(path)!r}, run_name='__main__')"


def _result(out: str) -> dict:
    return json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])


def test_fuzzed_frames_of_every_op_never_stop_the_worker_nor_disturb_a_bystander(
        module_node, run_py, spawn_py, tmp_path):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    good = spawn_py(_runner(BYSTANDER),
                    env={"NPUEMU_NODE": name, "READY": str(ready), "STOP": str(stop)})
    t0 = time.monotonic()
    while not ready.exists():
        assert good.poll() is None, good.communicate()
        assert time.monotonic() - t0 < 60, "the bystander never got going"
        time.sleep(0.05)
    try:
        res = run_py(_runner(FUZZ), env={"NPUEMU_NODE": name, "EXAMPLES": "200"}, timeout=240)
    finally:
        stop.touch()
    out, err = good.communicate(timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert good.returncode == 0, out + err
    r, g = _result(res.stdout), _result(out)
    assert r["frames"] >= 1500
    assert r["bad_frames"] > 0
    assert r["ping"] and r["serves"] and r["same_worker"]
    fuzzed = {op.name for op in Op} - {Op.INJECT.name}
    assert set(r["coverage"]) == fuzzed  # every op of the protocol but INJECT
    for op, kinds in r["coverage"].items():
        expected = ("shaped", "extra", "counts") if Op[op] in NO_ARGS else MUTATIONS
        assert all(kinds[k] > 0 for k in expected), (op, kinds)
    threads0, threads1 = r["threads"]
    # communicator threads and model stream helpers, each bounded
    assert threads1 <= threads0 + collective.MAX_COMM_ENGINES + model.MAX_STREAMS
    rss0, rss1 = r["rss_mib"]
    assert rss1 - rss0 < 512, r["rss_mib"]
    assert g["rounds"] > 0 and g["failures"] == 0 and g["same_worker"], g
