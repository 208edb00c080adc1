"""Collectives (host/hccl) against real device workers.

- The matrix: every operation x dtype x reduce op x algorithm (mesh, ring: card-executed)
  for 2, 3, 4 and 8 ranks, against numpy, plus large messages on the host-staged path
  (``staged-mesh``/``staged-ring``, HCCL_BUFFSIZE=1 MB so they run in chunks)
  (``tests/progs/hccl_matrix.py``, one child per rank count). 8 cards keep the default
  topology (two HCCS groups of 4), so staged pulls across groups go through the pinned host
  mirrors.
- The pyhccl face (``import pyhccl`` under ``npuemu run``; ``tests/progs/hccl_faces.py``):
  root info with one thread per card, a rank table, ordering with other stream work by
  events, bad input with HCCL's codes.
- Failures: a rank that never joins a collective, a card that dies, a rank that never joins
  the communicator: every peer fails within the timeouts, nothing is left behind.
"""

from __future__ import annotations

import pytest

from tests.childprog import result_of, run_program

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M", "HCCL_BUFFSIZE": "1"}
PROG = "hccl_faces.py"
"""The pyhccl programs (``tests/progs/hccl_faces.py``), one scenario a test."""


@pytest.mark.parametrize(("ranks", "quick"), [(2, True), (3, False), (4, True),
                                              pytest.param(8, True, marks=pytest.mark.slow)])
def test_matrix_against_numpy(run_prog, ranks: int, quick: bool) -> None:
    argv = [str(ranks), "quick"] if quick else [str(ranks)]
    env = {**ENV, "NPUEMU_DEVICES": str(ranks)}
    if ranks < 8:  # 8 cards keep the default topology: two HCCS groups, joined via the host
        env["NPUEMU_TOPOLOGY"] = f"0-{ranks - 1}"
    result = result_of(run_prog("hccl_matrix.py", *argv, env=env, timeout=600))
    assert result["nfail"] == 0, result["failures"]
    assert result["cases"] > 100


def test_root_info_threads_and_event_ordering(run_prog) -> None:
    """One thread per card joins by root info; a kernel fills the send buffer before the
    all_reduce on the same stream, and another stream copies the result after an event."""
    env = {**ENV, "NPUEMU_DEVICES": "4"}
    r = run_program(run_prog, PROG, "root_info_threads", env=env, timeout=120)
    assert r["out"] == {str(k): [4, k, 10.0, 10.0] for k in range(4)}


def test_rank_table_and_bad_input(run_prog, tmp_path) -> None:
    table = tmp_path / "rank_table.json"
    table.write_text('{"status":"completed","version":"1.0","server_count":"1","server_list":'
                     '[{"server_id":"node_0","device":[{"device_id":"2","rank_id":"0"},'
                     '{"device_id":"3","rank_id":"1"}]}]}')
    env = {**ENV, "NPUEMU_DEVICES": "4", "HCCL_EXEC_TIMEOUT": "1"}
    r = run_program(run_prog, PROG, "rank_table", str(table), env=env, timeout=120)
    assert r["ids"] == [0, 1]
    assert r["missing_file"] == 10  # HCCL_E_OPEN_FILE_FAILURE
    assert r["null"] == 2  # HCCL_E_PTR
    assert r["int128"] == 5  # HCCL_E_NOT_SUPPORT
    for key in ("unknown_comm", "bad_dtype", "bad_op", "too_big", "misaligned", "bad_root",
                "other_stream", "a2a_mismatch", "self_send", "mismatch", "destroy_again"):
        assert r[key] == 1, key  # HCCL_E_PARA
    assert r["destroy"] == [0, 0]
    assert r["error_string"] == "parameter error"


def test_missing_rank_fails_every_peer_within_exec_timeout(run_prog) -> None:
    """Rank 2 never calls all_reduce: ranks 0, 1 fail their synchronize with 107019 (the
    stream's timed wait) after HCCL_EXEC_TIMEOUT, and their async error is HCCL_E_TIMEOUT."""
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "2"}
    r = run_program(run_prog, PROG, "missing_rank", env=env, timeout=120)
    assert r["sync"] == [107019, 107019]
    assert r["async"] == [9, 9]
    assert r["destroy"] == [0, 0, 0]
    assert r["elapsed"] < 60  # bounded (the timeout is 2 s; generous for a loaded machine)


def test_dead_card_fails_every_peer(run_prog) -> None:
    """Card 1 dies after init: the all_reduce of ranks 0 and 2 fails (no hang), they report
    HCCL_E_REMOTE, and the communicators can still be destroyed."""
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "3"}
    r = run_program(run_prog, PROG, "dead_card", env=env, timeout=120)
    assert r["calls"] == [0, 0]
    assert all(code != 0 for code in r["sync"]), r
    assert r["async"] == [21, 21]  # HCCL_E_REMOTE
    assert r["destroy"] == [0, 0, 0]
    assert r["elapsed"] < 60


def test_link_fault_fails_every_peer(run_prog) -> None:
    """The HCCS link between cards 0 and 1 fails: an all_reduce of three ranks fails on
    every rank (no hang), card 0 with the link error (507056), all with an async error, and
    the cards' other work goes on."""
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "20"}
    r = run_program(run_prog, PROG, "link_fault", env=env, timeout=120)
    assert r["sync"][0] == 507056 and all(code != 0 for code in r["sync"]), r
    assert r["async"] == [21, 21, 21]  # HCCL_E_REMOTE
    assert r["elapsed"] < 15  # the fault is seen at once, not after HCCL_EXEC_TIMEOUT
    assert r["after"] == 0 and r["destroy"] == [0, 0, 0]


def test_send_recv_unmatched_and_dead_peer(run_prog) -> None:
    """A recv whose peer never sends fails after HCCL_EXEC_TIMEOUT (107019, E_TIMEOUT); a
    send to a card that died fails with E_REMOTE well before it."""
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "2"}
    r = run_program(run_prog, PROG, "send_recv_unmatched", env=env, timeout=120)
    assert (r["unmatched"], r["unmatched_async"]) == (107019, 9), r  # HCCL_E_TIMEOUT
    assert 1.5 < r["unmatched_s"] < 60
    assert r["dead"] != 0 and r["dead_async"] == 21, r  # HCCL_E_REMOTE
    assert r["dead_s"] < 60
    assert r["self"] == 1  # HCCL_E_PARA: a send to itself
    assert r["destroy"] == [0] * 6


def test_init_waits_at_most_connect_timeout(run_prog) -> None:
    env = {**ENV, "NPUEMU_DEVICES": "2", "HCCL_CONNECT_TIMEOUT": "1"}
    r = run_program(run_prog, PROG, "init_timeout", env=env, timeout=60)
    assert r["ret"] == 9  # HCCL_E_TIMEOUT
    assert 0.9 < r["elapsed"] < 30
    assert r["bad_root"] == 1


