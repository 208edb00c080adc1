"""The spin budget both ends of a link learn (``shared/spin.py``) and the loop's CPU split
(``device/loopcpu.py``). No clocks are compared with thresholds: waits are given as
numbers, and the CPU split is checked for what it must add up to."""

from __future__ import annotations

import pytest

from npuemu.device import loopcpu
from npuemu.shared.spin import AdaptiveSpin


def test_long_waits_shorten_the_spin_down_to_its_floor() -> None:
    spin = AdaptiveSpin(10e-6, 80e-6)
    assert spin.budget == 80e-6
    for expected in (40e-6, 20e-6, 10e-6, 10e-6):
        spin.learn(5e-3, slept=True)
        assert spin.budget == pytest.approx(expected)


def test_short_waits_that_slept_lengthen_it_up_to_its_ceiling() -> None:
    spin = AdaptiveSpin(10e-6, 80e-6)
    for _ in range(3):
        spin.learn(1.0, slept=True)
    assert spin.budget == pytest.approx(10e-6)
    for expected in (20e-6, 40e-6, 80e-6, 80e-6):
        spin.learn(60e-6, slept=True)
        assert spin.budget == pytest.approx(expected)


def test_a_wait_caught_while_spinning_changes_nothing() -> None:
    spin = AdaptiveSpin(10e-6, 80e-6)
    spin.learn(1.0, slept=True)
    spin.learn(1e-6, slept=False)
    spin.learn(1.0, slept=False)
    assert spin.budget == pytest.approx(40e-6)


@pytest.mark.parametrize("low, high", [(0.0, 1.0), (2.0, 1.0), (-1.0, 1.0)])
def test_bounds_must_be_ordered_and_positive(low: float, high: float) -> None:
    with pytest.raises(ValueError):
        AdaptiveSpin(low, high)


def test_loop_cpu_charges_each_pass_to_its_kind(monkeypatch) -> None:
    clock = iter(range(0, 10_000, 10))  # each read of the thread clock: 10 ns later
    monkeypatch.setattr(loopcpu, "_clock", lambda: next(clock))
    cpu = loopcpu.LoopCpu()  # read 0
    cpu.begin()  # read 10: 10 ns idle before the first pass
    cpu.end(True)  # read 20: the pass worked, 10 ns
    cpu.begin()  # after a working pass: no read
    cpu.end(True)  # read 30: 10 ns more work
    cpu.begin()
    cpu.end(False)  # an idle pass: no read yet
    cpu.begin()  # read 40: the idle pass, 10 ns
    cpu.end(False)
    cpu.begin()  # read 50
    cpu.end(True)  # read 60
    assert (cpu.work_ns, cpu.idle_ns) == (30, 30)


def test_waits_within_long_s_keep_the_spin_even_past_its_ceiling() -> None:
    spin = AdaptiveSpin(50e-6, 1e-3, long_s=20e-3)
    spin.learn(5e-3, slept=True)  # slept 5 ms: wake-up latency, not a quiet host
    assert spin.budget == pytest.approx(1e-3)
    spin.learn(30e-3, slept=True)  # the host went quiet
    assert spin.budget == pytest.approx(0.5e-3)
    spin.learn(5e-3, slept=True)
    assert spin.budget == pytest.approx(1e-3)
