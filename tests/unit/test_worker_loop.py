"""``Worker.run``, the worker's main loop, on a stand-in worker (no processes, no shared
memory): a failing housekeeping pass (heartbeat, client slots, the stop checks) is logged as
an internal error and the loop goes on to its next pass, as a failing serve or pump does;
the worker's own stop passes through."""

from __future__ import annotations

import pytest

from npuemu.device import containment, worker


class _Scheduler:
    def pump(self) -> float:
        return 0.0

    def idle(self) -> bool:
        return False


class _Card:
    """What ``Worker.run`` touches; ``housekeeping`` raises ``failures`` times, then stops
    the loop."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.running = True
        self.scheduler = _Scheduler()
        self.failures = failures
        self.housekept = 0
        self.internal: list[str] = []
        self._contain = worker.Worker._contain.__get__(self)

    def serve(self) -> int:
        return 1

    def housekeeping(self) -> None:
        self.housekept += 1
        if self.failures:
            raise self.failures.pop(0)
        self.running = False

    def internal_error(self, where: str) -> None:
        self.internal.append(where)


def test_a_failing_housekeeping_is_logged_and_the_loop_goes_on(monkeypatch) -> None:
    monkeypatch.setattr(worker, "HOUSEKEEPING_S", -1.0)  # every pass housekeeps
    card = _Card([RuntimeError("bug"), SystemExit(2), KeyboardInterrupt()])
    worker.Worker.run(card)
    assert card.housekept == 4
    assert card.internal == ["housekeeping"] * 3


def test_the_workers_own_stop_passes_the_housekeeping_net(monkeypatch) -> None:
    monkeypatch.setattr(worker, "HOUSEKEEPING_S", -1.0)
    monkeypatch.setattr(containment, "_signalled", True)  # as after the SIGINT handler ran
    card = _Card([KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        worker.Worker.run(card)
    assert card.internal == []
