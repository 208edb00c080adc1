"""Property-based fuzz of the whole pyACL surface.

Every public function of ``acl``, ``acl.rt`` and ``acl.util`` is called by hypothesis with
wrong types and extreme values mixed with live handles (streams, events, device and pinned
pointers, contexts, data buffers), in one child program (``tests/progs/pyacl_fuzz.py``) on
one embedded node: each function five times (its arity, or one argument less or more), each
time after 0 to 2 calls of random functions (``FUZZ_BUDGET_S=<s>`` in the environment adds
random call sequences for that long). A call may return anything or raise TypeError, ValueError or
OverflowError (what pyACL's argument parser raises for a wrong Python type or an
out-of-range C value); any other exception is an internal error and fails the test.
Afterwards the card must still be usable: a round trip through device memory, a stream, and
a NORMAL device status.

What is not fuzzed, and why: sizes above ``BIG_HOST`` for ``malloc_host`` (they would really
pin that much host memory, as hardware does); thread ids of live threads (subscribing the
fuzzing thread itself and then synchronizing a stream with a blocking callback deadlocks on
hardware too); writes far past a plain host buffer: a raw host pointer is trusted as on
hardware (only its mapping is checked), so the pool's host pointer points ``GUARD`` bytes
into a buffer of four times that, and junk offsets (-64..8192) and counts (up to 64 KiB)
stay inside memory the child owns. With a 4 KiB buffer they could overrun it into the
child's own heap (the likely cause of a rare failure in which the child found its stdout
closed).
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}

def test_fuzz_every_pyacl_function(run_prog, tmp_path):
    res = run_prog("pyacl_fuzz.py", "fuzz_all",
                   env={**ENV, "ASCEND_PROCESS_LOG_PATH": str(tmp_path)}, timeout=240)
    assert res.returncode == 0, f"{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    r = json.loads(res.stdout.split("RESULT ", 1)[1])
    print("pyACL fuzz:", r["stats"], f"in {r['seconds']} s")
    assert r["n_internal"] == 0, "\n".join(r["internal"])
    assert r["stats"]["calls"] > 1000 and r["stats"]["functions"] >= 90
    assert r["stats"]["called"] == r["stats"]["functions"]  # each, FUZZ_EXAMPLES times
    assert r["roundtrip"] and r["status"] == [0, 0]
