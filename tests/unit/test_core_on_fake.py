"""Host logic of the runtime core, run on the in-process fake link (``fake_runtime``).

Argument checks, handle tables, error mapping of the ``acl`` face and callback bookkeeping
do not cross the driver seam, so they are tested here in milliseconds; the behaviour of a
real worker behind the seam is tested in ``tests/integration/``.
"""

from __future__ import annotations

import threading

import pytest

from npuemu.host import acl
from npuemu.host.core import memory, stream
from npuemu.host.driver.interface import SlotPool
from npuemu.shared import address, errors
from npuemu.shared.protocol import Op

INVALID_PARAM = 100000
RT_PARAM_INVALID = 107000
INVALID_DEVICEID = 107001
CONTEXT_NULL = 107002
STREAM_CONTEXT = 107003
REPEAT_SUBSCRIBE = errors.ACL_ERROR_REPEAT_SUBSCRIBE
THREAD_SUBSCRIBE = errors.ACL_ERROR_RT_THREAD_SUBSCRIBE
STREAM_NO_CB_REG = errors.ACL_ERROR_RT_STREAM_NO_CB_REG
REPORT_TIMEOUT = 507012
LOST_HEARTBEAT = 507010
STREAM_SYNC_TIMEOUT = 507046
AICORE_EXCEPTION = 507015
ABNORMAL, NORMAL = 1, 0


def ok(ret: int) -> None:
    assert ret == 0, (ret, acl.get_recent_err_msg())


def malloc(size: int) -> int:
    ptr, ret = acl.rt.malloc(size, 0)
    ok(ret)
    return ptr


def new_stream() -> int:
    s, ret = acl.rt.create_stream()
    ok(ret)
    return s


# ------------------------------------------------------------------ devices and contexts
def test_invalid_device_ids_and_missing_context(fake_runtime):
    assert list(acl.rt.get_device()) == [-1, CONTEXT_NULL]
    assert list(acl.rt.malloc(4096, 0)) == [0, CONTEXT_NULL]
    assert list(acl.rt.get_context()) == [0, CONTEXT_NULL]
    assert acl.rt.memset(address.encode(0, 0, 0), 64, 0, 64) == CONTEXT_NULL
    for bad in (99, -1, 4, "0"):
        assert acl.rt.set_device(bad) == INVALID_DEVICEID, bad
    assert list(acl.rt.get_device()) == [-1, CONTEXT_NULL]
    assert acl.rt.reset_device(0) == RT_PARAM_INVALID
    assert acl.rt.reset_device(99) == INVALID_DEVICEID
    assert list(acl.rt.create_context(99)) == [0, INVALID_DEVICEID]


def test_contexts_create_set_get_destroy(fake_runtime):
    ctx0, ret = acl.rt.create_context(0)
    ok(ret)
    assert acl.rt.get_context() == (ctx0, 0)
    ctx1, ret = acl.rt.create_context(1)
    ok(ret)
    assert ctx0 != ctx1 and 0 not in (ctx0, ctx1)
    assert address.decode(malloc(4096))[0] == 1
    ok(acl.rt.set_context(ctx0))
    assert address.decode(malloc(4096))[0] == 0
    ok(acl.rt.destroy_context(ctx1))
    assert acl.rt.set_context(ctx1) == RT_PARAM_INVALID
    assert acl.rt.destroy_context(ctx1) == RT_PARAM_INVALID
    ok(acl.rt.destroy_context(ctx0))
    assert list(acl.rt.get_device()) == [-1, CONTEXT_NULL]
    assert acl.rt.set_context(12345) == RT_PARAM_INVALID
    ok(acl.rt.set_device(2))
    primary, ret = acl.rt.get_context()
    assert primary and ret == 0
    assert acl.rt.destroy_context(primary) == RT_PARAM_INVALID


def test_set_device_counts_references(fake_runtime):
    ok(acl.rt.set_device(0))
    ok(acl.rt.set_device(0))
    p = malloc(64)
    ok(acl.rt.reset_device(0))
    assert memory.find(p, 64).ptr == p  # one reference left: memory still there
    ok(acl.rt.reset_device(0))
    assert acl.rt.reset_device(0) == RT_PARAM_INVALID
    assert p not in fake_runtime.allocations


