"""Waiting and retrying: the one policy behind every loop that waits for something or tries again.

Each caller states its own deadline (a ``time.monotonic()`` value, or None for none) and what is worth
another try; this module owns how the pauses grow and how a deadline is honoured:

* :func:`poll_until`: ask ``check`` every ``interval`` seconds until it answers (not None) or the deadline
  passes; ``check`` runs once more at the deadline, so a condition met during the last pause is seen.
* :func:`retry`: call, and on an exception the caller calls ``retryable`` try again after the next pause of
  a :class:`Backoff`, within ``attempts`` tries and before ``deadline``; anything else raises as it came.
* :func:`sleep_until`: one pause that never outlasts the deadline, for loops whose step is more than a
  call (waiting for another party's operation, a reconnect).

Which clock measures what (:class:`Clock`): a duration inside one process (a deadline, a run's training time,
how long a learner has not advanced) is measured with the monotonic clock, which never steps. The wall clock
steps (NTP, a laptop's sleep, a resumed VM: a 2-hour forward step once stopped a $5 run at "$200"), yet it is
the only clock two processes share: a stamp another process wrote (progress.json's ``updated``, a heartbeat
file's mtime) is aged with :class:`StampAges`, by the monotonic clock since it was first seen. Code that
decides on time takes a :class:`Clock`, so that a test can step it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["SYSTEM_CLOCK", "Backoff", "Clock", "StampAges", "poll_until", "remaining", "retry", "sleep_until"]

_T = TypeVar("_T")


_WALL, _MONOTONIC = time.time, time.monotonic  # the field named `time` hides the module in the class body


@dataclass(frozen=True)
class Clock:
    """The two clocks a process reads: ``time`` (the wall clock, Unix seconds: shared by processes, but it
    steps) and ``monotonic`` (never steps; meaningful within one process only). Tests give a clock that steps."""

    time: Callable[[], float] = _WALL
    monotonic: Callable[[], float] = _MONOTONIC


#: The system's clocks.
SYSTEM_CLOCK = Clock()


class StampAges:
    """Ages of wall-clock stamps written by another process, measured with this process's monotonic clock.

    A stamp's age is the monotonic time since this process first saw that value: the wall clock only tells a new
    stamp from the last one. A step of the wall clock, forward or back, thus never ages a stamp (a runner's
    report, a heartbeat) by the step: what stops a run or restarts a learner is time that really passed here.
    The price: a stamp is first seen a poll after it was written, and its age (so a stop or a restart) comes
    that much later, never sooner.
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self._seen: dict[str, tuple[float, float]] = {}

    def age(self, key: str, stamp: float) -> float:
        """Seconds since ``stamp`` was first seen in ``key`` (a file, a field); a new value starts afresh."""
        mono = self.clock.monotonic()
        seen = self._seen.get(key)
        if seen is None or seen[0] != stamp:
            seen = self._seen[key] = (stamp, mono)
        return max(0.0, mono - seen[1])


@dataclass(frozen=True)
class Backoff:
    """Pauses between tries: ``initial`` seconds, multiplied by ``factor`` after each, at most ``maximum``."""

    initial: float
    maximum: float
    factor: float = 2.0

    def pauses(self) -> Iterator[float]:
        """The pauses, one per retry, endlessly: initial, initial*factor, ... capped at maximum."""
        pause = self.initial
        while True:
            yield min(pause, self.maximum)
            pause = min(pause * self.factor, self.maximum)


def remaining(deadline: float | None) -> float | None:
    """Seconds left before the ``time.monotonic()`` ``deadline`` (never negative); None when there is none."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def sleep_until(deadline: float | None, seconds: float, *, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Pause ``seconds``, cut short at ``deadline``; False (and no pause) when the deadline has passed."""
    left = remaining(deadline)
    if left is not None and left <= 0:
        return False
    sleep(seconds if left is None else min(seconds, left))
    return True


def poll_until(
    check: Callable[[], _T | None],
    deadline: float | None,
    *,
    interval: float = 0.2,
) -> _T | None:
    """Call ``check`` every ``interval`` seconds until it returns something other than None, or until the
    ``time.monotonic()`` ``deadline`` (None: no deadline) passes; returns that value, or None at the deadline.

    ``check`` runs at least once, and once more at the deadline, so a condition that became true during the
    last sleep is still seen.
    """
    while True:
        result = check()
        if result is not None:
            return result
        if not sleep_until(deadline, interval):
            return None


def retry(
    call: Callable[[], _T],
    *,
    retryable: Callable[[Exception], bool],
    backoff: Backoff,
    attempts: int | None = None,
    deadline: float | None = None,
    on_retry: Callable[[Exception, int, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> _T:
    """``call()``, tried again after each exception ``retryable`` accepts, pausing as ``backoff`` says.

    Gives up, raising the last exception unchanged, when it is not retryable, after ``attempts`` tries (None:
    no limit) or when ``deadline`` (``time.monotonic()``; None: none) leaves no time for another pause.
    ``on_retry(exc, attempt, pause)`` is told before each pause (to log it). At least one of ``attempts``
    and ``deadline`` must be given: a retry without either could go on for ever.
    """
    if attempts is None and deadline is None:
        raise ValueError("retry needs attempts or a deadline")
    pauses = backoff.pauses()
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except Exception as exc:
            if not retryable(exc) or (attempts is not None and attempt >= attempts):
                raise
            pause = next(pauses)
            left = remaining(deadline)
            if left is not None and left <= 0:
                raise
            if on_retry is not None:
                on_retry(exc, attempt, pause)
            sleep(pause if left is None else min(pause, left))
