"""Host logic of stream capture (``host/core/capture.py``, ``model_ri.py``) on the fake link:
what a capture records and sends (the ``MODEL_LOAD`` rows), that a recording stream and a
persistent stream send no task, the capture-mode rule per thread, the frame split of a large
list, and the codes of misuse. What the card does with the list is tested in
``tests/integration/test_capture.py``."""

from __future__ import annotations

import threading

import pytest

from npuemu.device.exec import graph
from npuemu.host import acl
from npuemu.host.core import capture, model_ri
from npuemu.host.core import stream as streams
from npuemu.host.driver import fake
from npuemu.shared import errors
from npuemu.shared.protocol import BadFrame, Op

GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2


@pytest.fixture
def loads(fake_runtime, monkeypatch) -> list[tuple]:
    """The MODEL_LOAD frames the fake card gets (it answers task list id 7)."""
    got: list[tuple] = []

    def model_load(link, mid, n_in, n_out, steps):
        got.append((mid, n_in, n_out, steps))
        return (7,)

    monkeypatch.setitem(fake._HANDLERS, Op.MODEL_LOAD, model_load)
    monkeypatch.setitem(fake._HANDLERS, Op.MODEL_UNLOAD, lambda link, mid: ())
    monkeypatch.setitem(fake._TASKS, Op.MODEL_EXECUTE, lambda link, slot, task, *args: None)
    assert acl.rt.set_device(0) == 0
    return got


def code(fn, *args) -> int:
    try:
        fn(*args)
    except errors.AclError as err:
        return err.code
    return 0


def sent_tasks(s: streams.Stream) -> list[int]:
    return [r[0] for r in s.link.requests if r[0] >= Op.COPY_ASYNC and r[1] == s.slot]


def test_a_capture_sends_nothing_then_its_rows_once(loads):
    s = streams.create_stream()
    e = streams.create_event()
    capture.capture_begin(s.handle, GLOBAL)
    streams.submit(s, Op.LAUNCH, 3, "k", 2, [1, 2.5])
    streams.submit(s, Op.MEMSET_ASYNC, 0x100, 7, 64)
    streams.record_event(e.handle, s.handle)
    assert sent_tasks(s) == [] and s.submitted == 0
    ri = capture.capture_end(s.handle)
    # the event's last record is a record step of its slot, its generation input 0
    assert loads == [(0, 1, 0, [[0, 3, "k", 2, [1, 2.5], [], [], []],
                                [0, Op.MEMSET_ASYNC, [0x100, 7, 64], [], []],
                                [0, Op.RECORD, [e.slot, 0, 0], [], [1]]])]
    assert capture.get(ri).card_id == 7 and s.recorder is None and e.capture is None
    for gen in (1, 2):  # one replay task each, carrying the event's next generation
        model_ri.execute_async(ri, s.handle)
        assert sent_tasks(s) == [Op.MODEL_EXECUTE] * gen and e.gen == gen
        assert s.link.requests[-1][3:] == (7, [gen], [])  # model id, inputs, outputs


def test_persistent_streams_send_no_task(loads):
    for flag in (0x4, 0x10, 0x20):
        s = streams.create_stream(0, flag)
        streams.submit(s, Op.MEMSET_ASYNC, 0x100, 7, 64)
        streams.record_event(streams.create_event().handle, s.handle)
        streams.synchronize_stream(s.handle)
        assert sent_tasks(s) == [] and streams.stream_query(s.handle) == 0


