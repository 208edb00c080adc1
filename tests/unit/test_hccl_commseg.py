"""The communicator segment without workers: its layout, joining and leaving as the host
does it, and the card side's pure helpers (argument checks, extents, HCCS grouping)."""

from __future__ import annotations

import os
import secrets
import time

import pytest

from npuemu.device.exec import collective
from npuemu.host.driver.commseg import CommSegment
from npuemu.shared import layout, shm
from npuemu.shared.protocol import BadFrame


def test_layout_table_and_slots() -> None:
    assert layout.COMM_RANK.size == 128  # two cache lines: host-written, worker-written
    assert layout.COMM_RANK.STEP * 8 == 64
    first = layout.comm_small_offset(0, 0)
    assert first % 64 == 0
    assert first >= (layout.COMM_RANKS + layout.COMM_MAX_RANKS * layout.COMM_RANK.words) * 8
    assert layout.comm_small_offset(1, 1) - first == 3 * layout.COMM_SMALL_BYTES
    assert layout.comm_small_offset(layout.COMM_MAX_RANKS, 0) == layout.comm_pair(0, 0) * 8
    assert layout.COMM_PAIR.size == 128
    assert layout.comm_pair(1, 2) - layout.comm_pair(1, 1) == layout.COMM_PAIR.words
    assert layout.comm_pair(layout.COMM_MAX_RANKS, 0) * 8 == layout.COMM_SIZE


def test_join_leave_and_cleanup() -> None:
    node = f"unit{secrets.token_hex(3)}"
    seg = CommSegment.create(node)
    try:
        other = CommSegment.open(seg.name, time.monotonic() + 5)
        assert seg.join(0, 2, dev=3, group=1)
        assert not other.join(0, 2, dev=4)  # rank 0 is taken
        other.leave(0)  # not joined by ``other``: rank 0 stays
        assert seg.joined(2) == 1
        assert seg.joined(2) == 1
        assert other.join(1, 2, dev=4, group=1)
        assert seg.joined(2) == 2
        assert seg.rank_info(1) == (4, os.getpid())
        assert seg.error(0) == 0
        other.close()  # not the creator: leaves rank 1, keeps the name
        assert seg.joined(2) == 1
        assert os.path.exists(f"/dev/shm{seg.name}")
    finally:
        seg.close()
    assert not shm.leftovers(node)


def test_open_waits_then_fails() -> None:
    name = shm.name(f"unit{secrets.token_hex(3)}", "hccl", "missing")
    t0 = time.monotonic()
    with pytest.raises(FileNotFoundError):
        CommSegment.open(name, time.monotonic() + 0.2)
    assert time.monotonic() - t0 >= 0.2


def test_card_side_helpers() -> None:
    assert collective._hccs_groups([0, 0, 1, 1]) == [[0, 1], [2, 3]]
    assert collective._hccs_groups([0, 0, 0]) is None  # one group: mesh
    assert collective._hccs_groups([0, 0, 1]) is None  # unequal groups: ring
    assert collective._extents("all_gather", 5, 4, 0, 0) == (5, 20)
    assert collective._extents("reduce_scatter", 5, 4, 0, 0) == (20, 5)
    assert collective._extents("reduce", 5, 4, 1, 0) == (5, 0)  # recv only on the root
    assert collective._extents("barrier", 5, 4, 0, 0) == (0, 0)
    kind = collective.TASK_ARGS[1]
    kind("all_reduce")
    with pytest.raises(BadFrame):
        kind("all_reduce_v2")
    blocks = collective._blocks(10, 3)
    assert sum(n for _, n in blocks) == 10 and blocks[0] == (0, 3)
