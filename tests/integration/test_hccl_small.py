"""The one-shot all_reduce (messages of at most ``COMM_SMALL_BYTES``) against real device
workers: every dtype and reduce op at 2, 4 and 8 ranks, at the boundary size and one element
past it, bit for bit against numpy folding in rank order; and the hand-over of a call whose
peers come late from the card's loop thread to its engine thread, with a second call that
meets the busy engine (``tests/progs/hccl_small.py``, one child per rank count)."""

from __future__ import annotations

import pytest

from tests.childprog import result_of

pytestmark = pytest.mark.integration
DTYPES, OPS, SIZES = 12, 4, 4


@pytest.mark.parametrize("ranks", [2, 4, pytest.param(8, marks=pytest.mark.slow)])
def test_one_shot_all_reduce_every_dtype_and_op(run_prog, ranks: int) -> None:
    env = {"NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M", "NPUEMU_DEVICES": str(ranks)}
    if ranks < 8:
        env["NPUEMU_TOPOLOGY"] = f"0-{ranks - 1}"
    result = result_of(run_prog("hccl_small.py", str(ranks), env=env, timeout=600))
    assert result["failures"] == []
    assert result["cases"] == DTYPES * OPS * SIZES + 2