def test_the_capture_modes_forbid_the_threads_the_rule_names(loads):
    s = streams.create_stream()
    seen: dict[str, list[int]] = {}

    def other() -> int:
        out: list[int] = []
        t = threading.Thread(target=lambda: out.append(code(capture.check_mode, "memcpy")))
        t.start()
        t.join()
        return out[0]

    for name, mode in (("global", GLOBAL), ("thread_local", THREAD_LOCAL),
                       ("relaxed", RELAXED)):
        capture.capture_begin(s.handle, mode)
        seen[name] = [code(capture.check_mode, "memcpy"), other()]
        assert capture.thread_exchange_mode(RELAXED) == GLOBAL
        seen[name].append(code(capture.check_mode, "memcpy"))
        capture.thread_exchange_mode(THREAD_LOCAL)
        seen[name].append(code(capture.check_mode, "memcpy"))
        capture.thread_exchange_mode(GLOBAL)
        model_ri.destroy(capture.capture_end(s.handle))
    forbid = errors.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
    # [this thread, another thread, this thread RELAXED, this thread THREAD_LOCAL]
    assert seen == {"global": [forbid, forbid, 0, forbid],
                    "thread_local": [forbid, 0, 0, forbid],
                    "relaxed": [0, 0, 0, 0]}
    assert code(capture.check_mode, "memcpy") == 0  # no capture left


def test_misuse_gets_the_capture_codes(loads):
    s, s2 = streams.create_stream(), streams.create_stream()
    assert code(capture.capture_end, s.handle) == errors.ACL_ERROR_RT_STREAM_NOT_CAPTURED
    assert code(capture.capture_begin, 0, GLOBAL) == errors.ACL_ERROR_INVALID_PARAM
    assert code(capture.capture_begin, s.handle, 3) == errors.ACL_ERROR_RT_PARAM_INVALID
    p = streams.create_stream(0, 0x4)
    assert code(capture.capture_begin, p.handle, GLOBAL) == errors.ACL_ERROR_RT_PARAM_INVALID
    capture.capture_begin(s.handle, GLOBAL)
    assert code(capture.capture_begin, s.handle, GLOBAL) == errors.ACL_ERROR_RT_STREAM_CAPTURED
    e = streams.create_event()
    streams.record_event(e.handle, s.handle)
    streams.stream_wait_event(s2.handle, e.handle)  # s2 joins
    assert capture.capture_get_info(s2.handle)[0] == 1
    assert code(capture.capture_end, s2.handle) == errors.ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED
    ri = capture.capture_get_info(s.handle)[1]
    assert code(model_ri.destroy, ri) == errors.ACL_ERROR_RT_MODEL_CAPTURED
    assert code(model_ri.execute_async, ri, s2.handle) == errors.ACL_ERROR_RT_PARAM_INVALID
    assert code(capture.capture_end, s.handle) == errors.ACL_ERROR_RT_STREAM_UNJOINED
    assert s.recorder is None and s2.recorder is None and loads == []


def test_a_large_list_goes_in_frames_that_fit(loads, monkeypatch):
    monkeypatch.setattr(capture, "_CHUNK_BYTES", 2000)
    s = streams.create_stream()
    capture.capture_begin(s.handle, GLOBAL)
    for i in range(200):
        streams.submit(s, Op.COPY_ASYNC, 0x1000 + i, 0x2000, 64)
    capture.capture_end(s.handle)
    assert len(loads) > 1 and loads[0][0] == 0 and all(f[0] == 7 for f in loads[1:])
    rows = [row for frame in loads for row in frame[3]]
    assert [row[2][0] for row in rows] == [0x1000 + i for i in range(200)]


def test_the_card_checks_the_callback_and_event_record_steps_of_a_captured_list():
    def step(op: int, args: list[int], n_inputs: int = 1) -> tuple[object, ...]:
        return graph.memory_step(None, None, (0, op, args, (), (1,)), n_inputs)  # type: ignore[arg-type]

    for op, args in ((Op.RECORD, [3, 1, 0]), (Op.RECORD, [1 << 20, 0, 0]),
                     (Op.RECORD, [3, 0, 5]), (Op.CALLBACK, [9, 2, 0]), (Op.LAUNCH, [0, 0, 0]),
                     (Op.CALLBACK, [9, 1])):
        with pytest.raises(BadFrame):
            step(int(op), args)
    record = step(int(Op.RECORD), [3, 0, 0])
    assert isinstance(record[0], graph.RecordStep) and record[3:5] == ((3, 0, 0), ((1, 0, 0),))
    assert isinstance(step(int(Op.CALLBACK), [9, 1, 4])[0], graph.CallbackStep)
