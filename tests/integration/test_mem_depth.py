"""Memory in depth against real workers: page pools and fragmentation, the caching
allocator (stream safety, honest get_mem_info, OOM retry), acl's opt-in, snapshots."""

from __future__ import annotations

import os
import pickle

import pytest
from childprog import run_program

from tests.conftest import PROGS

pytestmark = pytest.mark.integration

MiB = 1 << 20
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
PROG = "mem_depth.py"


def scenario(run_prog, name: str, *args, env: dict[str, str] | None = None,
             timeout: float = 90) -> dict:
    """Run the scenario ``name`` of the program with ``args`` in a child with ENV (+ ``env``);
    returns its ``R``."""
    return run_program(run_prog, PROG, name, *args, env={**ENV, **(env or {})},
                       timeout=timeout)


def test_pools_and_fragmentation_are_visible(run_prog):
    r = scenario(run_prog, "pools")
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


def test_cache_never_hands_out_memory_a_pending_task_uses(run_prog):
    """Stream B's copy into a block is queued behind a held host function; the program frees
    the block (Pythonic face, cached) and asks for the same size again: it must get another
    block, or the copy would overwrite the new owner's data."""
    r = scenario(run_prog, "pending_task")
    assert r == {"same": False, "intact": True, "reused_after": True}


def test_cached_bytes_count_as_used_until_empty_cache(run_prog):
    r = scenario(run_prog, "cached_bytes")
    assert r["allocated"] == 0
    assert r["reserved"] == r["cached_used"] == r["released"] >= 4 * MiB
    assert r["back"] and r["reserved_after"] == 0


def test_out_of_memory_empties_the_cache_and_retries_once(run_prog):
    r = scenario(run_prog, "oom_retry")
    assert r == {"retries": 1, "ooms": 0, "code": 207001, "ooms_after": 1}


def test_acl_malloc_stays_uncached_unless_asked(run_prog):
    plain = scenario(run_prog, "acl_malloc")
    cached = scenario(run_prog, "acl_malloc", env={"NPUEMU_CACHING_ALLOCATOR": "1"})
    assert plain["moved_at_once"] and plain["bad_free"] == 107000
    assert not cached["moved_at_once"] and cached["same_block"]
    assert cached["bad_free"] == 107000


def test_snapshot_pickles_in_torchs_shape_with_frames(run_prog, tmp_path):
    out = tmp_path / "snap.pickle"
    r = scenario(run_prog, "snapshot", out, env={"NPUEMU_TRACK_ALLOC": "1"})
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
    # each leak is the program's line that allocated it: the buffer's in the program, the
    # block's in childlib's malloc
    files = sorted(w.split(":", 1)[0] for w in r["leaks"])
    assert files == [os.path.join(PROGS, "childlib.py"), os.path.join(PROGS, PROG)], r["leaks"]
    # the uncached acl.rt.malloc block is in the timeline too, as a segment of one block
    assert r["p_trace"] == ["segment_alloc", "alloc", "free_requested", "free_completed",
                            "segment_free"] and r["p_frames"], r


def test_stream_ordered_pool_on_real_workers(run_prog):
    r = scenario(run_prog, "stream_ordered_pool")
    assert r["other_stream_same"] is False and r["same_stream_reuse"] is True
    assert r["q_intact"] is True and r["p_written"] is True
    assert r["reserved"] > 0 and r["trimmed_back"] == r["reserved"]
    assert r["reserved_after"] == 0
    assert r["internal_same"] is True and r["ordered"] is True
    assert r["b_waits"] == 1  # ACL_STREAM_STATUS_NOT_READY while a is held


def test_pool_growth_and_shrink_are_logged_at_debug(run_prog):
    r = scenario(run_prog, "pool_log", env={"ASCEND_GLOBAL_LOG_LEVEL": "0"})
    assert len(r["lines"]) == 2, r["lines"]
    assert "hbm normal-page pool grows by 2 MiB to 2 MiB" in r["lines"][0]
    assert "hbm normal-page pool shrinks by 2 MiB to 0 MiB" in r["lines"][1]
    assert all("DEVMM" in ln and "DEBUG" in ln for ln in r["lines"]), r["lines"]
