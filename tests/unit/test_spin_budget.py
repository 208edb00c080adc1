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


def test_loop_cpu_splits_the_thread_clock_by_the_passes_wall_time(monkeypatch) -> None:
    """The thread's CPU clock is read only at settle; what it advanced is split between work
    and idle as the working passes' wall time is to the time awake; a sleep (pause to the
    next begin) counts nowhere."""
    wall = iter(range(10, 10_000, 10))  # each read of the wall clock: 10 ns later
    cpu_reads = iter([0, 600, 900])
    monkeypatch.setattr(loopcpu, "_wall", lambda: next(wall))
    monkeypatch.setattr(loopcpu, "_clock", lambda: next(cpu_reads))
    cpu = loopcpu.LoopCpu()  # wall 10
    cpu.begin()  # wall 20: awake 10
    cpu.end(True)  # wall 30: a working pass of 10
    cpu.begin()  # wall 40
    cpu.end(False)  # wall 50: an idle pass of 10
    cpu.pause()  # wall 60: asleep from here
    cpu.begin()  # wall 70: the 10 ns asleep count nowhere
    cpu.end(True)  # wall 80: work 20 of 60 awake
    assert (cpu.work_ns, cpu.idle_ns) == (0, 0)  # nothing read yet
    cpu.settle()  # wall 90 (awake 70), CPU 600: 600 * 20 // 70 is work
    assert (cpu.work_ns, cpu.idle_ns) == (171, 429)
    cpu.settle()  # wall 100: 10 ns awake, no work: the next 300 ns of CPU are idle
    assert (cpu.work_ns, cpu.idle_ns) == (171, 729)


def test_waits_within_long_s_keep_the_spin_even_past_its_ceiling() -> None:
    spin = AdaptiveSpin(50e-6, 1e-3, long_s=20e-3)
    spin.learn(5e-3, slept=True)  # slept 5 ms: wake-up latency, not a quiet host
    assert spin.budget == pytest.approx(1e-3)
    spin.learn(30e-3, slept=True)  # the host went quiet
    assert spin.budget == pytest.approx(0.5e-3)
    spin.learn(5e-3, slept=True)
    assert spin.budget == pytest.approx(1e-3)
