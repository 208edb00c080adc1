"""Ranks of one node in separate host processes (card-executed collectives): process A calls
``HcclGetRootInfo`` and joins as rank 0 on card 0, process B joins as rank 1 on card 1 with
the root info A wrote; their collectives, all_to_allv and send/recv (one copy, from the
sender's arena straight into the receiver's) run between the cards without any host thread
of the other process; a recv whose count differs from the send fails on both. Then B's
process ends abruptly (``os._exit``, no cleanup) without calling the next all_reduce: A's
fails with HCCL_E_REMOTE (its peer's host is gone) well before HCCL_EXEC_TIMEOUT instead of
hanging."""

from __future__ import annotations

import json
import os
import time

import pytest
from childprog import FILE_RENDEZVOUS

pytestmark = pytest.mark.integration

RANK = FILE_RENDEZVOUS + """
import json, os, sys, time
import numpy as np
from npuemu.tools.cli import install_acl
install_acl()
import acl, pyhccl
SYNC, RANK = os.environ["SYNC"], int(os.environ["RANK"])
FP32, SUM, MAX = 4, 0, 2
R = {}

def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def dev_array(values):
    data = np.ascontiguousarray(values, dtype=np.float32)
    ptr, ret = acl.rt.malloc(max(data.nbytes, 4), 0)
    ok(ret, "malloc")
    raw = data.tobytes()  # kept alive across the copy
    ok(acl.rt.memcpy(ptr, data.nbytes, acl.util.bytes_to_ptr(raw), data.nbytes, 1), "H2D")
    return ptr

def host(ptr, n):
    out = bytearray(4 * n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), 4 * n, ptr, 4 * n, 2), "D2H")
    return np.frombuffer(bytes(out), dtype=np.float32)

ok(acl.init())
ok(acl.rt.set_device(RANK))
if RANK == 0:
    for key in ("root", "root2"):
        ret, root = pyhccl.HcclGetRootInfo()
        ok(ret, "root info")
        put(key, root.internal.hex())
root = pyhccl.HcclRootInfo(bytes.fromhex(get("root")))
ret, comm = pyhccl.HcclCommInitRootInfo(2, root, RANK)
ok(ret, "init")
if RANK == 1:  # rank 1 joins the second communicator first: its process creates that segment
    put("joining2", 1)
else:
    get("joining2")
    time.sleep(0.3)
ret, comm2 = pyhccl.HcclCommInitRootInfo(2, pyhccl.HcclRootInfo(bytes.fromhex(get("root2"))),
                                         RANK)
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
bad = pyhccl.HcclSend(x, 8, FP32, 1, comm2, s2) if RANK == 0 else \
    pyhccl.HcclRecv(got, 4, FP32, 0, comm2, s2)
R["mismatch_call"] = bad
R["mismatch_sync"] = acl.rt.synchronize_stream(s2)
R["mismatch_async"] = pyhccl.HcclGetCommAsyncError(comm2)[1]
put(f"done{RANK}", 1)
if RANK == 0:
    get("done1")
    time.sleep(0.5)  # rank 1's process exits meanwhile without joining the next call
    t0 = time.monotonic()
    ok(pyhccl.HcclAllReduce(x, y, N, FP32, SUM, comm, s), "queued")
    R["orphan_sync"] = acl.rt.synchronize_stream(s)
    R["orphan_s"] = time.monotonic() - t0
    R["orphan_async"] = pyhccl.HcclGetCommAsyncError(comm)[1]
    R["destroy"] = pyhccl.HcclCommDestroy(comm)
print("RESULT " + json.dumps(R), flush=True)
if RANK == 1:
    os._exit(0)  # gone without leaving: rank 0 must notice the dead process itself
"""


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


def test_two_host_processes_one_node(shared_node, spawn_py, tmp_path) -> None:
    name = shared_node(devices=2, hbm="256M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path), "HCCL_BUFFSIZE": "1",
           "HCCL_EXEC_TIMEOUT": "20"}
    a = spawn_py(RANK, env={**env, "RANK": "0"})
    b = spawn_py(RANK, env={**env, "RANK": "1"})
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
