"""Child program of ``tests/integration/test_hccl.py``: the pyhccl face (``import pyhccl``
as under ``npuemu run``) on real workers: root info with one thread per card, a rank table,
ordering with other stream work by events, bad input with HCCL's codes, and the failures
(a rank that never joins a collective, a dead card, a link fault, an unmatched recv, a
communicator init that waits for a peer that never comes).

``python hccl_faces.py SCENARIO [ARG...]`` runs one scenario (each starts with ``aclInit``)
and prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import threading
import time

import numpy as np
from childlib import R, acl, d2h, event, main, malloc, ok, pyhccl, scenario, stream, zeroed

from npuemu.host.core import faults
from npuemu.host.core.kernel import LIBRARY

FP32, SUM = 4, 0  # HcclDataType HCCL_DATA_TYPE_FP32, HcclReduceOp HCCL_REDUCE_SUM


def hok(ret, what=""):
    """Exit the child unless the HCCL result ``ret`` is 0."""
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret}")


def arr(ptr, n):
    """``n`` float32 read back from ``ptr``."""
    return np.frombuffer(d2h(ptr, 4 * n), dtype=np.float32)


def run_threads(fn, n):
    """``fn(r)`` in one thread per rank ``r`` of ``n``, joined (60 s each)."""
    ts = [threading.Thread(target=fn, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)


def sync_ranks(ranks, streams):
    """Synchronize the stream of each rank (its card current): ``R["sync"]``, the codes,
    and ``R["elapsed"]``, how long all of them took."""
    t0 = time.monotonic()
    R["sync"] = []
    for r in ranks:
        ok(acl.rt.set_device(r))
        R["sync"].append(acl.rt.synchronize_stream(streams[r]))
    R["elapsed"] = time.monotonic() - t0


def init_all(n):
    """``aclInit``, devices 0..n-1 set, ``HcclCommInitAll`` of them."""
    ok(acl.init())
    for d in range(n):
        ok(acl.rt.set_device(d))
    ret, comms = pyhccl.HcclCommInitAll(list(range(n)))
    hok(ret, "init all")
    return comms


@scenario
def root_info_threads():
    ok(acl.init())
    N, P = 1000, 4
    root = pyhccl.HcclGetRootInfo()[1]
    out = {}

    def rank(r):
        ok(acl.rt.set_device(r))
        ret, comm = pyhccl.HcclCommInitRootInfo(P, root, r)
        hok(ret, "init")
        size, rid = pyhccl.HcclGetRankSize(comm)[1], pyhccl.HcclGetRankId(comm)[1]
        b, ret = acl.rt.binary_load_from_file(LIBRARY)
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
    run_threads(rank, P)
    R["out"] = out


@scenario
def rank_table(table):
    """Cards 2 and 3 joined by the rank table file ``table``; then bad input."""
    ok(acl.init())
    comms = {}

    def rank(r):
        ok(acl.rt.set_device(2 + r))
        ret, comms[r] = pyhccl.HcclCommInitClusterInfo(table, r)
        hok(ret, "cluster init")
    run_threads(rank, 2)
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


@scenario
def missing_rank():
    """Ranks 0 and 1 of three post an all_reduce; rank 2 never does."""
    comms = init_all(3)
    streams, bufs = [], []
    for r in range(2):
        ok(acl.rt.set_device(r))
        streams.append(stream())
        bufs.append(malloc(4096))
        hok(pyhccl.HcclAllReduce(bufs[r], bufs[r], 1024, FP32, SUM, comms[r], streams[r]))
    sync_ranks(range(2), streams)
    R["async"] = [pyhccl.HcclGetCommAsyncError(c)[1] for c in comms[:2]]
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in comms]


@scenario
def dead_card():
    """Card 1 of three lost after init; ranks 0 and 2 post an all_reduce."""
    comms = init_all(3)
    faults.inject(1, "lost")
    time.sleep(0.5)
    streams, bufs = {}, {}
    R["calls"] = []
    for r in (0, 2):
        ok(acl.rt.set_device(r))
        streams[r], bufs[r] = stream(), malloc(4096)
        R["calls"].append(pyhccl.HcclAllReduce(bufs[r], bufs[r], 1024, FP32, SUM, comms[r],
                                               streams[r]))
    sync_ranks((0, 2), streams)
    R["async"] = [pyhccl.HcclGetCommAsyncError(comms[r])[1] for r in (0, 2)]
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in comms]
    acl.rt.reset_device(1)


@scenario
def link_fault():
    """The link between cards 0 and 1 fails; an all_reduce of three ranks."""
    comms = init_all(3)
    faults.inject(0, "link", peer=1)
    streams, bufs = [], []
    for r in range(3):
        ok(acl.rt.set_device(r))
        streams.append(stream())
        bufs.append(malloc(1 << 20))
        hok(pyhccl.HcclAllReduce(bufs[r], bufs[r], 1 << 18, FP32, SUM, comms[r], streams[r]))
    sync_ranks(range(3), streams)
    R["async"] = [pyhccl.HcclGetCommAsyncError(c)[1] for c in comms]
    ok(acl.rt.set_device(2))
    R["after"] = acl.rt.memset(bufs[2], 1 << 20, 0, 1 << 20)  # the card still works
    faults.inject(0, "link", peer=1, clear=True)
    R["destroy"] = [pyhccl.HcclCommDestroy(c) for c in comms]


@scenario
def send_recv_unmatched():
    """A recv whose peer never sends; then a send to a card that died."""
    first = init_all(3)
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


@scenario
def init_timeout():
    """Rank 0 of two joins by root info; rank 1 never comes."""
    ok(acl.init())
    ok(acl.rt.set_device(0))
    root = pyhccl.HcclGetRootInfo()[1]
    t0 = time.monotonic()
    R["ret"] = pyhccl.HcclCommInitRootInfo(2, root, 0)[0]
    R["elapsed"] = time.monotonic() - t0
    R["bad_root"] = pyhccl.HcclCommInitRootInfo(2, b"x" * 10, 0)[0]


if __name__ == "__main__":
    main()
