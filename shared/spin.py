"""How long a waiter spins before it sleeps, learnt from the waits it saw.

The card's loop waits for the next frame (``device/worker.py``). Spinning
(``sched_yield`` between checks) answers within a microsecond or two but burns a core;
sleeping on a semaphore costs the waker a post and the sleeper a wake-up of several
microseconds. ``AdaptiveSpin`` keeps a spin budget between ``low`` and ``high`` seconds:

- a wait that ended within the spin says nothing new (the budget stays);
- a wait that had to sleep but ended within ``long_s`` of its start might have been caught
  by a longer spin: the budget doubles (up to ``high``);
- a wait that slept and lasted longer than ``long_s`` (the other side had nothing to do)
  wasted its spin: the budget halves (down to ``low``).

``long_s`` is far above ``high`` on purpose: a wait that slept includes the wake-up
latency the sleep added, which on a loaded machine reaches milliseconds; judged against
``high`` such waits would keep the spin short and every later wait asleep. So regular
traffic (a host's next task) is spun through, and a side that goes quiet for longer than
``long_s`` costs at most ``low`` of spinning per wake-up.

Threading model: no lock. ``budget`` is one float, read and written by whichever thread
waits; two threads learning at once may lose one update, which only delays the
adaptation by one wait.
"""

from __future__ import annotations


class AdaptiveSpin:
    """A spin budget in seconds, in ``[low, high]``; starts at ``high``. A slept wait
    longer than ``long_s`` (default ``high``) shortens it."""

    __slots__ = ("budget", "high", "long_s", "low")

    def __init__(self, low: float, high: float, long_s: float | None = None) -> None:
        if not 0 < low <= high:
            raise ValueError(f"spin bounds {low}, {high}: need 0 < low <= high")
        self.low, self.high, self.budget = low, high, high
        self.long_s = high if long_s is None else long_s

    def learn(self, waited_s: float, slept: bool) -> None:
        """One wait ended after ``waited_s`` seconds; ``slept``: it went to sleep."""
        if not slept:
            return
        if waited_s <= self.long_s:
            self.budget = min(self.high, self.budget * 2)
        else:
            self.budget = max(self.low, self.budget / 2)
