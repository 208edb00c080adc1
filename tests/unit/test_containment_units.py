"""``device/containment.py`` and the nets under it, in this process: ``user_code`` turns a
BaseException that is not an Exception into ``UserExit`` (and leaves the rest alone), a real
engine thread outlives task bodies that raise ``SystemExit`` & co. (collectives and copies run
no user code, so the real-worker tests cannot make them raise one), and the dispatcher
answers such a handler with 507000 instead of stopping. Kernels, models and collectives
through real workers: tests/integration/test_containment.py."""

from __future__ import annotations

import collections
import threading

import pytest

from npuemu.device import containment, engines
from npuemu.shared import errors
from npuemu.shared.protocol import Op
from tests.unit.test_dispatch import run as dispatch_run

BASE = [SystemExit(3), KeyboardInterrupt(), GeneratorExit(),
        BaseExceptionGroup("group", [SystemExit()])]


@pytest.mark.parametrize("exc", BASE, ids=lambda e: type(e).__name__)
def test_user_code_turns_a_base_exception_into_user_exit(exc):
    with pytest.raises(containment.UserExit) as caught, containment.user_code:
        raise exc
    assert caught.value.__cause__ is exc
    assert type(exc).__name__ in str(caught.value)


def test_user_code_leaves_exceptions_and_success_alone():
    err = ValueError("kernel bug")
    with pytest.raises(ValueError) as caught, containment.user_code:
        raise err
    assert caught.value is err
    with containment.user_code:
        value = 1
    assert value == 1
    assert not containment.is_stop(KeyboardInterrupt())  # no SIGINT handler has run here


class _Task:
    engine = ""


@pytest.mark.parametrize("name", engines.ENGINES)
def test_an_engine_thread_outlives_every_base_exception(name):
    done: collections.deque = collections.deque()
    wake = threading.Semaphore(0)
    engine = engines.Engine(name, done, wake.release)
    try:
        tasks = []
        for exc in BASE:
            def fail(_task, exc=exc):
                raise exc
            tasks.append(_Task())
            engine.submit(tasks[-1], fail)
        tasks.append(_Task())
        engine.submit(tasks[-1], lambda _task: 0)
        for _ in tasks:
            assert wake.acquire(timeout=10)
        assert [(t, code) for t, code, _ns in done] == \
            [(t, engines.FAILURE_CODE[name]) for t in tasks[:-1]] + [(tasks[-1], 0)]
    finally:
        engine.stop()


@pytest.mark.parametrize("exc", BASE, ids=lambda e: type(e).__name__)
def test_a_handler_raising_a_base_exception_is_an_internal_error(exc):
    def leaves(worker, client):
        raise exc

    worker, client = dispatch_run([Op.PING, 7], leaves)
    assert [r[:2] for r in client.replies] == [(7, errors.ACL_ERROR_RT_INTERNAL_ERROR)]
    assert worker.internal
