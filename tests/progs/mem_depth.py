"""Child program of ``tests/integration/test_mem_depth.py``: memory in depth (page pools
and fragmentation, the caching allocator of the Pythonic face: stream safety, honest
``aclrtGetMemInfo``, OOM retry; acl's opt-in ``NPUEMU_CACHING_ALLOCATOR``; snapshots; the
stream-ordered pool ``aclrtMemPool*``; pool growth logged at debug).

``python mem_depth.py SCENARIO [ARG...]`` runs one scenario (no ``aclInit``; each sets
device 0) and prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import pickle
import time

from childlib import R, acl, d2h, hold, main, malloc, ok, scenario, stream

import npuemu.host as npu
from npuemu.host.core import runtime
from npuemu.shared import logring, shm
from npuemu.tools import status


def hbm_free():
    """Free HBM of the current device (``aclrtGetMemInfo`` of ``ACL_HBM_MEM``)."""
    free, _total, ret = acl.rt.get_mem_info(1)
    ok(ret, "get_mem_info")
    return free


@scenario
def pools():
    ok(acl.rt.set_device(0))
    small = [malloc(100_000, 2) for _ in range(40)]        # normal pages
    huge = [malloc(2 * 1024 * 1024 - 64, 1) for _ in range(8)]  # one 2 MiB page each
    for p in huge[::2]:
        ok(acl.rt.free(p))
    pools = npu.pool_stats(0)
    R["hbm"] = pools["hbm"]
    R["status"] = status.read_node(runtime.get().node.name)["devices"][0]["hbm_pools"]
    for p in small:
        ok(acl.rt.free(p))
    R["idle"] = npu.pool_stats(0)["hbm"]  # the normal pool keeps its emptied chunks
    npu.empty_cache(0)  # ... until the level-2 merge
    R["after"] = npu.pool_stats(0)["hbm"]
    for p in huge[1::2]:
        ok(acl.rt.free(p))
    R["empty"] = npu.pool_stats(0)["hbm"]


@scenario
def pending_task():
    ok(acl.rt.set_device(0))
    with npu.Device(0):
        s = npu.Stream()
        gate = hold(s.handle)
        src = npu.DeviceBuffer(0, 4096)
        src.copy_from_host(b"\x07" * 4096)
        victim = npu.DeviceBuffer(0, 4096)
        s.copy(victim, src)            # pending: runs when the gate opens
        ptr = victim.ptr
        victim.free()
        fresh = npu.DeviceBuffer(0, 4096)
        R["same"] = fresh.ptr == ptr
        fresh.copy_from_host(b"\x01" * 4096)
        gate.set()
        s.synchronize()
        R["intact"] = bytes(fresh.copy_to_host()) == b"\x01" * 4096
        fresh.free()
        again = [npu.DeviceBuffer(0, 4096) for _ in range(2)]
        R["reused_after"] = ptr in [b.ptr for b in again]
        for b in again:
            b.free()
        src.free()
        s.destroy()


@scenario
def cached_bytes():
    ok(acl.rt.set_device(0))
    free0 = hbm_free()
    bufs = [npu.DeviceBuffer(0, 1024 * 1024) for _ in range(4)]
    for b in bufs:
        b.free()
    stats = npu.memory_stats(0)
    R["cached_used"] = free0 - hbm_free()
    R["allocated"] = stats["allocated_bytes.all.current"]
    R["reserved"] = stats["reserved_bytes.all.current"]
    R["released"] = npu.empty_cache()
    R["back"] = hbm_free() == free0
    R["reserved_after"] = npu.memory_stats(0)["reserved_bytes.all.current"]


@scenario
def oom_retry():
    ok(acl.rt.set_device(0))
    big = npu.DeviceBuffer(0, 150 * 1024 * 1024)
    big.free()                                   # cached
    b = npu.DeviceBuffer(0, 200 * 1024 * 1024)   # fits only once the cache is given back
    s = npu.memory_stats(0)
    R["retries"], R["ooms"] = s["num_alloc_retries"], s["num_ooms"]
    try:
        npu.DeviceBuffer(0, 200 * 1024 * 1024)
    except npu.OutOfMemoryError as e:
        R["code"] = e.code
    R["ooms_after"] = npu.memory_stats(0)["num_ooms"]
    b.free()


@scenario
def acl_malloc():
    ok(acl.rt.set_device(0))
    free0 = hbm_free()
    p = malloc(1024 * 1024)
    ok(acl.rt.free(p))
    R["moved_at_once"] = hbm_free() == free0
    q = malloc(1024 * 1024)
    R["same_block"] = q == p
    ok(acl.rt.free(q))
    R["bad_free"] = acl.rt.free(12345)


@scenario
def snapshot(out):
    """Buffers, a block and a snapshot pickled to the file ``out``."""
    ok(acl.rt.set_device(0))
    a = npu.DeviceBuffer(0, 3000)
    b = npu.DeviceBuffer(0, 5000)
    b.free()
    p = malloc(777)
    with open(out, "wb") as f:
        pickle.dump(npu.memory_snapshot(), f)
    R["leaks"] = [x["where"] for x in npu.leak_report()]
    ok(acl.rt.free(p))
    a.free()
    trace = npu.memory_snapshot()["device_traces"][0]
    R["p_trace"] = [e["action"] for e in trace if e["addr"] == p]
    R["p_frames"] = bool(next(e for e in trace if e["addr"] == p)["frames"])


@scenario
def stream_ordered_pool():
    ok(acl.rt.set_device(0))
    pool, ret = acl.rt.mem_pool_create({"location": {"type": 1, "id": 0}})
    ok(ret, "mem_pool_create")
    ok(acl.rt.mem_pool_set_attr(pool, 3, 0))  # no internal dependencies: b gets its own
    a, b = stream(), stream()
    gate = hold(a)
    p, ret = acl.rt.mem_pool_malloc_async(8192, pool, a)
    ok(ret, "malloc_async")
    ok(acl.rt.memset_async(p, 8192, 0x5A, 8192, a))    # pending behind the gate
    ok(acl.rt.mem_pool_free_async(p, a))
    q, ret = acl.rt.mem_pool_malloc_async(8192, pool, b)
    R["other_stream_same"] = q == p
    ok(acl.rt.memset_async(q, 8192, 0x11, 8192, b))
    ok(acl.rt.synchronize_stream(b))
    again, ret = acl.rt.mem_pool_malloc_async(8192, pool, a)
    R["same_stream_reuse"] = again == p
    gate.set()
    ok(acl.rt.synchronize_stream(a))
    R["q_intact"] = d2h(q, 8192) == b"\x11" * 8192
    R["p_written"] = d2h(p, 8192) == b"\x5A" * 8192
    ok(acl.rt.mem_pool_free_async(again, a))
    ok(acl.rt.mem_pool_free_async(q, b))
    ok(acl.rt.synchronize_stream(a))
    ok(acl.rt.synchronize_stream(b))
    R["reserved"] = acl.rt.mem_pool_get_attr(pool, 5)[0]
    free0 = hbm_free()
    ok(acl.rt.mem_pool_trim_to(pool, 0))
    R["trimmed_back"] = hbm_free() - free0
    R["reserved_after"] = acl.rt.mem_pool_get_attr(pool, 5)[0]
    # the default (internal dependencies on): b reuses a's pending block, and its work
    # waits for a's (the pool made b wait on an event recorded on a)
    ok(acl.rt.mem_pool_set_attr(pool, 3, 1))
    gate = hold(a)
    p, ret = acl.rt.mem_pool_malloc_async(8192, pool, a)
    ok(acl.rt.memset_async(p, 8192, 0x5A, 8192, a))
    ok(acl.rt.mem_pool_free_async(p, a))
    q, ret = acl.rt.mem_pool_malloc_async(8192, pool, b)
    R["internal_same"] = q == p
    ok(acl.rt.memset_async(q, 4096, 0x11, 4096, b))
    time.sleep(0.2)
    R["b_waits"] = acl.rt.stream_query(b)[0]
    gate.set()
    ok(acl.rt.synchronize_stream(b))
    R["ordered"] = d2h(q, 8192) == b"\x11" * 4096 + b"\x5A" * 4096
    ok(acl.rt.mem_pool_free_async(q, b))
    ok(acl.rt.synchronize_device())
    ok(acl.rt.mem_pool_destroy(pool))


@scenario
def pool_log():
    ok(acl.rt.set_device(0))
    p = malloc(4096, 2)          # the normal-page pool takes its first 2 MiB chunk
    ok(acl.rt.free(p))
    npu.empty_cache(0)           # the level-2 merge gives the idle chunk back
    hbm_free()                   # the free and the merge are posted and handled
    seg = shm.Segment(shm.name(runtime.get().node.name, "d0", "log"))
    ring = logring.LogRing(seg.buf)
    R["lines"] = [ln for ln in ring.read().splitlines() if "normal-page pool" in ln]
    ring.release()
    seg.close()


if __name__ == "__main__":
    main()
