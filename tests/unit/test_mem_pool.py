"""Stream-ordered memory pools (host/core/mempool.py) through acl.rt on the fake link."""

from __future__ import annotations

import pytest

from npuemu.host import acl
from npuemu.host.core import mempool
from npuemu.host.core import stream as streams
from npuemu.shared.enums import MemPoolAttr as A
from npuemu.shared.protocol import Op

PROPS = {"allocType": 0, "handleType": 0, "location": {"type": 1, "id": 0}, "maxSize": 0}


def ok(ret):
    assert ret == 0, ret


@pytest.fixture
def pool(fake_runtime):
    ok(acl.rt.set_device(0))
    pool, ret = acl.rt.mem_pool_create(PROPS)
    ok(ret)
    yield pool


def new_stream():
    s, ret = acl.rt.create_stream()
    ok(ret)
    return s


def test_same_stream_reuses_at_once_other_stream_after_the_free_point(pool, fake_runtime):
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 0))
    a, b = new_stream(), new_stream()
    ptr, ret = acl.rt.mem_pool_malloc_async(1000, pool, a)
    ok(ret)
    sa = streams.resolve(a)
    held = streams.submit(sa, Op.CALLBACK, 1, 1)  # stream a stays busy (blocking callback)
    ok(acl.rt.mem_pool_free_async(ptr, a))
    other, ret = acl.rt.mem_pool_malloc_async(1000, pool, b)
    ok(ret)
    assert other != ptr  # b must not get what a's pending work may still use
    again, ret = acl.rt.mem_pool_malloc_async(1000, pool, a)
    ok(ret)
    assert again == ptr  # a's own later work runs after the free: reuse at once
    ok(acl.rt.mem_pool_free_async(again, a))
    ok(acl.rt.mem_pool_free_async(other, b))
    sa.link.post(Op.CALLBACK_DONE, sa.slot, held)
    ok(acl.rt.synchronize_stream(a))
    got = {acl.rt.mem_pool_malloc_async(1000, pool, b)[0] for _ in range(2)}
    assert ptr in got  # a passed the free: b may take it (opportunistic)


def _held(stream_handle):
    """Keep a stream busy (a blocking callback); returns the release."""
    s = streams.resolve(stream_handle)
    held = streams.submit(s, Op.CALLBACK, 1, 1)
    return lambda: s.link.post(Op.CALLBACK_DONE, s.slot, held)


def test_reuse_follows_event_dependencies(pool):
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 0))
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, 0))
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, 1 << 30))
    a, b, c = new_stream(), new_stream(), new_stream()
    ev, ret = acl.rt.create_event()
    ok(ret)
    ptr, ret = acl.rt.mem_pool_malloc_async(1000, pool, a)
    ok(ret)
    release = _held(a)
    ok(acl.rt.mem_pool_free_async(ptr, a))
    ok(acl.rt.record_event(ev, a))
    ok(acl.rt.stream_wait_event(c, ev))  # c follows a past the free; b does not
    other, ret = acl.rt.mem_pool_malloc_async(1000, pool, b)
    ok(ret)
    assert other != ptr
    got, ret = acl.rt.mem_pool_malloc_async(1000, pool, c)
    ok(ret)
    assert got == ptr  # c's later work runs after a's free: reuse at once
    ok(acl.rt.mem_pool_free_async(got, c))
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES, 0))
    ev2, ret = acl.rt.create_event()
    ok(ret)
    ok(acl.rt.record_event(ev2, c))
    ok(acl.rt.stream_wait_event(b, ev2))  # b follows c (and through it, a)
    assert acl.rt.mem_pool_malloc_async(1000, pool, b)[0] != ptr  # not followed now
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES, 1))
    assert acl.rt.mem_pool_malloc_async(1000, pool, b)[0] == ptr  # through c's record
    release()
    ok(acl.rt.synchronize_device())


def test_reuse_inserts_an_internal_dependency(pool):
    a, b = new_stream(), new_stream()
    ptr, ret = acl.rt.mem_pool_malloc_async(1000, pool, a)
    ok(ret)
    release = _held(a)
    ok(acl.rt.mem_pool_free_async(ptr, a))
    sa, sb = streams.resolve(a), streams.resolve(b)
    before = (sa.submitted, sb.submitted)
    got, ret = acl.rt.mem_pool_malloc_async(1000, pool, b)
    ok(ret)
    assert got == ptr  # the default: reuse, with b ordered after a's free
    assert (sa.submitted, sb.submitted) == (before[0] + 1, before[1] + 1)  # record, wait
    assert streams.follows(sb, sa, before[0])
    release()
    ok(acl.rt.synchronize_stream(b))
    ok(acl.rt.mem_pool_free_async(got, b))
    ok(acl.rt.synchronize_device())


