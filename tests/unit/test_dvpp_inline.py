"""Which VPC tasks run in the card's loop thread (``device/exec/dvpp.py`` ``INLINE_VPC_NS``):
one whose last run of the same geometry and parameters was short, while the DVPP engine has
no task and the client's execution timeout leaves room; everything else on the engine."""

from __future__ import annotations

import ctypes
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


def _kept_entry(worker, client):
    """A kept VPC task of one record (a ctypes array of its words, as the card reads it)."""
    record = dvpp._RECORD(0x1000, 4096, m.NV12, 64, 32, 64, 32, 0)
    pic = Picture(record, m.NV12, 64, 32, 64, 32, 4096, addr=0x1000)
    words = ctypes.string_at(ctypes.addressof(record), dvpp._CHECKED_BYTES)
    dvpp._prepared[((7,), (0, 0, 1))] = dvpp._Prepared(worker, client, worker.alloc_changes,
                                                       [pic], [words], print, ("key",))
    return record


def test_a_kept_vpc_task_holds_only_while_its_records_and_the_allocations_do():
    worker, client = SimpleNamespace(alloc_changes=3), SimpleNamespace()
    dvpp._prepared.clear()
    record = _kept_entry(worker, client)
    assert dvpp._kept(worker, client, [7], [0, 0, 1])[1:] == (print, ("key",))
    assert dvpp._kept(worker, client, [7], [0, 1, 1]) is None  # other parameters
    assert dvpp._kept(worker, SimpleNamespace(), [7], [0, 0, 1]) is None  # another client
    record[m.PIC_DESC.RET_CODE] = 5  # the card's own word: not part of the checks
    assert dvpp._kept(worker, client, [7], [0, 0, 1]) is not None
    record[m.PIC_DESC.WIDTH] = 32  # an earlier task or the host rewrote the picture
    assert dvpp._kept(worker, client, [7], [0, 0, 1]) is None
    record[m.PIC_DESC.WIDTH] = 64
    worker.alloc_changes += 1  # a malloc, free, mapping or unpin since
    assert dvpp._kept(worker, client, [7], [0, 0, 1]) is None
    dvpp._prepared.clear()
