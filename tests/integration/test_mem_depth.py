"""Memory in depth against real workers: page pools and fragmentation, the caching
allocator (stream safety, honest get_mem_info, OOM retry), acl's opt-in, snapshots."""

from __future__ import annotations

import pickle

import pytest
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration

MiB = 1 << 20
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
PRELUDE = CHILD_HELPERS + """
import npuemu.host as npu
from npuemu.host.core import caching, runtime

def hbm_free():
    free, total, ret = acl.rt.get_mem_info(1)
    ok(ret, "get_mem_info")
    return free
"""


def scenario(run_py, body: str, env: dict[str, str] | None = None, timeout: float = 90) -> dict:
    return run_scenario(run_py, PRELUDE, body, {**ENV, **(env or {})}, timeout)


def test_pools_and_fragmentation_are_visible(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        small = [malloc(100_000, 2) for _ in range(40)]        # normal pages
        huge = [malloc(2 * 1024 * 1024 - 64, 1) for _ in range(8)]  # one 2 MiB page each
        for p in huge[::2]:
            ok(acl.rt.free(p))
        pools = npu.pool_stats(0)
        R["hbm"] = pools["hbm"]
        from npuemu.tools import status
        R["status"] = status.read_node(runtime.get().node.name)["devices"][0]["hbm_pools"]
        for p in small:
            ok(acl.rt.free(p))
        R["idle"] = npu.pool_stats(0)["hbm"]  # the normal pool keeps its emptied chunks
        npu.empty_cache(0)  # ... until the level-2 merge
        R["after"] = npu.pool_stats(0)["hbm"]
        for p in huge[1::2]:
            ok(acl.rt.free(p))
        R["empty"] = npu.pool_stats(0)["hbm"]
    """)
    normal, huge, g = r["hbm"]
    assert g["reserved"] == g["used"] == 0
    assert [p["name"] for p in r["hbm"]] == ["normal", "huge", "huge1g"]
    assert normal["used"] > 40 * 100_000 and normal["reserved"] % (2 * MiB) == 0
    assert normal["used"] + normal["free"] == normal["reserved"]
    assert huge["used"] == 4 * 2 * MiB
    assert sum(p["reserved"] for p in r["hbm"]) == 256 * MiB
    # four holes of one page between live pages: the huge-page pool joins them (a card's
    # MMU maps scattered pages as one block), so none of its free memory is out of reach
    assert huge["largest_free"] == huge["free"] and huge["fragmentation"] == 0
    assert r["status"]["normal_pool"] == normal["reserved"]
    assert r["status"]["fragmentation"] > 0
    assert r["idle"][0]["reserved"] == normal["reserved"] and r["idle"][0]["used"] == 0
    assert r["after"][0]["reserved"] == 0  # the normal chunks went back to the huge pool
    assert r["empty"][1]["free"] == r["empty"][1]["largest_free"] == 256 * MiB
    assert r["empty"][1]["fragmentation"] == 0


def test_cache_never_hands_out_memory_a_pending_task_uses(run_py):
    """Stream B's copy into a block is queued behind a held host function; the program frees
    the block (Pythonic face, cached) and asks for the same size again: it must get another
    block, or the copy would overwrite the new owner's data."""
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        with npu.Device(0):
            s = npu.Stream()
            gate = hold(s.handle)
            src = npu.DeviceBuffer(0, 4096)
            src.copy_from_host(b"\\x07" * 4096)
            victim = npu.DeviceBuffer(0, 4096)
            s.copy(victim, src)            # pending: runs when the gate opens
            ptr = victim.ptr
            victim.free()
            fresh = npu.DeviceBuffer(0, 4096)
            R["same"] = fresh.ptr == ptr
            fresh.copy_from_host(b"\\x01" * 4096)
            gate.set()
            s.synchronize()
            R["intact"] = bytes(fresh.copy_to_host()) == b"\\x01" * 4096
            fresh.free()
            again = [npu.DeviceBuffer(0, 4096) for _ in range(2)]
            R["reused_after"] = ptr in [b.ptr for b in again]
            for b in again:
                b.free()
            src.free()
            s.destroy()
    """)
    assert r == {"same": False, "intact": True, "reused_after": True}


def test_cached_bytes_count_as_used_until_empty_cache(run_py):
    r = scenario(run_py, """
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
    """)
    assert r["allocated"] == 0
    assert r["reserved"] == r["cached_used"] == r["released"] >= 4 * MiB
    assert r["back"] and r["reserved_after"] == 0


def test_out_of_memory_empties_the_cache_and_retries_once(run_py):
    r = scenario(run_py, """
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
    """)
    assert r == {"retries": 1, "ooms": 0, "code": 207001, "ooms_after": 1}


def test_acl_malloc_stays_uncached_unless_asked(run_py):
    body = """
        ok(acl.rt.set_device(0))
        free0 = hbm_free()
        p = malloc(1024 * 1024)
        ok(acl.rt.free(p))
        R["moved_at_once"] = hbm_free() == free0
        q = malloc(1024 * 1024)
        R["same_block"] = q == p
        ok(acl.rt.free(q))
        R["bad_free"] = acl.rt.free(12345)
    """
    plain = scenario(run_py, body)
    cached = scenario(run_py, body, {"NPUEMU_CACHING_ALLOCATOR": "1"})
    assert plain["moved_at_once"] and plain["bad_free"] == 107000
    assert not cached["moved_at_once"] and cached["same_block"]
    assert cached["bad_free"] == 107000


def test_snapshot_pickles_in_torchs_shape_with_frames(run_py, tmp_path):
    out = tmp_path / "snap.pickle"
    r = scenario(run_py, f"""
        import pickle
        ok(acl.rt.set_device(0))
        a = npu.DeviceBuffer(0, 3000)
        b = npu.DeviceBuffer(0, 5000)
        b.free()
        p = malloc(777)
        with open({str(out)!r}, "wb") as f:
            pickle.dump(npu.memory_snapshot(), f)
        R["leaks"] = [x["where"] for x in npu.leak_report()]
        ok(acl.rt.free(p))
        a.free()
        trace = npu.memory_snapshot()["device_traces"][0]
        R["p_trace"] = [e["action"] for e in trace if e["addr"] == p]
        R["p_frames"] = bool([e for e in trace if e["addr"] == p][0]["frames"])
    """, {"NPUEMU_TRACK_ALLOC": "1"})
    snap = pickle.loads(out.read_bytes())
    assert set(snap) >= {"segments", "device_traces"}
    states = sorted(s["blocks"][0]["state"] for s in snap["segments"])
    assert states == ["active_allocated", "active_allocated", "inactive"]
    for seg in snap["segments"]:
        assert {"device", "address", "total_size", "allocated_size", "active_size",
                "requested_size", "stream", "segment_type", "blocks"} <= set(seg)
        for block in seg["blocks"]:
            assert {"address", "size", "requested_size", "state", "frames"} <= set(block)
    active = [s for s in snap["segments"] if s["blocks"][0]["state"] == "active_allocated"]
    assert all(s["blocks"][0]["frames"] for s in active)  # NPUEMU_TRACK_ALLOC=1
    assert all(w.startswith("<string>:") for w in r["leaks"]) and len(r["leaks"]) == 2
    # the uncached acl.rt.malloc block is in the timeline too, as a segment of one block
    assert r["p_trace"] == ["segment_alloc", "alloc", "free_requested", "free_completed",
                            "segment_free"] and r["p_frames"], r


def test_stream_ordered_pool_on_real_workers(run_py):
    r = scenario(run_py, """
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
        R["q_intact"] = d2h(q, 8192) == b"\\x11" * 8192
        R["p_written"] = d2h(p, 8192) == b"\\x5A" * 8192
        ok(acl.rt.mem_pool_free_async(again, a))
        ok(acl.rt.mem_pool_free_async(q, b))
        ok(acl.rt.synchronize_stream(a)); ok(acl.rt.synchronize_stream(b))
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
    """)
    assert r["other_stream_same"] is False and r["same_stream_reuse"] is True
    assert r["q_intact"] is True and r["p_written"] is True
    assert r["reserved"] > 0 and r["trimmed_back"] == r["reserved"]
    assert r["reserved_after"] == 0
    assert r["internal_same"] is True and r["ordered"] is True
    assert r["b_waits"] == 1  # ACL_STREAM_STATUS_NOT_READY while a is held


def test_pool_growth_and_shrink_are_logged_at_debug(run_py):
    r = scenario(run_py, """
        from npuemu.shared import logring, shm
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
    """, {"ASCEND_GLOBAL_LOG_LEVEL": "0"})
    assert len(r["lines"]) == 2, r["lines"]
    assert "hbm normal-page pool grows by 2 MiB to 2 MiB" in r["lines"][0]
    assert "hbm normal-page pool shrinks by 2 MiB to 0 MiB" in r["lines"][1]
    assert all("DEVMM" in ln and "DEBUG" in ln for ln in r["lines"]), r["lines"]
