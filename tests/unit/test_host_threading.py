"""Stress tests for the host's threading model: each would catch one race
that was fixed. No processes: the fake link (``fake_runtime``) or plain host structures.

The races were windows of a few bytecodes; a tiny GIL switch interval makes the interpreter
switch threads inside such windows thousands of times per run. The tests count iterations,
never time.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from npuemu.host import acl
from npuemu.host.core import memory, runtime, stream
from npuemu.host.driver import hostmem
from npuemu.host.driver.fake import FakeNode
from npuemu.shared import address, errors

ROUNDS = 3000


@pytest.fixture
def fast_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def hammer(workers: list[Callable[[], None]], rounds: int = ROUNDS,
           background: Callable[[], None] | None = None) -> list[BaseException]:
    """Run each worker ``rounds`` times in its own thread (and ``background`` in a loop of
    its own until they are done); the exceptions they raised."""
    failures: list[BaseException] = []
    done = threading.Event()

    def loop(fn: Callable[[], None], forever: bool = False) -> None:
        try:
            for _ in range(rounds):
                fn()
            while forever and not done.is_set():
                fn()
        except BaseException as err:  # reported by the test
            failures.append(err)

    threads = [threading.Thread(target=loop, args=(fn,)) for fn in workers]
    extra = [threading.Thread(target=loop, args=(background, True))] if background else []
    for t in threads + extra:
        t.start()
    for t in threads:
        t.join(120)
    done.set()
    for t in extra:
        t.join(120)
    assert not any(t.is_alive() for t in threads + extra), "a worker thread hangs"
    return failures


def yielding(*functions: Callable[..., object]) -> Callable[[], None]:
    """A decorator for a worker: while it runs, the thread yields the GIL after every bytecode
    of ``functions`` (lock-free readers), so writers land inside them again and again."""
    codes = {f.__code__ for f in functions}

    def tracer(frame, event, arg):  # sys.settrace signature
        if frame.f_code in codes:
            frame.f_trace_opcodes = True
            if event == "opcode":
                time.sleep(0)
            return tracer
        return None

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            sys.settrace(tracer)
            try:
                fn()
            finally:
                sys.settrace(None)
        return run

    return wrap  # type: ignore[return-value]


def test_host_maps_readers_never_see_half_a_reload(fast_switching):
    """``HostMaps`` used to store its starts and its ranges in two steps (reload and
    invalidate alike): a reader between them indexed the new starts into the old ranges
    (IndexError, or the rights of another mapping)."""
    maps = hostmem.HostMaps()
    buf = bytearray(4096)
    addr = acl.util.bytes_to_ptr(buf)
    maps.check(addr, 16, write=True)

    def write() -> None:  # free_host's invalidate, then the reload of the next miss
        maps.invalidate()
        maps.check(addr, 16, write=True)

    @yielding(hostmem.HostMaps._covers)
    def read() -> None:
        maps._covers(addr, 16, True)

    assert hammer([read], rounds=1000, background=write) == []


def test_runtime_publishes_its_node_only_after_the_pools(monkeypatch, tmp_path):
    """``ensure_node`` used to publish ``node`` and then build the pinned and staging pools:
    a thread that saw the node (without the lock) used a pool that was still None."""
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path))
    monkeypatch.delenv("NPUEMU_NODE", raising=False)
    built = threading.Event()

    class SlowPool(hostmem.PinnedPool):
        def __init__(self, *args: object) -> None:
            built.set()
            time.sleep(0.2)  # widen the window between publishing and building
            super().__init__(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(runtime, "PinnedPool", SlowPool)
    monkeypatch.setattr(runtime.Node, "embedded", classmethod(lambda cls, config: FakeNode()))
    monkeypatch.setattr(runtime, "_install_exit_hooks", lambda: None)
    rt = runtime.Runtime()
    seen: list[object] = []

    def watch() -> None:
        built.wait(10)
        deadline = time.monotonic() + 10
        while rt.node is None and time.monotonic() < deadline:
            time.sleep(0)
        seen.append(rt.pinned)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        rt.ensure_node()
        watcher.join(20)
        assert seen and seen[0] is not None
    finally:
        rt.shutdown()


def test_find_while_other_threads_free(fake_runtime, fast_switching):
    """``memory.find`` reads the allocation tables without the lock; a free in another
    thread used to shrink them under it (IndexError, an internal exception)."""
    acl.rt.set_device(0)
    keep, ret = acl.rt.malloc(4096, 0)
    assert ret == 0
    rt = fake_runtime
    ctx = rt.current()
    beyond = address.encode(0, address.HBM, 60 << 20)

    def churn() -> None:
        rt.local.ctx = ctx
        ptr = memory.malloc(64)
        memory.free(ptr)

    @yielding(memory.find, *([memory._containing] if hasattr(memory, "_containing") else []))
    def look() -> None:
        assert memory.find(keep + 100, 16).ptr == keep
        with pytest.raises(errors.AclError):  # above every block: the last start is read
            memory.find(beyond, 16)

    assert hammer([look], rounds=80, background=churn) == []


def test_pinned_lookups_while_blocks_come_and_go(fake_runtime, fast_switching):
    """``PinnedPool.find`` walked the block dict while ``malloc_host``/``free_host`` in
    another thread changed it ('dictionary changed size during iteration')."""
    pool = fake_runtime.pinned
    assert pool is not None
    others = [pool.malloc(4096) for _ in range(40)]  # a longer walk: a wider window
    keep = pool.malloc(4096)

    def churn() -> None:
        pool.free(pool.malloc(4096))

    @yielding(hostmem.PinnedPool.find)
    def look() -> None:
        seg = pool.find(keep + 10)
        assert seg is not None and seg.address == keep

    assert hammer([look], rounds=80, background=churn) == []
    for ptr in [*others, keep]:
        pool.free(ptr)


def test_many_threads_submitting_to_one_stream_keep_its_count(fake_runtime):
    """``Stream.submitted`` moves under the link's lock, only after the push succeeded."""
    acl.rt.set_device(0)
    s, ret = acl.rt.create_stream()
    assert ret == 0
    ptr, ret = acl.rt.malloc(64, 0)
    assert ret == 0
    ctx = fake_runtime.current()

    def submit() -> None:
        fake_runtime.local.ctx = ctx
        assert acl.rt.memset_async(ptr, 64, 1, 64, s) == 0
        assert acl.rt.memset_async(ptr, 2**64, 1, 2**64, s) != 0  # refused, not counted

    assert hammer([submit] * 4, rounds=500) == []
    assert stream.resolve(s).submitted == 4 * 500
    assert acl.rt.synchronize_stream_with_timeout(s, 10_000) == 0