def test_attributes_and_trim(pool):
    s = new_stream()
    ptrs = [acl.rt.mem_pool_malloc_async(4096, pool, s)[0] for _ in range(3)]
    used, ret = acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT)
    ok(ret)
    assert used == 3 * 4096
    reserved = acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT)[0]
    assert reserved >= used
    for p in ptrs:
        ok(acl.rt.mem_pool_free_async(p, s))
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT)[0] == 0
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH)[0] == 3 * 4096
    ok(acl.rt.synchronize_stream(s))
    ok(acl.rt.mem_pool_trim_to(pool, 0))
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT)[0] == 0
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH)[0] == reserved
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH, 0))
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH)[0] == 0
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, 1 << 20))
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD)[0] == 1 << 20
    ok(acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, 0))
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC)[0] == 0
    ok(acl.rt.mem_pool_destroy(pool))


def test_max_size_and_destroy_rules(fake_runtime):
    ok(acl.rt.set_device(0))
    pool, ret = acl.rt.mem_pool_create({**PROPS, "maxSize": 8192})
    ok(ret)
    s = new_stream()
    p, ret = acl.rt.mem_pool_malloc_async(8192, pool, s)
    ok(ret)
    assert acl.rt.mem_pool_malloc_async(512, pool, s) == (0, 207001)
    assert acl.rt.mem_pool_destroy(pool) == 107000  # a block is still allocated
    ok(acl.rt.mem_pool_free_async(p, s))
    assert acl.rt.mem_pool_free_async(p, s) == 107000  # twice
    ok(acl.rt.mem_pool_destroy(pool))
    assert acl.rt.mem_pool_destroy(pool) == 107000
    assert acl.rt.mem_pool_malloc_async(64, pool, s) == (0, 107000)


def test_bad_input_codes(pool):
    s = new_stream()
    bad_props = [None, [], {"location": {"type": 0, "id": 0}}, {"location": {"id": 99}},
                 {"allocType": 1}, {"handleType": 2}, {"maxSize": -1}, {"location": 5}]
    for props in bad_props:
        assert acl.rt.mem_pool_create(props) == (0, 100000), props
    assert acl.rt.mem_pool_malloc_async(0, pool, s) == (0, 100000)
    assert acl.rt.mem_pool_malloc_async(-5, pool, s) == (0, 100000)
    assert acl.rt.mem_pool_malloc_async(64, 123456, s) == (0, 107000)
    assert acl.rt.mem_pool_malloc_async(64, pool, 987654) == (0, 107000)
    assert acl.rt.mem_pool_free_async(12345, s) == 107000
    assert acl.rt.mem_pool_free_async("x", s) == 107000
    assert acl.rt.mem_pool_trim_to(pool, -1) == 100000
    assert acl.rt.mem_pool_set_attr(pool, 99, 0) == 100000
    assert acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC, 2) == 100000
    assert acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT, 0) == 100000
    assert acl.rt.mem_pool_set_attr(pool, A.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, 5) == 100000
    assert acl.rt.mem_pool_get_attr(pool, 0) == (0, 100000)


def test_device_reset_ends_its_pools(fake_runtime):
    ok(acl.rt.set_device(1))
    pool, ret = acl.rt.mem_pool_create({**PROPS, "location": {"type": 1, "id": 1}})
    ok(ret)
    s = new_stream()
    p, ret = acl.rt.mem_pool_malloc_async(100, pool, s)
    ok(ret)
    ok(acl.rt.reset_device(1))
    assert p not in mempool._owners
    assert acl.rt.mem_pool_get_attr(pool, A.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT) == (0, 107000)


def test_streams_forget_what_they_followed_of_destroyed_streams(fake_runtime):
    ok(acl.rt.set_device(0))
    b = new_stream()
    for _ in range(5):  # a stream per step, each waited on by b, then destroyed
        a = new_stream()
        ev, ret = acl.rt.create_event()
        ok(ret)
        ok(acl.rt.record_event(ev, a))
        ok(acl.rt.stream_wait_event(b, ev))
        assert streams.follows(streams.resolve(b), streams.resolve(a), 1)
        ok(acl.rt.destroy_event(ev))
        ok(acl.rt.destroy_stream(a))
    assert len(streams.resolve(b).after) == 1  # only the newest (destroyed ones are dropped
    # at the next wait), not one entry per stream ever followed
