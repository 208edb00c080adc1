"""How long a waiter spins before it sleeps, learnt from the waits it saw.

Both ends of a link wait for the other: the host for a completion (``host/driver/link.py``
``wait_until``), the card's loop for the next frame (``device/worker.py``). Spinning
(``sched_yield`` between checks) answers within a microsecond or two but burns a core;
sleeping on a semaphore costs the waker a post and the sleeper a wake-up of several
microseconds. ``AdaptiveSpin`` keeps a spin budget between ``low`` and ``high`` seconds:

- a wait that ended within the spin says nothing new (the budget stays);
- a wait that had to sleep but ended within ``high`` of its start would have been caught
  by a longer spin: the budget doubles (up to ``high``);
- a wait that slept and lasted longer than ``high`` wasted its spin: the budget halves
  (down to ``low``).

So short, regular waits (a tiny kernel's synchronize, a host's next task) are spun
through, and long ones (a big kernel, an idle host) cost at most ``low`` of spinning.

Threading model: no lock. ``budget`` is one float, read and written by whichever thread
waits; two threads learning at once may lose one update, which only delays the
adaptation by one wait.
"""

from __future__ import annotations


class AdaptiveSpin:
    """A spin budget in seconds, in ``[low, high]``; starts at ``high``."""

    __slots__ = ("budget", "high", "low")

    def __init__(self, low: float, high: float) -> None:
        if not 0 < low <= high:
            raise ValueError(f"spin bounds {low}, {high}: need 0 < low <= high")
        self.low, self.high, self.budget = low, high, high

    def learn(self, waited_s: float, slept: bool) -> None:
        """One wait ended after ``waited_s`` seconds; ``slept``: it went to sleep."""
        if not slept:
            return
        if waited_s <= self.high:
            self.budget = min(self.high, self.budget * 2)
        else:
            self.budget = max(self.low, self.budget / 2)
