"""Ranks of one node in separate host processes (card-executed collectives): process A calls
``HcclGetRootInfo`` and joins as rank 0 on card 0, process B joins as rank 1 on card 1 with
the root info A wrote; their collectives, all_to_allv and send/recv (one copy, from the
sender's arena straight into the receiver's) run between the cards without any host thread
of the other process; a recv whose count differs from the send fails on both. Then B's
process ends abruptly (``os._exit``, no cleanup) without calling the next all_reduce: A's
fails with HCCL_E_REMOTE (its peer's host is gone) well before HCCL_EXEC_TIMEOUT instead of
hanging. A rank is ``tests/progs/hccl_procs_rank.py``."""

from __future__ import annotations

import json
import os
import time

import pytest

pytestmark = pytest.mark.integration

def _results(procs: list) -> list[dict]:
    """Wait for every child (if one fails, stop the others and show all outputs)."""
    deadline = time.monotonic() + 180
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        if any(p.poll() not in (None, 0) for p in procs):
            break
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
    outs = [p.communicate(timeout=30) for p in procs]
    for p in procs:
        assert p.returncode == 0, "\n---\n".join(f"{o}\n{e}" for o, e in outs)
    return [json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
            for out, _err in outs]


def test_two_host_processes_one_node(shared_node, spawn_prog, tmp_path) -> None:
    name = shared_node(devices=2, hbm="256M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path), "HCCL_BUFFSIZE": "1",
           "HCCL_EXEC_TIMEOUT": "20"}
    a = spawn_prog("hccl_procs_rank.py", "rank", env={**env, "RANK": "0"})
    b = spawn_prog("hccl_procs_rank.py", "rank", env={**env, "RANK": "1"})
    ra, rb = _results([a, b])
    for r in (ra, rb):
        assert r["all_reduce"] and r["all_gather"] and r["broadcast"], r
        assert r["small"] == [2.0, 2.0]
        assert r["recv"] and r["async"] == 0, r
        assert r["mismatch_call"] == 0  # queued; the cards find the mismatch
        assert r["mismatch_sync"] == 107000 and r["mismatch_async"] == 1, r  # HCCL_E_PARA
    # rank 0 gets 1 element of rank 0 (its 0th) and 2 of rank 1 (100, 101); rank 1 gets
    # 2 of rank 0 (1, 2) and 3 of rank 1 (102, 103, 104)
    assert ra["all_to_allv"] == [0.0, 100.0, 101.0], ra
    assert rb["all_to_allv"] == [1.0, 2.0, 102.0, 103.0, 104.0], rb
    assert ra["orphan_sync"] == 507057, ra  # the peer's host is gone: no hang
    assert ra["orphan_async"] == 21  # HCCL_E_REMOTE
    assert ra["orphan_s"] < 15  # well before HCCL_EXEC_TIMEOUT (20 s): liveness, not timeout
    assert ra["destroy"] == 0
    # rank 1's semaphores are named under its pid: the supervisor removes them once that
    # process is gone; the second communicator's segment, which rank 1's process created
    # and never removed, goes once no rank of it is left (a bounded wait: the supervisor
    # sees the connections close on its own schedule); rank 0 removed its own names
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _hccl_names(name):
        time.sleep(0.1)
    assert not _hccl_names(name)


def _hccl_names(node: str) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if f"npuemu.{node}." in n and ".hccl." in n]
