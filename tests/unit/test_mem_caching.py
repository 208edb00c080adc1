"""The host caching allocator (host/core/caching.py) on the fake link: reuse without a round
trip, stream safety, accounting, empty_cache, device reset, snapshot, bad input."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import random

import pytest

from npuemu.host.core import caching, device, memory, memstats, runtime
from npuemu.host.core import stream as streams
from npuemu.shared import errors
from npuemu.shared.protocol import Op


@pytest.fixture
def cache(fake_runtime: runtime.Runtime):
    device.set_device(0)
    cache = caching.CachingAllocator()
    yield cache
    cache.empty_cache()


def _calls(link, monkeypatch) -> list:
    seen = []
    real = link.call

    def call(op, *args):
        seen.append(op)
        return real(op, *args)

    monkeypatch.setattr(link, "call", call)
    return seen


def test_a_freed_block_is_reused_without_a_round_trip(cache, monkeypatch) -> None:
    rt = runtime.get()
    block = cache.malloc(256)
    ptr = block.ptr
    cache.free(ptr)
    seen = _calls(rt.current_link(), monkeypatch)
    again = cache.malloc(300)  # same 512-byte class
    assert again.ptr == ptr and seen == []
    assert again.requested == 300
    other = cache.malloc(600)  # another class: a device malloc
    assert other.ptr != ptr and seen == [Op.MALLOC]


def _hold_stream(stream: streams.Stream) -> int:
    """Queue a blocking callback task: the stream stays busy until it is released."""
    return streams.submit(stream, Op.CALLBACK, 1, 1)


def _release(stream: streams.Stream, seq: int) -> None:
    stream.link.post(Op.CALLBACK_DONE, stream.slot, seq)


def test_memory_a_pending_task_may_use_is_not_handed_out(cache) -> None:
    """Freed while another stream still has a task queued after a use: a request gets a
    fresh block until that task is done; then the cached block comes back."""
    busy = streams.create_stream()
    held = _hold_stream(busy)
    block = cache.malloc(4096)
    ptr = block.ptr
    # a copy on the busy stream uses the block (queued behind the held callback)
    host = memory.malloc_host(4096)
    streams.submit(busy, Op.COPY_ASYNC, ptr, host, 4096)
    assert not busy.done(busy.submitted)
    cache.free(ptr)
    other = cache.malloc(4096)
    assert other.ptr != ptr  # never the block the pending copy writes
    cache.free(other.ptr)
    _release(busy, held)
    runtime.get().current_link().wait_until(lambda: busy.done(busy.submitted), 10.0)
    reused = {cache.malloc(4096).ptr, cache.malloc(4096).ptr}
    assert ptr in reused
    memory.free_host(host)


def test_accounting_identities_after_random_sequences(cache) -> None:
    rng = random.Random(3)
    rt = runtime.get()
    link = rt.current_link()
    live: dict[int, int] = {}
    for _ in range(300):
        if live and rng.random() < 0.45:
            ptr = rng.choice(list(live))
            cache.free(ptr)
            del live[ptr]
        else:
            size = rng.choice([rng.randint(1, 4096), rng.randint(4097, 64 << 10)])
            live[cache.malloc(size).ptr] = size
        c = cache.counters(link)
        assert c.requested == sum(live.values())
        assert c.allocated == sum(caching.round_size(s) for s in live.values())
        assert c.active == len(live)
        lent, cached = cache.blocks(link)
        assert c.reserved == sum(b.alloc.span for b in lent + cached)
        assert c.reserved == c.allocated + sum(
            b.alloc.span - b.key[1] for b in cache.blocks(link)[0]) + cache.cached_bytes(link)
    # used (device) = reserved; empty_cache gives back exactly the cached bytes
    cached = cache.cached_bytes(link)
    before = cache.counters(link).reserved
    assert cache.empty_cache(link) == cached
    assert cache.counters(link).reserved == before - cached


def test_device_reset_drops_the_cards_blocks(fake_runtime) -> None:
    device.set_device(0)
    cache = caching.get()
    link = runtime.get().current_link()
    kept = cache.malloc(1000)
    cache.free(cache.malloc(5000).ptr)
    device.reset_device(0)
    c = cache.counters(link)
    assert c.reserved == 0 and c.segments == 0 and c.active == 0
    assert cache.lent(kept.ptr) is None
    with pytest.raises(errors.AclError) as info:
        cache.free(kept.ptr)
    assert info.value.code == errors.ACL_ERROR_RT_PARAM_INVALID


def test_bad_input(cache) -> None:
    for size in (0, -1):
        with pytest.raises(errors.AclError) as info:
            cache.malloc(size)
        assert info.value.code == errors.ACL_ERROR_INVALID_PARAM
    with pytest.raises(errors.AclError) as info:
        cache.malloc("12")  # type: ignore[arg-type]
    assert info.value.code == errors.ACL_ERROR_INVALID_PARAM
    for ptr in (0, 12345, None, "x"):
        with pytest.raises(errors.AclError) as info:
            cache.free(ptr)  # type: ignore[arg-type]
        assert info.value.code == errors.ACL_ERROR_RT_PARAM_INVALID
    block = cache.malloc(64)
    cache.free(block.ptr)
    with pytest.raises(errors.AclError):
        cache.free(block.ptr)  # twice


def test_round_size() -> None:
    assert caching.round_size(1) == 512
    assert caching.round_size(512) == 512
    assert caching.round_size(513) == 1024
    assert caching.round_size(1 << 20) == 1 << 20
    assert caching.round_size((1 << 20) + 1) == 2 << 20
    assert caching.round_size(5 << 20) == 6 << 20


def test_pythonic_face_uses_the_cache_and_reports_torch_keys(fake_runtime) -> None:
    import npuemu.host as npu

    with npu.Device(0):
        a = npu.DeviceBuffer(0, 1000)
        assert a.nbytes == 1000
        stats = npu.memory_stats(0)
        for key in ("allocated_bytes.all.current", "reserved_bytes.all.peak",
                    "num_alloc_retries", "num_ooms", "segment.all.current",
                    "active_bytes.all.current", "requested_bytes.all.current"):
            assert key in stats
        assert stats["allocated_bytes.all.current"] == 1024
        assert stats["requested_bytes.all.current"] == 1000
        ptr = a.ptr
        a.free()
        assert a.freed
        stats = npu.memory_stats(0)
        assert stats["allocated_bytes.all.current"] == 0
        assert stats["reserved_bytes.all.current"] > 0  # cached, not used
        b = npu.DeviceBuffer(0, 900)
        assert b.ptr == ptr and not b.freed and a.freed  # the old handle stays dead
        with pytest.raises(errors.AclError):
            a.copy_from_host(bytes(10))
        b.copy_from_host(bytes(range(100)) * 9)
        assert bytes(b.copy_to_host()) == bytes(range(100)) * 9
        snap = npu.memory_snapshot()
        loaded = pickle.loads(pickle.dumps(snap))
        assert set(loaded) >= {"segments", "device_traces"}
        seg = next(s for s in loaded["segments"] if s["address"] == ptr)
        for key in ("device", "address", "total_size", "allocated_size", "active_size",
                    "requested_size", "stream", "segment_type", "blocks", "frames"):
            assert key in seg
        assert seg["blocks"][0]["state"] == "active_allocated"
        assert seg["blocks"][0]["requested_size"] == 900
        b.free()
        assert npu.empty_cache() > 0
        assert npu.memory_stats(0)["reserved_bytes.all.current"] == 0


def test_leak_report_names_the_allocating_line(fake_runtime, monkeypatch) -> None:
    rt = runtime.get()
    monkeypatch.setattr(rt, "config", dataclasses.replace(rt.config, track_alloc=True))
    device.set_device(0)
    block = caching.get().malloc(128)
    line = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]
    report = [r for r in memstats.leak_report() if r["ptr"] == block.ptr]
    assert report and report[0]["where"].endswith(f"test_mem_caching.py:{line} in "
                                                  "test_leak_report_names_the_allocating_line")
    caching.get().free(block.ptr)
    caching.get().empty_cache()


def test_device_traces_follow_torch_events(cache, monkeypatch) -> None:
    """With tracking on, the caching allocator records the events torch's viewer reads
    (``action``, ``addr``, ``size``, ``stream``, ``frames``, ``time_us``); a free behind a
    busy stream completes only when a reuse finds the stream past it."""
    rt = runtime.get()
    monkeypatch.setattr(rt, "config", dataclasses.replace(rt.config, track_alloc=True))
    link = rt.current_link()
    a = cache.malloc(1000)  # miss: segment_alloc + alloc
    cache.free(a.ptr)  # nothing queued: free_requested + free_completed
    busy = streams.create_stream()
    held = _hold_stream(busy)
    b = cache.malloc(1000)  # hit
    assert b.ptr == a.ptr
    cache.free(b.ptr)  # behind the held stream: only free_requested
    pending = [e["action"] for e in cache.traces(link)]
    _release(busy, held)
    link.wait_until(lambda: busy.done(busy.submitted), 10.0)
    c = cache.malloc(1000)  # the reuse finds the stream past the free: free_completed
    cache.free(c.ptr)
    cache.empty_cache(link)  # segment_free
    actions = [e["action"] for e in cache.traces(link)]
    assert pending == ["segment_alloc", "alloc", "free_requested", "free_completed", "alloc",
                       "free_requested"]
    assert actions == [*pending, "free_completed", "alloc", "free_requested",
                       "free_completed", "segment_free"]
    events = cache.traces(link)
    assert {e["addr"] for e in events} == {a.ptr}
    assert events[0]["size"] == a.alloc.span and events[1]["size"] == 1024
    # the snapshot carries them per device, frames as the viewer wants them
    monkeypatch.setattr(caching, "_allocator", cache)
    snap = pickle.loads(pickle.dumps(memstats.snapshot()))
    trace = snap["device_traces"][0]
    assert [e["action"] for e in trace] == actions
    for e in trace:
        assert set(e) >= {"action", "addr", "size", "stream", "frames", "time_us"}
        assert all(set(f) == {"filename", "line", "name"} for f in e["frames"])
    alloc_frames = trace[1]["frames"]
    assert alloc_frames and alloc_frames[0]["name"] == "test_device_traces_follow_torch_events"
    free_frames = trace[2]["frames"]
    assert free_frames and free_frames[0]["name"] == "test_device_traces_follow_torch_events"
    streams.destroy_stream(busy.handle)


def test_acl_free_through_the_cache_takes_blocks_it_did_not_lend(fake_runtime) -> None:
    """NPUEMU_CACHING_ALLOCATOR=1's acl.rt.free: a cache block is kept, an
    aclrtMallocAlign32 block (never the cache's) is freed at once, junk is 107000."""
    device.set_device(0)
    lent = caching.acl_malloc(256)
    aligned = memory.malloc_align32(100)
    caching.acl_free(lent)
    assert caching.get().lent(lent) is None  # given back to the cache ...
    assert lent in runtime.get().allocations  # ... which keeps the device block
    with pytest.raises(errors.AclError):  # freed twice: refused, the block stays cached
        caching.acl_free(lent)
    assert lent in runtime.get().allocations
    caching.acl_free(aligned)
    assert aligned not in runtime.get().allocations  # freed, not cached
    with pytest.raises(errors.AclError) as info:
        caching.acl_free(aligned)
    assert info.value.code == errors.ACL_ERROR_RT_PARAM_INVALID
    caching.get().empty_cache()
