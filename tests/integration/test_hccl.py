"""Collectives (host/hccl) against real device workers.

- The matrix: every operation x dtype x reduce op x algorithm (mesh, ring: card-executed)
  for 2, 3, 4 and 8 ranks, against numpy, plus large messages on the host-staged path
  (``staged-mesh``/``staged-ring``, HCCL_BUFFSIZE=1 MB so they run in chunks)
  (``hccl_matrix.py``, one child per rank count). 8 cards keep the default topology (two
  HCCS groups of 4), so staged pulls across groups go through the pinned host mirrors.
- The pyhccl face (``import pyhccl`` under ``npuemu run``): root info with one thread per
  card, a rank table, ordering with other stream work by events, bad input with HCCL's codes.
- Failures: a rank that never joins a collective, a card that dies, a rank that never joins
  the communicator: every peer fails within the timeouts, nothing is left behind.
"""

from __future__ import annotations

import os

import pytest

from tests.childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration
HERE = os.path.dirname(os.path.abspath(__file__))
ENV = {"NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M", "HCCL_BUFFSIZE": "1"}
PRELUDE = CHILD_HELPERS + '''
import pyhccl
FP32, INT32, SUM, MAX = 4, 2, 0, 2

def hok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret}")

def f32(values):
    return np.asarray(values, dtype=np.float32).tobytes()

def arr(ptr, n):
    return np.frombuffer(d2h(ptr, 4 * n), dtype=np.float32)
'''


@pytest.mark.parametrize(("ranks", "quick"), [(2, True), (3, False), (4, True),
                                              pytest.param(8, True, marks=pytest.mark.slow)])
