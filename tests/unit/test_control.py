"""Control messages, segment ownership checks and dead-node cleaning (no node processes)."""

from __future__ import annotations

import os
import secrets
import socket
import struct

import msgpack
import pytest

from npuemu.shared import control, shm


def _frame(obj: object) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("msg", [
    ("hello", 1, True), ("hello", 1, 0), ("attach", 0), ("detach", 3, 7), ("stop",),
    ("stop", True)])
def test_valid_requests_pass(msg):
    assert control.Reader().feed(_frame(list(msg))) == [msg]


@pytest.mark.parametrize("raw", [
    b"\x01\x00\x00\x00\xc1",                   # the 5-byte message that killed the supervisor
    _frame(5), _frame("stop"), _frame({"stop": 1}), _frame([]), _frame([b"stop"]),
    _frame(["attach"]), _frame(["attach", "0"]), _frame(["attach", -1]),
    _frame(["attach", 1 << 40]), _frame(["attach", True]), _frame(["attach", 0.0]),
    _frame(["attach", 0, 1]), _frame(["detach", 0]), _frame(["hello", [1], True]),
    _frame(["hello", 1, "yes"]), _frame(["stop", 1, 2]), _frame(["nope"]),
    _frame([[["x"]]]), struct.pack("<I", control.MAX_MESSAGE + 1) + b"x",
    struct.pack("<I", 3) + b"\x93\xc1\xc1",
])
def test_malformed_requests_raise_bad_message(raw):
    with pytest.raises(control.BadMessage):
        control.Reader().feed(raw)


def test_random_bytes_never_raise_anything_but_bad_message():
    rng = __import__("random").Random(9)
    for _ in range(2000):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        raw = struct.pack("<I", len(body)) + body
        try:
            out = control.Reader().feed(raw)
        except control.BadMessage:
            continue
        assert all(m[0] in control.SCHEMA for m in out)


def test_a_partial_message_waits_for_the_rest():
    reader = control.Reader()
    raw = _frame(["attach", 2])
    assert reader.feed(raw[:3]) == [] and reader.feed(raw[3:]) == [("attach", 2)]


def test_peer_cred_is_the_kernels():
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert control.peer_cred(a) == (os.getpid(), os.geteuid(), os.getegid())


def _node() -> str:
    return f"ut{secrets.token_hex(4)}"


def test_segment_open_refuses_a_name_open_to_others():
    node = _node()
    seg = shm.Segment(shm.name(node, "x"), 4096, create=True)
    try:
        assert shm.Segment(seg.name).close() is None  # 0600, ours: fine
        os.fchmod(seg.fd, 0o644)
        with pytest.raises(PermissionError, match="mode 644"):
            shm.Segment(seg.name)
    finally:
        seg.unlink()
        seg.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another uid")
def test_segment_and_semaphore_open_refuse_another_owner():
    node = _node()
    seg = shm.Segment(shm.name(node, "x"), 4096, create=True)
    sem = shm.semaphore(shm.name(node, "s"), create=True)
    try:
        os.fchown(seg.fd, 61234, 61234)
        with pytest.raises(PermissionError, match="uid 61234"):
            shm.Segment(seg.name)
        os.chown(f"{shm.SHM_DIR}/sem.{shm.name(node, 's')[1:]}", 61234, 61234)
        with pytest.raises(PermissionError, match="uid 61234"):
            shm.semaphore(shm.name(node, "s"))
    finally:
        sem.close()
        shm.unlink_all(node)
        seg.close()


def test_pinned_names_are_unguessable():
    names = {shm.pinned_name("n", 42) for _ in range(100)}
    assert len(names) == 100
    assert all(n.startswith("/npuemu.n.p42.") and len(n.rsplit(".", 1)[1]) == 16 for n in names)


@pytest.mark.alone  # a clean_dead elsewhere would remove the staged names first
def test_clean_dead_removes_only_unheld_names_of_dead_nodes():
    dead, live = _node(), _node()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(control.address(live))
    listener.listen(1)
    held = shm.Segment(shm.name(dead, "held"), 4096, create=True)
    try:
        for node in (dead, live):
            shm.Segment(shm.name(node, "a"), 4096, create=True).close()
            shm.semaphore(shm.name(node, "b"), create=True).close()
        removed = shm.clean_dead()
        assert removed.get(dead) == 2 and live not in removed
        assert shm.leftovers(dead) == [f"npuemu.{dead}.held"]
        assert len(shm.leftovers(live)) == 2
    finally:
        listener.close()
        held.unlink()
        held.close()
        shm.unlink_all(live)
        shm.unlink_all(dead)
