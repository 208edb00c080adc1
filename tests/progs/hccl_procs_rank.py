"""Child program of ``tests/integration/test_hccl_procs.py``: one rank of a two-process
communicator on one node (``HcclGetRootInfo``/``HcclCommInitRootInfo`` by the pyhccl face),
rank ``$RANK`` on card ``$RANK``: collectives, all_to_allv, send/recv, a send/recv of
mismatched counts on a second communicator; then rank 1's process ends abruptly
(``os._exit``) and rank 0's next all_reduce must notice.

``python hccl_procs_rank.py rank`` runs it (the ranks meet through files in ``$SYNC``,
``childlib.put``/``get``) and prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import os
import time

import numpy as np
from childlib import R, acl, emit, get, main, ok, put, pyhccl, scenario

FP32, SUM, MAX = 4, 0, 2  # HcclDataType FP32; HcclReduceOp SUM, MAX


def dev_array(values):
    """A device copy of ``values`` as float32 (at least 4 bytes)."""
    data = np.ascontiguousarray(values, dtype=np.float32)
    ptr, ret = acl.rt.malloc(max(data.nbytes, 4), 0)
    ok(ret, "malloc")
    raw = data.tobytes()  # kept alive across the copy
    ok(acl.rt.memcpy(ptr, data.nbytes, acl.util.bytes_to_ptr(raw), data.nbytes, 1), "H2D")
    return ptr


def host(ptr, n):
    """``n`` float32 read back from ``ptr``."""
    out = bytearray(4 * n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), 4 * n, ptr, 4 * n, 2), "D2H")
    return np.frombuffer(bytes(out), dtype=np.float32)


@scenario
def rank():
    SYNC, RANK = os.environ["SYNC"], int(os.environ["RANK"])
    ok(acl.init())
    ok(acl.rt.set_device(RANK))
    if RANK == 0:
        for key in ("root", "root2"):
            ret, root = pyhccl.HcclGetRootInfo()
            ok(ret, "root info")
            put(SYNC, key, root.internal.hex())
    root = pyhccl.HcclRootInfo(bytes.fromhex(get(SYNC, "root")))
    ret, comm = pyhccl.HcclCommInitRootInfo(2, root, RANK)
    ok(ret, "init")
    if RANK == 1:  # rank 1 joins the second communicator first: its process creates that segment
        put(SYNC, "joining2", 1)
    else:
        get(SYNC, "joining2")
        time.sleep(0.3)
    root2 = pyhccl.HcclRootInfo(bytes.fromhex(get(SYNC, "root2")))
    ret, comm2 = pyhccl.HcclCommInitRootInfo(2, root2, RANK)
    ok(ret, "init 2")
    s, ret = acl.rt.create_stream()
    N = 300001  # ~1.2 MB: the mesh path (not the one-shot small path)
    mine = np.arange(N, dtype=np.float32) * (RANK + 1)
    x, y = dev_array(mine), dev_array(np.zeros(N))
    ok(pyhccl.HcclAllReduce(x, y, N, FP32, SUM, comm, s), "all_reduce")
    small_x, small_y = dev_array([RANK + 1.0] * 2), dev_array([0.0] * 2)
    ok(pyhccl.HcclAllReduce(small_x, small_y, 2, FP32, MAX, comm, s), "small all_reduce")
    g = dev_array(np.zeros(2 * N))
    ok(pyhccl.HcclAllGather(x, g, N, FP32, comm, s), "all_gather")
    b = dev_array(mine)
    ok(pyhccl.HcclBroadcast(b, N, FP32, 1, comm, s), "broadcast")
    ok(pyhccl.HcclBarrier(comm, s), "barrier")
    ok(acl.rt.synchronize_stream(s), "sync")
    R["all_reduce"] = bool(np.array_equal(host(y, N), np.arange(N, dtype=np.float32) * 3))
    R["small"] = host(small_y, 2).tolist()
    R["all_gather"] = bool(np.array_equal(host(g, 2 * N), np.concatenate(
        [np.arange(N, dtype=np.float32), np.arange(N, dtype=np.float32) * 2])))
    R["broadcast"] = bool(np.array_equal(host(b, N), np.arange(N, dtype=np.float32) * 2))
    # send/recv both ways (rank 0 sends first, rank 1 receives first: no deadlock)
    got = dev_array(np.zeros(N))
    for step in (RANK, 1 - RANK):
        if step == 0:
            ok(pyhccl.HcclSend(x, N, FP32, 1 - RANK, comm, s), "send")
        else:
            ok(pyhccl.HcclRecv(got, N, FP32, 1 - RANK, comm, s), "recv")
    # all_to_allv: rank r sends r + j + 1 elements to rank j
    sc = [RANK + j + 1 for j in range(2)]
    rc = [j + RANK + 1 for j in range(2)]
    sd, rd = [0, sc[0]], [0, rc[0]]
    v_in = dev_array(np.arange(sum(sc)) + 100 * RANK)
    v_out = dev_array(np.zeros(sum(rc)))
    ok(pyhccl.HcclAlltoAllV(v_in, sc, sd, FP32, v_out, rc, rd, FP32, comm, s), "all_to_allv")
    ok(acl.rt.synchronize_stream(s), "sync p2p")
    R["recv"] = bool(np.array_equal(host(got, N), np.arange(N, dtype=np.float32) * (2 - RANK)))
    R["all_to_allv"] = host(v_out, sum(rc)).tolist()
    R["async"] = pyhccl.HcclGetCommAsyncError(comm)[1]
    # a recv of another count than the send (on a second communicator): both cards fail
    # (E_PARA), no hang
    s2, ret = acl.rt.create_stream()
    bad = (pyhccl.HcclSend(x, 8, FP32, 1, comm2, s2) if RANK == 0 else
           pyhccl.HcclRecv(got, 4, FP32, 0, comm2, s2))
    R["mismatch_call"] = bad
    R["mismatch_sync"] = acl.rt.synchronize_stream(s2)
    R["mismatch_async"] = pyhccl.HcclGetCommAsyncError(comm2)[1]
    put(SYNC, f"done{RANK}", 1)
    if RANK == 0:
        get(SYNC, "done1")
        time.sleep(0.5)  # rank 1's process exits meanwhile without joining the next call
        t0 = time.monotonic()
        ok(pyhccl.HcclAllReduce(x, y, N, FP32, SUM, comm, s), "queued")
        R["orphan_sync"] = acl.rt.synchronize_stream(s)
        R["orphan_s"] = time.monotonic() - t0
        R["orphan_async"] = pyhccl.HcclGetCommAsyncError(comm)[1]
        R["destroy"] = pyhccl.HcclCommDestroy(comm)
    emit()
    if RANK == 1:
        os._exit(0)  # gone without leaving: rank 0 must notice the dead process itself


if __name__ == "__main__":
    main()
