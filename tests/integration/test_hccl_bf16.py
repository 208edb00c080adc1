"""bfloat16 collectives on one node (HCCL_DATA_TYPE_BFP16, carried as uint16 bits, reduced
by the cards' reduce kernel through float32 with round-to-nearest-even).

Expected values come from a float32 reference with bf16 rounding (``npuemu.shared.bf16``):
with 2 ranks one rounding of op(a, b), exact for any inputs; with 3 ranks the inputs are
small integers so every partial result is exact whatever the order of the steps. Both
algorithms; HCCL_BUFFSIZE=1 MB so the large case runs in chunks; the pyhccl face too. The
child programs are ``tests/progs/hccl_bf16.py`` and ``hccl_bf16_pyhccl.py``.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("ranks", [2, 3])
def test_bf16_collectives_against_rounded_float32(run_prog, ranks: int) -> None:
    env = {"NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M", "HCCL_BUFFSIZE": "1",
           "NPUEMU_DEVICES": str(ranks), "NPUEMU_TOPOLOGY": f"0-{ranks - 1}"}
    res = run_prog("hccl_bf16.py", str(ranks), env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    result = json.loads(line[7:])
    assert result["failures"] == []
    assert result["cases"] == 2 * 2 * 7 + 2


def test_bf16_through_the_pyhccl_face(run_prog) -> None:
    """``HcclAllReduce(..., HCCL_DATA_TYPE_BFP16=11, ...)`` with raw pointers, two cards."""
    res = run_prog("hccl_bf16_pyhccl.py", timeout=120,
                   env={"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "HCCL_BUFFSIZE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("OUT ")][-1][4:])
    # 1e30 is not a bf16: both ranks carry its rounding, and the doubled value is exact
    twice = float(np_round(1e30)) * 2
    assert out == {"0": [3.0, -4.0, 6.5, twice], "1": [3.0, -4.0, 6.5, twice]}


def np_round(value: float) -> float:
    import numpy as np

    from npuemu.shared.bf16 import from_float32, to_float32

    return float(to_float32(from_float32(np.array([value], np.float32)))[0])
