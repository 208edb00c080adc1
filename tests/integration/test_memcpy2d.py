"""2-D copies (``acl.rt.memcpy2d`` / ``memcpy2d_async``) and the malloc variants
(``malloc_cached``, ``malloc_align32``, ``free_with_dev_sync``) on a real worker: pitched rows
land where the pitches say, pageable and pinned host memory, device to device, and the
refusals CANN documents (the child program is ``tests/progs/memcpy2d.py``)."""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}


def test_pitched_copies_both_ways_sync_and_async(run_prog):
    r = run_program(run_prog, "memcpy2d.py", "pitched", env=ENV, timeout=90)
    assert r["h2d"] and r["d2h"] and r["async"] and r["contiguous"], r
    assert r["tall"] is True and r["tasks"] == 1
    assert r["bad"] == [100000, 100000, 100000, 100000, 107000, 107000], r["bad"]
    assert r["nothing"] == 0


def test_malloc_variants(run_prog):
    r = run_program(run_prog, "memcpy2d.py", "malloc_variants", env=ENV, timeout=60)
    assert r["align32_128"] == 0 and r["align32_129"] == 107000
    assert r["free_sync"] == 0 and r["free_align"] == 0
    assert r["bad"] == [100000, 107000]
