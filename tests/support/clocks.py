"""A clock for tests whose wall time steps (NTP, a laptop's sleep, a resumed VM) while its monotonic time runs on.

Code that decides on time takes a :class:`rlcloud.waiting.Clock`; a test gives it :attr:`SteppingClock.clock` and
steps the wall time with :meth:`SteppingClock.step`. The clock counts its reads, so that a test waits for the
code under test to have looked at the time again (an observable event), never for a number of seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rlcloud.waiting import Clock, poll_until


class SteppingClock:
    """The system's clocks, the wall clock moved by :meth:`step` (forward or back); reads are counted.

    ``manual``: the monotonic clock stands still but for :meth:`advance` (time passes only when the test says:
    what the code under test decides then depends on no machine's speed). ``on_read``: called after each read,
    in the reader's thread (a test acts there, between two looks of the code under test, without a thread of its
    own: a process that forks, as a supervisor does, must have no other thread then); reads it makes itself do not
    call it again.
    """

    def __init__(self, *, manual: bool = False, on_read: Callable[[SteppingClock], None] | None = None) -> None:
        self.on_read = on_read
        self._in_hook = False
        self.offset = 0.0
        self.manual = manual
        self.ran = 0.0  # seconds advance() moved both clocks (manual)
        self.start = time.monotonic()
        self.reads = 0
        self._lock = threading.Lock()
        self.clock = Clock(time=self.time, monotonic=self.monotonic)

    def time(self) -> float:
        """The wall clock, stepped."""
        with self._lock:
            self.reads += 1
            value = time.time() + self.offset
        self._hook()
        return value

    def monotonic(self) -> float:
        """The monotonic clock: it never steps."""
        with self._lock:
            self.reads += 1
            value = self.start + self.ran if self.manual else time.monotonic()
        self._hook()
        return value

    def _hook(self) -> None:
        if self.on_read is None or self._in_hook:
            return
        self._in_hook = True
        try:
            self.on_read(self)
        finally:
            self._in_hook = False

    def advance(self, seconds: float) -> int:
        """Let ``seconds`` pass on both clocks (a manual clock's only way on); returns the reads so far."""
        with self._lock:
            self.ran += seconds
            self.offset += seconds
            return self.reads

    def step(self, seconds: float) -> int:
        """Step the wall clock by ``seconds``; returns the reads so far (for :meth:`wait_reads`)."""
        with self._lock:
            self.offset += seconds
            return self.reads

    def wait_reads(self, since: int, count: int, timeout: float = 120.0) -> None:
        """Wait until the clock was read ``count`` more times than ``since`` (the code under test went round)."""
        assert poll_until(
            lambda: True if self.reads >= since + count else None, time.monotonic() + timeout, interval=0.02
        )
