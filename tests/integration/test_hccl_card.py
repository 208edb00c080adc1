"""Card-executed collectives do not hold up their card: while rank 0's all_reduce waits for
rank 1 (not called yet), card 0 still runs a large copy on another stream and a whole
all_reduce of a second communicator over the same two cards; then rank 1 calls, and the
first all_reduce completes with the right sum. (One shared engine thread for collectives
would deadlock here; each communicator has its own.) The program is
``tests/progs/hccl_card.py``."""

from __future__ import annotations

import pytest

from tests.childprog import run_program

pytestmark = pytest.mark.integration


def test_waiting_collective_leaves_the_card_free(run_prog) -> None:
    env = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "16M",
           "HCCL_BUFFSIZE": "1", "HCCL_EXEC_TIMEOUT": "120"}
    r = run_program(run_prog, "hccl_card.py", "waiting", env=env, timeout=240)
    assert r == {"copy_while_waiting": True, "second_comm": [3.0, 3.0],
                 "first_pending": True, "first": [3.0, 3.0]}
