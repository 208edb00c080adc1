"""Huge-page blocks assembled from scattered pages (``shared/pages.py``): on a card
whose free memory is all 2 MiB holes, a malloc larger than every hole still succeeds, as on
hardware (the MMU joins the pages), and the block works everywhere a device pointer goes:
host copies and fills, kernels, a P2P copy read by the other card, an IPC import in another
process, a collective; freeing it gives the pages back."""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

MiB = 1 << 20
ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "64M", "NPUEMU_DDR": "16M"}
PROG = "mem_far_pages.py"
"""The child program (``tests/progs/mem_far_pages.py``), one scenario a test."""


def test_a_block_of_scattered_pages_works_like_any_block(run_prog):
    r = run_program(run_prog, PROG, "scattered_block", env=ENV, timeout=120)
    assert r["a_far"] and r["aligned"] and r["again_far"]
    assert r["info_drop"] == 3 * MiB * 2
    assert r["copy_ok"] and r["kernel_ok"] and r["fill_ok"]
    assert r["p2p_ok"]
    assert (r["handle_far"], r["window_ok"]) == (True, True)
    assert r["info_back"]
    assert r["too_big"] == 207001
    assert r["whole_again"]


def test_collective_over_blocks_of_scattered_pages(run_prog):
    r = run_program(run_prog, PROG, "collective", env={**ENV, "HCCL_BUFFSIZE": "1"},
                    timeout=120)
    assert r["far"] == [True, True]
    assert r["sums"] == [[3.0], [3.0]]


def test_ipc_import_of_a_block_of_scattered_pages(shared_node, spawn_prog, tmp_path):
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path)}
    a = spawn_prog(PROG, "ipc_export", env=env)
    b = spawn_prog(PROG, "ipc_import", env=env)
    out, err = b.communicate(timeout=90)
    assert b.returncode == 0, f"{out}\n{err}"
    a_out, a_err = a.communicate(timeout=30)
    assert a.returncode == 0, f"{a_out}\n{a_err}"
    assert 'RESULT {"far": true, "read_ok": true}' in out


def test_random_blocks_near_and_far_never_share_a_byte(run_prog):
    """A card kept full by random huge-page mallocs (when one fails, two random blocks are
    freed), many of them assembled, each block filled with its own byte by the card's
    worker; after every malloc every live block still reads back its byte everywhere
    through the host's mapping: no physical page serves two blocks."""
    r = run_program(run_prog, PROG, "random_blocks", env=ENV, timeout=180)
    assert r["far"] >= 8 and r["steps"] >= 60