def test_matrix_against_numpy(run_py, ranks: int, quick: bool) -> None:
    argv = [str(ranks), "quick"] if quick else [str(ranks)]
    path = os.path.join(HERE, "hccl_matrix.py")
    code = (f"import sys, runpy; sys.argv = ['m', *{argv!r}]; "
            f"runpy.run_path({path!r}, run_name='__main__')")
    env = {**ENV, "NPUEMU_DEVICES": str(ranks)}
    if ranks < 8:  # 8 cards keep the default topology: two HCCS groups, joined via the host
        env["NPUEMU_TOPOLOGY"] = f"0-{ranks - 1}"
    res = run_py(code, env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    import json

    result = json.loads(line[7:])
    assert result["nfail"] == 0, result["failures"]
    assert result["cases"] > 100


def test_root_info_threads_and_event_ordering(run_py) -> None:
    """One thread per card joins by root info; a kernel fills the send buffer before the
    all_reduce on the same stream, and another stream copies the result after an event."""
    body = '''
    ok(acl.init())
    N, P = 1000, 4
    root = pyhccl.HcclGetRootInfo()[1]
    out = {}
    def rank(r):
        ok(acl.rt.set_device(r))
        ret, comm = pyhccl.HcclCommInitRootInfo(P, root, r)
        hok(ret, "init")
        size, rid = pyhccl.HcclGetRankSize(comm)[1], pyhccl.HcclGetRankId(comm)[1]
        b, ret = acl.rt.binary_load_from_file(npuemu_lib)
        fill, ret = acl.rt.binary_get_function(b, "fill")
        s, s2 = stream(), stream()
        x, y, z = malloc(4 * N), malloc(4 * N), zeroed(4 * N)
        ev = event()
        ok(acl.rt.launch_kernel(fill, 2, [x, N, float(r + 1), "float32"], s), "fill")
        hok(pyhccl.HcclAllReduce(x, y, N, FP32, SUM, comm, s), "all_reduce")
        ok(acl.rt.record_event(ev, s))
        ok(acl.rt.stream_wait_event(s2, ev))
        ok(acl.rt.memcpy_async(z, 4 * N, y, 4 * N, 3, s2))
        ok(acl.rt.synchronize_stream(s2), "sync")
        out[r] = [size, rid, float(arr(z, N).min()), float(arr(z, N).max())]
        ok(acl.rt.synchronize_stream(s))
        hok(pyhccl.HcclCommDestroy(comm))
    from npuemu.host.core.kernel import LIBRARY as npuemu_lib
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(P)]
    for t in ts: t.start()
    for t in ts: t.join(60)
    R["out"] = out
    '''
    env = {**ENV, "NPUEMU_DEVICES": "4"}
    r = run_scenario(run_py, PRELUDE, body, env, timeout=120)
    assert r["out"] == {str(k): [4, k, 10.0, 10.0] for k in range(4)}


def test_rank_table_and_bad_input(run_py, tmp_path) -> None:
    table = tmp_path / "rank_table.json"
    table.write_text('{"status":"completed","version":"1.0","server_count":"1","server_list":'
                     '[{"server_id":"node_0","device":[{"device_id":"2","rank_id":"0"},'
                     '{"device_id":"3","rank_id":"1"}]}]}')
    body = f'''
    ok(acl.init())
    comms = {{}}
    def rank(r):
        ok(acl.rt.set_device(2 + r))
        ret, comms[r] = pyhccl.HcclCommInitClusterInfo({str(table)!r}, r)
        hok(ret, "cluster init")
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in ts: t.start()
    for t in ts: t.join(60)
    c0, c1 = comms[0], comms[1]
    ok(acl.rt.set_device(2))
    s = stream()
    x = malloc(64)
    R["ids"] = [pyhccl.HcclGetRankId(c)[1] for c in (c0, c1)]
    R["missing_file"] = pyhccl.HcclCommInitClusterInfo("/nonexistent.json", 0)[0]
    R["unknown_comm"] = pyhccl.HcclAllReduce(x, x, 4, FP32, SUM, 12345, s)
    R["null"] = pyhccl.HcclAllReduce(0, x, 4, FP32, SUM, c0, s)
    R["bad_dtype"] = pyhccl.HcclAllReduce(x, x, 4, 99, SUM, c0, s)
    R["int128"] = pyhccl.HcclAllReduce(x, x, 4, 12, SUM, c0, s)
    R["bad_op"] = pyhccl.HcclAllReduce(x, x, 4, FP32, 7, c0, s)
    R["too_big"] = pyhccl.HcclAllReduce(x, x, 1000, FP32, SUM, c0, s)
    R["misaligned"] = pyhccl.HcclAllReduce(x + 2, x + 2, 4, FP32, SUM, c0, s)
    R["bad_root"] = pyhccl.HcclBroadcast(x, 4, FP32, 5, c0, s)
    R["other_stream"] = pyhccl.HcclAllReduce(x, x, 4, FP32, SUM, c1, s)
    R["a2a_mismatch"] = pyhccl.HcclAlltoAll(x, 2, FP32, x + 32, 3, FP32, c0, s)
    R["self_send"] = pyhccl.HcclSend(x, 4, FP32, 0, c0, s)
    # mismatched counts: rank 0 posts 4 elements, rank 1 posts 8 for the same call
    hok(pyhccl.HcclAllReduce(x, x, 4, FP32, SUM, c0, s), "rank 0")
    ok(acl.rt.set_device(3))
    s1 = stream()
    y = malloc(64)
    R["mismatch"] = pyhccl.HcclAllReduce(y, y, 8, FP32, SUM, c1, s1)
    R["error_string"] = pyhccl.HcclGetErrorString(1)
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in (c0, c1)]
    R["destroy_again"] = pyhccl.HcclCommDestroy(c0)
    '''
    env = {**ENV, "NPUEMU_DEVICES": "4", "HCCL_EXEC_TIMEOUT": "1"}
    r = run_scenario(run_py, PRELUDE, body, env, timeout=120)
    assert r["ids"] == [0, 1]
    assert r["missing_file"] == 10  # HCCL_E_OPEN_FILE_FAILURE
    assert r["null"] == 2  # HCCL_E_PTR
    assert r["int128"] == 5  # HCCL_E_NOT_SUPPORT
    for key in ("unknown_comm", "bad_dtype", "bad_op", "too_big", "misaligned", "bad_root",
                "other_stream", "a2a_mismatch", "self_send", "mismatch", "destroy_again"):
        assert r[key] == 1, key  # HCCL_E_PARA
    assert r["destroy"] == [0, 0]
    assert r["error_string"] == "parameter error"


def test_missing_rank_fails_every_peer_within_exec_timeout(run_py) -> None:
    """Rank 2 never calls all_reduce: ranks 0, 1 fail their synchronize with 107019 (the
    stream's timed wait) after HCCL_EXEC_TIMEOUT, and their async error is HCCL_E_TIMEOUT."""
    body = '''
    ok(acl.init())
    for d in range(3): ok(acl.rt.set_device(d))
    ret, comms = pyhccl.HcclCommInitAll([0, 1, 2])
    hok(ret, "init all")
    streams, bufs = [], []
    for r in range(2):
        ok(acl.rt.set_device(r))
        streams.append(stream())
        bufs.append(malloc(4096))
        hok(pyhccl.HcclAllReduce(bufs[r], bufs[r], 1024, FP32, SUM, comms[r], streams[r]))
    t0 = time.monotonic()
    R["sync"] = []
    for r in range(2):
        ok(acl.rt.set_device(r))
        R["sync"].append(acl.rt.synchronize_stream(streams[r]))
    R["elapsed"] = time.monotonic() - t0
    R["async"] = [pyhccl.HcclGetCommAsyncError(c)[1] for c in comms[:2]]
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in comms]
    '''
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "2"}
    r = run_scenario(run_py, PRELUDE, body, env, timeout=120)
    assert r["sync"] == [107019, 107019]
    assert r["async"] == [9, 9]
    assert r["destroy"] == [0, 0, 0]
    assert r["elapsed"] < 60  # bounded (the timeout is 2 s; generous for a loaded machine)


