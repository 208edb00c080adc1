"""Which VPC tasks run in the card's loop thread (``device/exec/dvpp.py`` ``INLINE_VPC_NS``):
one whose last run of the same geometry and parameters was short, while the DVPP engine has
no task and the client's execution timeout leaves room; everything else on the engine."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from npuemu.device import engines
from npuemu.device.exec import dvpp
from npuemu.device.exec.pictures import Picture
from npuemu.shared import media as m


@pytest.fixture(autouse=True)
def _no_costs():
    saved = dict(dvpp._costs)
    dvpp._costs.clear()
    yield
    dvpp._costs.clear()
    dvpp._costs.update(saved)


def card(running: int = 0) -> SimpleNamespace:
    engine = SimpleNamespace(running=running, inline_ns=0)
    return SimpleNamespace(scheduler=SimpleNamespace(engines={engines.DVPP: engine}))


def key(width: int = 1920, height: int = 1080, params: tuple[int, ...] = (0, 0, 1)):
    pics = [Picture(None, m.NV12, width, height, width, height, 0),
            Picture(None, m.NV12, 224, 224, 224, 224, 0)]
    return dvpp._cost_key(pics, params)


def test_a_first_or_long_run_goes_to_the_engine_a_short_one_runs_here():
    worker, client = card(), SimpleNamespace(op_timeout_s=0.0)
    assert not dvpp._runs_here(worker, client, key())  # never measured
    dvpp._learn(worker, key(), dvpp.INLINE_VPC_NS + 1, False)
    assert not dvpp._runs_here(worker, client, key())
    dvpp._learn(worker, key(), 200_000, False)
    assert dvpp._runs_here(worker, client, key())
    assert not dvpp._runs_here(worker, client, key(width=1280))  # another geometry
    assert not dvpp._runs_here(worker, client, key(params=(0, 1, 1)))  # nearest
    assert worker.scheduler.engines[engines.DVPP].inline_ns == 0
    dvpp._learn(worker, key(), 150_000, True)  # a run here is the engine's busy time
    assert worker.scheduler.engines[engines.DVPP].inline_ns == 150_000


def test_not_while_the_engine_has_a_task_nor_under_a_short_timeout():
    dvpp._learn(card(), key(), 200_000, False)
    assert not dvpp._runs_here(card(running=1), SimpleNamespace(op_timeout_s=0.0), key())
    assert not dvpp._runs_here(card(), SimpleNamespace(op_timeout_s=0.005), key())
    assert dvpp._runs_here(card(), SimpleNamespace(op_timeout_s=0.5), key())


def test_the_table_of_costs_stays_bounded():
    worker = card()
    for width in range(dvpp._COSTS_MAX + 10):
        dvpp._learn(worker, key(width=width + 16), 1000, False)
    assert len(dvpp._costs) <= dvpp._COSTS_MAX
