# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deadlines and capped, jittered backoff: the one way this collection waits over HTTP.

Why: every platform here (Vultr, iDRAC, Kubernetes) has slow transitions. A wait must have one
deadline, must notice the target state soon after it happens, must not hammer an API that rate
limits (Vultr: 30 req/s; iDRAC8: a handful of sessions), and must say on timeout what it saw last.
Clock and sleep are injectable so planners and waits are unit-tested without real time passing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .errors import WaitTimeout

T = TypeVar("T")

Clock = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass
class Deadline:
    """A point in time after which a wait gives up (monotonic clock)."""

    seconds: float
    clock: Clock = time.monotonic
    _end: float = field(init=False)

    def __post_init__(self) -> None:
        self._end = self.clock() + self.seconds

    def remaining(self) -> float:
        return max(0.0, self._end - self.clock())

    def expired(self) -> bool:
        return self.clock() >= self._end


@dataclass(frozen=True)
class Backoff:
    """Delays between polls: ``initial``, growing by ``factor`` up to ``cap``, each +/- ``jitter``.

    ``floor`` is a hard minimum after jitter, so a poll loop never runs faster than that
    whatever the jitter draws (Vultr waits keep it at 2 s).
    """

    initial: float = 2.0
    cap: float = 10.0
    factor: float = 1.5
    jitter: float = 0.1
    floor: float = 0.0

    def delays(self, rng: Callable[[], float] = random.random) -> Iterator[float]:
        delay = self.initial
        while True:
            spread = delay * self.jitter
            yield max(self.floor, delay - spread + 2 * spread * rng())
            delay = min(self.cap, delay * self.factor)


@dataclass
class Poll(Generic[T]):
    """Outcome of one observation: ``done`` ends the wait, ``value`` is what was seen."""

    done: bool
    value: T


def wait_for(
    observe: Callable[[], Poll[T]],
    *,
    timeout: float,
    what: str,
    backoff: Backoff | None = None,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    retry_after: Callable[[], float | None] | None = None,
) -> T:
    """Poll ``observe`` until it reports ``done`` or ``timeout`` seconds pass.

    ``what`` describes the awaited state for the timeout message ("cluster 'x' to be active").
    ``retry_after`` may return a server-requested delay that overrides the backoff for one sleep.
    The last sleep is shortened to the deadline so the final observation happens on time.
    Raises ``WaitTimeout`` with the last observed value.
    """
    deadline = Deadline(timeout, clock=clock)
    delays = (backoff or Backoff()).delays()
    while True:
        poll = observe()
        if poll.done:
            return poll.value
        if deadline.expired():
            raise WaitTimeout(
                f"Timed out after {timeout:g}s waiting for {what}; last seen: {poll.value!r}",
                last_seen=poll.value,
            )
        requested = retry_after() if retry_after else None
        delay = requested if requested is not None else next(delays)
        sleep(min(delay, deadline.remaining()))