def test_dead_card_fails_every_peer(run_py) -> None:
    """Card 1 dies after init: the all_reduce of ranks 0 and 2 fails (no hang), they report
    HCCL_E_REMOTE, and the communicators can still be destroyed."""
    body = '''
    from npuemu.host.core import faults
    ok(acl.init())
    for d in range(3): ok(acl.rt.set_device(d))
    ret, comms = pyhccl.HcclCommInitAll([0, 1, 2])
    hok(ret, "init all")
    faults.inject(1, "lost")
    time.sleep(0.5)
    streams, bufs = {}, {}
    R["calls"] = []
    for r in (0, 2):
        ok(acl.rt.set_device(r))
        streams[r], bufs[r] = stream(), malloc(4096)
        R["calls"].append(pyhccl.HcclAllReduce(bufs[r], bufs[r], 1024, FP32, SUM, comms[r],
                                               streams[r]))
    t0 = time.monotonic()
    R["sync"] = []
    for r in (0, 2):
        ok(acl.rt.set_device(r))
        R["sync"].append(acl.rt.synchronize_stream(streams[r]))
    R["elapsed"] = time.monotonic() - t0
    R["async"] = [pyhccl.HcclGetCommAsyncError(comms[r])[1] for r in (0, 2)]
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in comms]
    acl.rt.reset_device(1)
    '''
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "3"}
    r = run_scenario(run_py, PRELUDE, body, env, timeout=120)
    assert r["calls"] == [0, 0]
    assert all(code != 0 for code in r["sync"]), r
    assert r["async"] == [21, 21]  # HCCL_E_REMOTE
    assert r["destroy"] == [0, 0, 0]
    assert r["elapsed"] < 60