# ------------------------------------------------------------------ memory arguments
def test_bad_malloc_and_free(fake_runtime):
    ok(acl.rt.set_device(0))
    assert list(acl.rt.malloc(0, 0)) == [0, INVALID_PARAM]
    assert list(acl.rt.malloc(-5, 0)) == [0, INVALID_PARAM]
    p = malloc(4096)
    for bad in (p + (1 << 20), p + 64, acl.util.bytes_to_ptr(b"abc"), address.encode(2, 0, 0),
                0, "p", None):
        assert acl.rt.free(bad) == RT_PARAM_INVALID, bad
    ok(acl.rt.free(p))
    assert acl.rt.free(p) == RT_PARAM_INVALID
    assert acl.rt.memcpy(p, 64, acl.util.bytes_to_ptr(bytes(64)), 64, 1) == RT_PARAM_INVALID


def test_bad_memcpy_arguments_and_a_round_trip(fake_runtime):
    ok(acl.rt.set_device(1))
    n = 4096
    a, b = malloc(n), malloc(n)
    host = bytearray(range(256)) * (n // 256)
    hp = acl.util.bytes_to_ptr(host)
    mc = acl.rt.memcpy
    P = RT_PARAM_INVALID
    assert mc(a, 100, hp, 101, 1) == P  # count > dst_max
    assert mc(a, n, b, n, 1) == 0  # the direction comes from the addresses, not the kind
    assert mc(a, n, hp, n, 99) == P
    assert mc(0, n, hp, n, 1) == INVALID_PARAM
    assert mc(a, 2 * n, hp, 2 * n, 1) == P  # past the allocation
    assert mc(address.encode(3, 0, 0), n, hp, n, 1) == P  # another card, not ours
    assert mc(a, n, 0x10, 16, 1) == P  # unmapped host source
    assert mc(a, n, hp, 0, 1) == 0
    ok(mc(a, n, hp, n, 1))
    ok(mc(b, n, a, n, 3))
    out = bytearray(n)
    ok(mc(acl.util.bytes_to_ptr(out), n, b, n, 2))
    assert out == host



def test_small_copies_poll_liveness_once_a_window_and_see_a_lost_card(fake_runtime, monkeypatch):
    """The short path of ``memcpy`` polls the card (``Link.check_alive``) at most once per
    ``LIVENESS_POLL_NS``, but a card known lost fails every copy at once, all three kinds."""
    ok(acl.rt.set_device(0))
    n = 4096
    a, b = malloc(n), malloc(n)
    host = bytearray(b"x" * n)
    hp = acl.util.bytes_to_ptr(host)
    link = fake_runtime.devices[0].link
    polls = []
    real_check = link.check_alive
    monkeypatch.setattr(link, "check_alive", lambda: polls.append(1) or real_check())
    clock = [10**12]
    monkeypatch.setattr(memory, "_monotonic_ns", lambda: clock[0])
    for _ in range(20):  # the clock stands still: one poll for all of them
        ok(acl.rt.memcpy(a, n, hp, n, 1))
        ok(acl.rt.memcpy(b, n, a, n, 3))
        ok(acl.rt.memcpy(hp, n, b, n, 2))
    assert len(polls) == 1
    clock[0] += memory.LIVENESS_POLL_NS - 1
    ok(acl.rt.memcpy(a, n, hp, n, 1))
    assert len(polls) == 1
    clock[0] += 1
    ok(acl.rt.memcpy(a, n, hp, n, 1))
    assert len(polls) == 2
    assert acl.rt.memcpy(hp, n + 1, a, n + 1, 2) == RT_PARAM_INVALID  # past the block
    link.lose()  # no time passes: the link's verdict is read on every copy
    for args in ((a, n, hp, n, 1), (hp, n, a, n, 2), (b, n, a, n, 3)):
        assert acl.rt.memcpy(*args) == LOST_HEARTBEAT, args


# ------------------------------------------------------------------ handle tables
def test_handles_of_the_wrong_kind_or_destroyed_are_107000(fake_runtime):
    ok(acl.rt.set_device(0))
    s = new_stream()
    e, ret = acl.rt.create_event()
    ok(ret)
    ctx, ret = acl.rt.get_context()
    assert acl.rt.synchronize_stream(e) == RT_PARAM_INVALID  # an event is not a stream
    assert acl.rt.synchronize_event(s) == RT_PARAM_INVALID
    assert acl.rt.set_context(s) == RT_PARAM_INVALID
    assert acl.rt.destroy_stream(ctx) == RT_PARAM_INVALID
    for bad in ("s", 1.5, None, 2**70, -1):
        assert acl.rt.query_event(bad)[-1] == RT_PARAM_INVALID, bad
    ok(acl.rt.destroy_stream(s))
    ok(acl.rt.destroy_event(e))
    assert acl.rt.synchronize_stream(s) == RT_PARAM_INVALID
    assert acl.rt.destroy_event(e) == RT_PARAM_INVALID
    assert acl.rt.destroy_stream(0) == RT_PARAM_INVALID  # the default stream


def test_stream_of_another_device_and_slots_come_back(fake_runtime):
    ok(acl.rt.set_device(0))
    s0 = new_stream()
    ok(acl.rt.set_device(1))
    p = malloc(64)
    assert acl.rt.memset_async(p, 64, 1, 64, s0) == STREAM_CONTEXT
    link = fake_runtime.devices[1].link
    before = link.stream_slots.in_use()
    for _ in range(50):
        ok(acl.rt.destroy_stream(new_stream()))
    assert link.stream_slots.in_use() == before


def test_slot_pool_reuses_a_pending_slot_only_when_done():
    pool = SlotPool(2)
    a, b = pool.take(1), pool.take(1)
    with pytest.raises(errors.AclError) as err:
        pool.take(207008)
    assert err.value.code == 207008
    done = [False]
    pool.give_when(lambda: done[0], a)
    with pytest.raises(errors.AclError):
        pool.take(207008)
    done[0] = True
    assert pool.take(207008) == a
    pool.give(b)
    assert pool.in_use() == 1


# ------------------------------------------------------------------ error mapping
def test_task_failure_is_reported_once_by_synchronize(fake_runtime):
    ok(acl.rt.set_device(0))
    s = new_stream()
    link = fake_runtime.devices[0].link
    p = malloc(64)
    link.fail_next(AICORE_EXCEPTION)
    ok(acl.rt.memset_async(p, 64, 1, 64, s))
    ok(acl.rt.memset_async(p, 64, 2, 64, s))
    assert acl.rt.synchronize_stream(s) == AICORE_EXCEPTION
    assert acl.rt.synchronize_stream(s) == 0  # reported once (continue mode)
    assert acl.rt.stream_query(s) == (0, 0)


def test_lost_and_hung_devices(fake_runtime):
    ok(acl.rt.set_device(0))
    ok(acl.rt.set_device(1))
    s = new_stream()
    assert acl.rt.query_device_status(1) == (NORMAL, 0)
    fake_runtime.devices[1].link.hang()
    assert acl.rt.query_device_status(1) == (ABNORMAL, 0)
    assert acl.rt.query_device_status(0) == (NORMAL, 0)  # other cards untouched
    assert list(acl.rt.malloc(64, 0)) == [0, LOST_HEARTBEAT]
    assert acl.rt.synchronize_stream(s) == 0  # nothing pending: the table says so
    assert acl.rt.launch_host_func(s, lambda _: None, None) == LOST_HEARTBEAT
    ok(acl.rt.reset_device(1))


# ------------------------------------------------------------------ values the wire refuses
def test_ints_beyond_64_bits_are_107000_and_leave_the_stream_usable(fake_runtime):
    """The stream's task counter used to move before the encoder raised
    OverflowError, so the stream never completed and each call leaked a stream slot."""
    ok(acl.rt.set_device(0))
    s = new_stream()
    e, ret = acl.rt.create_event()
    ok(ret)
    ok(acl.rt.record_event(e, s))
    link = fake_runtime.devices[0].link
    in_use = link.stream_slots.in_use()
    for big in (2**64, -(2**63) - 1, 2**200):
        assert acl.rt.stream_wait_event_with_timeout(s, e, big) in (RT_PARAM_INVALID,), big
        assert list(acl.rt.create_stream_with_config(0, big)) == [0, RT_PARAM_INVALID]
    for _ in range(1100):  # more than the device's 1,024 stream slots
        assert acl.rt.create_stream_with_config(0, 2**64)[-1] == RT_PARAM_INVALID
    assert link.stream_slots.in_use() == in_use
    assert acl.rt.synchronize_stream_with_timeout(s, 1000) == 0
    assert stream.resolve(s).submitted == 1  # only the record was counted
    ok(acl.rt.destroy_stream(new_stream()))


# ------------------------------------------------------------------ callback bookkeeping
def test_process_report_and_launch_callback_errors(fake_runtime):
    ok(acl.rt.set_device(0))
    s = new_stream()
    assert acl.rt.process_report(100) == THREAD_SUBSCRIBE
    assert [acl.rt.process_report(0), acl.rt.process_report(-2)] == [INVALID_PARAM] * 2
    assert acl.rt.launch_callback(lambda _: None, None, 0, s) == STREAM_NO_CB_REG
    me = threading.get_native_id()
    ok(acl.rt.subscribe_report(me, s))
    assert acl.rt.subscribe_report(me, s) == REPEAT_SUBSCRIBE
    assert acl.rt.process_report(50) == REPORT_TIMEOUT
    got: list = []
    ok(acl.rt.launch_callback(got.append, "mine", 1, s))  # ACL_CALLBACK_BLOCK
    assert acl.rt.stream_query(s) == (1, 0)  # held until the callback ran
    ok(acl.rt.process_report(5000))
    assert got == ["mine"]
    ok(acl.rt.synchronize_stream_with_timeout(s, 5000))
    ok(acl.rt.unsubscribe_report(me, s))
    assert acl.rt.process_report(50) == THREAD_SUBSCRIBE


def test_host_funcs_run_in_order_and_exception_callbacks_get_the_task(fake_runtime):
    ok(acl.rt.set_device(0))
    s = new_stream()
    order: list = []
    for i in range(5):
        ok(acl.rt.launch_host_func(s, order.append, i))
    ok(acl.rt.synchronize_stream_with_timeout(s, 10_000))
    assert order == [0, 1, 2, 3, 4]
    seen: list = []
    done = threading.Event()

    def on_exception(info):
        seen.append((acl.rt.get_error_code_from_exception_info(info),
                     acl.rt.get_device_id_from_exception_info(info)))
        done.set()

    ok(acl.rt.set_exception_info_callback(on_exception))
    try:
        fake_runtime.devices[0].link.fail_next(AICORE_EXCEPTION)
        p = malloc(64)
        ok(acl.rt.memset_async(p, 64, 0, 64, s))
        assert acl.rt.synchronize_stream(s) == AICORE_EXCEPTION
        assert done.wait(10)
        assert seen == [(AICORE_EXCEPTION, 0)]
    finally:
        ok(acl.rt.set_exception_info_callback(None))


def test_requests_cross_the_seam_as_frames(fake_runtime):
    """What the core sends for a malloc/free pair and a stream task (the fake records it)."""
    ok(acl.rt.set_device(0))
    link = fake_runtime.devices[0].link
    p = malloc(100)
    ok(acl.rt.free(p))
    s = new_stream()
    ok(acl.rt.memset_async(malloc(64), 64, 7, 64, s))
    ops = [frame[0] for frame in link.requests]
    # the small free is batched (host/core/freebatch.py) until the next malloc that needs
    # the device, and crosses before it
    assert ops[0] == Op.MALLOC and ops.count(Op.FREE) == 1
    assert ops.index(Op.FREE) == ops.index(Op.MALLOC, 1) - 1
    assert ops[-1] == Op.MEMSET_ASYNC and link.requests[-1][2] == 1  # task 1 of its stream
