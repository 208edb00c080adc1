"""The frame field tables of ``shared/protocol.py`` (``REQUEST_FIELDS``, ``TASK_FIELDS``) and
their checks (``check_request``, ``check_task``), and that the card's dispatch and scheduler
agree with them (no processes)."""

from __future__ import annotations

import inspect

import pytest

from npuemu.device import dispatch, scheduler
from npuemu.shared import layout, protocol
from npuemu.shared.kernel import MAX_BLOCKS
from npuemu.shared.protocol import BadFrame, Op, check_request, check_task


def plain(frame: tuple) -> tuple:
    """The frame as the wire gives it: ops are plain ints after msgpack (not ``Op`` members)."""
    return tuple(int(v) if isinstance(v, Op) else v for v in frame)


def test_every_op_has_exactly_one_row():
    assert set(protocol.REQUEST_FIELDS) | set(protocol.TASK_FIELDS) == set(Op)
    assert not set(protocol.REQUEST_FIELDS) & set(protocol.TASK_FIELDS)
    assert set(protocol.TASK_FIELDS) == protocol.TASK_OPS


def test_each_request_handler_takes_the_fields_of_its_row():
    assert set(dispatch.HANDLERS) == set(protocol.REQUEST_FIELDS)
    for op, handler in dispatch.HANDLERS.items():
        params = list(inspect.signature(handler).parameters)[2:]  # after worker, client
        assert len(params) == len(protocol.REQUEST_FIELDS[op]), (Op(op).name, params)


def test_the_scheduler_checks_as_many_task_fields_as_the_table_names():
    for op, fields in protocol.TASK_FIELDS.items():
        assert len(scheduler._TASK_ARGS[op]) == len(fields), Op(op).name


def test_a_request_that_follows_its_row_comes_back_checked():
    assert check_request(plain((Op.MALLOC, 7, 4096, 0))) == (Op.MALLOC, (4096, 0))
    assert check_request(plain((Op.PING, 0))) == (Op.PING, ())
    inject = plain((Op.INJECT, 1, "hang", {"ms": 5}))
    assert check_request(inject) == (Op.INJECT, ("hang", {"ms": 5}))
    assert check_request(plain((Op.COMM_ATTACH, 1, "", 3))) == (Op.COMM_ATTACH, ("", 3))
    steps = ((0, 1, "k", 1, (), (), (), ()),)
    assert check_request(plain((Op.MODEL_LOAD, 1, 0, 1, 1, steps)))[1][3] is steps  # nested: as is


@pytest.mark.parametrize(("frame", "words"), [
    (("malloc", 1, 64, 0), "not an integer"),
    ((999, 1), "not a request"),
    ((Op.COPY_ASYNC, 1, 0, 0, 0), "not a request"),        # a task is not a request
    ((Op.PING, 1, 5), "takes 0 arguments, got 1"),
    ((Op.MALLOC, 1, 64), "takes 2 arguments, got 1"),
    ((Op.MALLOC, -1, 64, 0), "2**64"),                     # the seq itself
    ((Op.MALLOC, 1, "64", 0), "MALLOC size"),
    ((Op.MALLOC, 1, 64, True), "MALLOC policy"),           # a bool is not an integer
    ((Op.FREE, 1, 1 << 64), "FREE ptr"),
    ((Op.PIN, 1, 4096, 64, b"name"), "PIN segment name"),
    ((Op.PIN, 1, 4096, 64, "x" * 256), "at most 255"),
    ((Op.INJECT, 1, "hang", {1: 2}), "INJECT parameters"),
    ((Op.INJECT, 1, "hang", [("ms", 5)]), "INJECT parameters"),
    ((Op.OP_LOAD, 1, b"code", "k"), "OP_LOAD kernel source"),
    ((Op.OP_LOAD, 1, "", "k"), "OP_LOAD kernel source"),
    ((Op.OP_LOAD, 1, "x" * (protocol.OP_SOURCE_MAX + 1), "k"), "OP_LOAD kernel source"),
    ((Op.OP_LOAD, 1, "\udc80", "k"), "UTF-8"),
    ((Op.OP_LOAD, 1, "pass", "k" * (protocol.OP_NAME_MAX + 1)), "OP_LOAD name"),
])
def test_a_request_that_breaks_its_row_names_the_field(frame, words):
    with pytest.raises(BadFrame, match=words.replace("*", r"\*")):
        check_request(plain(frame))


def test_reply_seq_is_zero_unless_field_1_is_a_positive_u64():
    assert protocol.reply_seq((Op.PING, 9)) == 9
    for frame in ((Op.PING,), (Op.PING, 0), (Op.PING, -3), (Op.PING, "9"), (Op.PING, True)):
        assert protocol.reply_seq(frame) == 0


def test_task_frames_follow_their_rows():
    frame = plain((Op.LAUNCH, 0, 2, 17, 5, "add", 4, (1, 2.0)))
    assert check_task(frame) == (Op.LAUNCH, 0, 2, 17, (5, "add", 4, (1, 2.0)))
    assert check_task(plain((Op.COPY_ASYNC, 0, 0, 1, 8, 16, (1 << 63) - 1)))[4][2] == (1 << 63) - 1
    for bad, words in [
        ((Op.COPY_ASYNC, 0, 0, 1, 8, 16, 1 << 63), "COPY_ASYNC count"),
        ((Op.RECORD, 0, 0, 1, layout.MAX_EVENTS, 1), "RECORD event slot"),
        ((Op.LAUNCH, 0, 0, 1, 5, "add", 0, ()), "LAUNCH blocks"),
        ((Op.LAUNCH, 0, 0, 1, 5, "add", MAX_BLOCKS + 1, ()), "LAUNCH blocks"),
        ((Op.CALLBACK, 0, 0, 1, 3, 2), "CALLBACK block"),
        ((Op.CALLBACK, 0, 0, 1, 3), "takes 2 arguments"),
        ((Op.RESET_EVENT, 0, -1, 1, 0), "2"),              # the stream slot
        ((Op.MALLOC, 1, 64, 0), "not a stream task"),
    ]:
        with pytest.raises(BadFrame, match=words):
            check_task(plain(bad))


def test_op_load_args_are_the_utf8_bytes_of_a_checked_source():
    assert protocol.op_load_args("pass\n", "k") == b"pass\n"
    with pytest.raises(BadFrame):
        protocol.op_load_args(b"pass", "k")
