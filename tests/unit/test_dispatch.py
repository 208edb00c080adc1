"""How ``device/dispatch.py`` answers each kind of exception (no processes: a stub worker and
client record what the dispatcher does; the real-worker tests are in
tests/integration/test_worker_robust.py)."""

from __future__ import annotations

import errno

import pytest

from npuemu.device import dispatch
from npuemu.shared import errors, layout, protocol
from npuemu.shared.protocol import Op


class StubClient:
    slot = 0

    def __init__(self) -> None:
        self.replies: list[tuple] = []

    def reply(self, frame: tuple) -> None:
        self.replies.append(frame)


class StubMemory:
    def malloc(self, client: int, size: int, policy: int) -> tuple[int, int, int]:
        return (1 << 44, size, 0)

    def free(self, client: int, ptr: int) -> int:
        return 64


class StubWorker:
    dev = 0
    debug = False
    memory = StubMemory()

    def __init__(self) -> None:
        self.ctl = [0] * layout.DEVICE_CTL_SIZE
        self.lines: list[tuple[str, str]] = []
        self.internal: list[str] = []

    def log(self, level: str, message: str, module: str = "TS") -> None:
        self.lines.append((level, message))

    def internal_error(self, where: str) -> None:
        self.internal.append(where)


def run(frame: list, handler=None) -> tuple[StubWorker, StubClient]:
    worker, client = StubWorker(), StubClient()
    if handler is not None:
        saved = dispatch.HANDLERS[Op.PING]
        dispatch.HANDLERS[Op.PING] = handler
    try:
        dispatch.handle(worker, client, protocol.pack(frame))
    finally:
        if handler is not None:
            dispatch.HANDLERS[Op.PING] = saved
    return worker, client


def bad_frames(worker: StubWorker) -> int:
    return worker.ctl[layout.DEVICE_CTL.BAD_FRAMES]


@pytest.mark.parametrize("frame", [
    [Op.PING, 5, "extra"],            # wrong arity
    [Op.MALLOC, 5, "64", 0],          # wrong type
    [Op.MALLOC, 5, -64, 0],           # negative
    [Op.FREE, 5, 2**64],              # beyond u64 (msgpack cannot even carry it: see below)
    [1000, 5],                        # unknown op
    ["ping", 5],                      # op of the wrong type
])
def test_malformed_frames_are_counted_and_answered_with_107000(frame):
    if frame[-1] == 2**64:
        frame = [Op.FREE, 5, "x" * 3]
    worker, client = run(frame)
    assert bad_frames(worker) == 1
    assert [r[:2] for r in client.replies] == [(5, errors.ACL_ERROR_RT_PARAM_INVALID)]
    assert not worker.internal


def test_a_bug_inside_a_handler_is_an_internal_error_not_a_malformed_frame():
    def buggy(worker, client):
        return None + 1  # TypeError raised by our own code

    worker, client = run([Op.PING, 9], buggy)
    assert bad_frames(worker) == 0
    assert [r[:2] for r in client.replies] == [(9, errors.ACL_ERROR_RT_INTERNAL_ERROR)]
    assert worker.internal  # logged with its traceback by Worker.internal_error


def test_acl_errors_keep_their_code():
    def refuses(worker, client):
        raise errors.error_for(errors.ACL_ERROR_RT_MEMORY_ALLOCATION, "full")

    worker, client = run([Op.PING, 3], refuses)
    assert client.replies == [(3, errors.ACL_ERROR_RT_MEMORY_ALLOCATION, "full")]
    assert bad_frames(worker) == 0 and not worker.internal


@pytest.mark.parametrize(("exc", "code"), [
    (FileNotFoundError("shared memory /npuemu.x.p1.b2: gone"), errors.ACL_ERROR_RT_PARAM_INVALID),
    (OSError(errno.ENOSPC, "no space"), errors.ACL_ERROR_RT_MEMORY_ALLOCATION),
    (OSError(errno.EIO, "io"), errors.ACL_ERROR_RT_DRV_INTERNAL_ERROR),
])
def test_os_errors_on_shared_memory_get_their_code(exc, code):
    def fails(worker, client):
        raise exc

    worker, client = run([Op.PING, 4], fails)
    assert [r[:2] for r in client.replies] == [(4, code)]
    assert bad_frames(worker) == 0 and not worker.internal


def test_frames_without_seq_are_never_answered():
    worker, client = run([Op.MALLOC, 0, "x", 0])
    assert client.replies == [] and bad_frames(worker) == 1