def test_link_fault_fails_every_peer(run_py) -> None:
    """The HCCS link between cards 0 and 1 fails: an all_reduce of three ranks fails on
    every rank (no hang), card 0 with the link error (507056), all with an async error, and
    the cards' other work goes on."""
    body = '''
    from npuemu.host.core import faults
    ok(acl.init())
    for d in range(3): ok(acl.rt.set_device(d))
    ret, comms = pyhccl.HcclCommInitAll([0, 1, 2])
    hok(ret, "init all")
    faults.inject(0, "link", peer=1)
    streams, bufs = [], []
    for r in range(3):
        ok(acl.rt.set_device(r))
        streams.append(stream())
        bufs.append(malloc(1 << 20))
        hok(pyhccl.HcclAllReduce(bufs[r], bufs[r], 1 << 18, FP32, SUM, comms[r], streams[r]))
    t0 = time.monotonic()
    R["sync"] = []
    for r in range(3):
        ok(acl.rt.set_device(r))
        R["sync"].append(acl.rt.synchronize_stream(streams[r]))
    R["elapsed"] = time.monotonic() - t0
    R["async"] = [pyhccl.HcclGetCommAsyncError(c)[1] for c in comms]
    ok(acl.rt.set_device(2))
    R["after"] = acl.rt.memset(bufs[2], 1 << 20, 0, 1 << 20)  # the card still works
    faults.inject(0, "link", peer=1, clear=True)
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in comms]
    '''
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "20"}
    r = run_scenario(run_py, PRELUDE, body, env, timeout=120)
    assert r["sync"][0] == 507056 and all(code != 0 for code in r["sync"]), r
    assert r["async"] == [21, 21, 21]  # HCCL_E_REMOTE
    assert r["elapsed"] < 15  # the fault is seen at once, not after HCCL_EXEC_TIMEOUT
    assert r["after"] == 0 and r["destroy"] == [0, 0, 0]


def test_send_recv_unmatched_and_dead_peer(run_py) -> None:
    """A recv whose peer never sends fails after HCCL_EXEC_TIMEOUT (107019, E_TIMEOUT); a
    send to a card that died fails with E_REMOTE well before it."""
    body = '''
    from npuemu.host.core import faults
    ok(acl.init())
    for d in range(3): ok(acl.rt.set_device(d))
    ret, first = pyhccl.HcclCommInitAll([0, 1, 2])
    hok(ret, "init all")
    ret, second = pyhccl.HcclCommInitAll([0, 1, 2])
    hok(ret, "init all 2")
    ok(acl.rt.set_device(0))
    s0, b0 = stream(), malloc(4096)
    def timed(key, s, comm):  # the stream's outcome, how long it took, the comm's error
        t0 = time.monotonic()
        R[key] = acl.rt.synchronize_stream(s)
        R[key + "_s"] = time.monotonic() - t0
        R[key + "_async"] = pyhccl.HcclGetCommAsyncError(comm)[1]
    hok(pyhccl.HcclRecv(b0, 1024, FP32, 1, first[0], s0))
    timed("unmatched", s0, first[0])
    faults.inject(1, "lost")
    time.sleep(0.5)
    ok(acl.rt.set_device(2))
    s2, b2 = stream(), malloc(4096)
    hok(pyhccl.HcclSend(b2, 1024, FP32, 1, second[2], s2))
    timed("dead", s2, second[2])
    R["self"] = pyhccl.HcclSend(b2, 4, FP32, 2, second[2], s2)
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in (*first, *second)]
    acl.rt.reset_device(1)
    '''
    env = {**ENV, "NPUEMU_DEVICES": "3", "HCCL_EXEC_TIMEOUT": "2"}
    r = run_scenario(run_py, PRELUDE, body, env, timeout=120)
    assert (r["unmatched"], r["unmatched_async"]) == (107019, 9), r  # HCCL_E_TIMEOUT
    assert 1.5 < r["unmatched_s"] < 60
    assert r["dead"] != 0 and r["dead_async"] == 21, r  # HCCL_E_REMOTE
    assert r["dead_s"] < 60
    assert r["self"] == 1  # HCCL_E_PARA: a send to itself
    assert r["destroy"] == [0] * 6


def test_init_waits_at_most_connect_timeout(run_py) -> None:
    body = '''
    ok(acl.init())
    ok(acl.rt.set_device(0))
    root = pyhccl.HcclGetRootInfo()[1]
    t0 = time.monotonic()
    R["ret"] = pyhccl.HcclCommInitRootInfo(2, root, 0)[0]
    R["elapsed"] = time.monotonic() - t0
    R["bad_root"] = pyhccl.HcclCommInitRootInfo(2, b"x" * 10, 0)[0]
    '''
    env = {**ENV, "NPUEMU_DEVICES": "2", "HCCL_CONNECT_TIMEOUT": "1"}
    r = run_scenario(run_py, PRELUDE, body, env, timeout=60)
    assert r["ret"] == 9  # HCCL_E_TIMEOUT
    assert 0.9 < r["elapsed"] < 30
    assert r["bad_root"] == 1


