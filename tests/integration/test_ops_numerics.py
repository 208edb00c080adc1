"""Numerics of every op type of the library against numpy, through a real device worker:
dtypes, broadcasting, NCHW/NHWC, and tilings with several blocks and tiles. One child
program (``tests/progs/ops_numerics.py``) runs every case (``run_op``: compile into HBM,
execute on a stream, copy back) and reports each case's max error."""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}


def test_every_op_type_matches_numpy_through_the_worker(run_prog):
    r = run_program(run_prog, "ops_numerics.py", "every_op", env=ENV, timeout=240)
    bad = {k: v for k, v in r.items() if v is not True}
    from npuemu.host.ops import registry

    registry.lookup("Add")
    covered = {name.split("-")[0] for name in r}
    assert not bad, bad
    assert set(registry.REGISTRY) <= covered, set(registry.REGISTRY) - covered
