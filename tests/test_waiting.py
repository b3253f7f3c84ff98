"""rlcloud.waiting: the one retry and wait policy. Pauses are recorded through the injected ``sleep``, so
no test here waits for real."""

from __future__ import annotations

import time

import pytest

from rlcloud.waiting import Backoff, Clock, StampAges, poll_until, retry, sleep_until


class Flaky:
    """Fails with ``errors`` in turn, then returns "done"; counts its calls."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_backoff_doubles_up_to_its_maximum() -> None:
    pauses = Backoff(0.2, 1.0).pauses()
    assert [next(pauses) for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    slower = Backoff(2.0, 20.0, factor=1.5).pauses()
    assert [next(slower) for _ in range(3)] == [2.0, 3.0, 4.5]


def test_retry_pauses_between_retryable_failures_and_returns_the_answer() -> None:
    slept: list[float] = []
    told: list[tuple[str, int, float]] = []
    call = Flaky(ConnectionError("reset"), ConnectionError("reset"))
    answer = retry(
        call,
        retryable=lambda exc: isinstance(exc, ConnectionError),
        backoff=Backoff(0.5, 1.0),
        attempts=3,
        on_retry=lambda exc, attempt, pause: told.append((str(exc), attempt, pause)),
        sleep=slept.append,
    )
    assert answer == "done" and call.calls == 3
    assert slept == [0.5, 1.0]
    assert told == [("reset", 1, 0.5), ("reset", 2, 1.0)]


def test_retry_raises_what_is_not_retryable_at_once() -> None:
    slept: list[float] = []
    call = Flaky(ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input"):
        retry(
            call,
            retryable=lambda exc: isinstance(exc, ConnectionError),
            backoff=Backoff(1, 1),
            attempts=5,
            sleep=slept.append,
        )
    assert call.calls == 1 and slept == []


def test_retry_gives_up_after_its_attempts_with_the_last_error() -> None:
    slept: list[float] = []
    call = Flaky(ConnectionError("1"), ConnectionError("2"), ConnectionError("3"))
    with pytest.raises(ConnectionError, match="2"):
        retry(call, retryable=lambda exc: True, backoff=Backoff(0.1, 0.1), attempts=2, sleep=slept.append)
    assert call.calls == 2 and slept == [0.1]


def test_retry_gives_up_at_its_deadline() -> None:
    slept: list[float] = []
    call = Flaky(ConnectionError("down"), ConnectionError("still down"))
    with pytest.raises(ConnectionError, match="down"):
        retry(
            call, retryable=lambda exc: True, backoff=Backoff(5, 5), deadline=time.monotonic() - 1, sleep=slept.append
        )
    assert call.calls == 1 and slept == []


def test_retry_pauses_no_longer_than_the_deadline_leaves() -> None:
    slept: list[float] = []
    retry(
        Flaky(ConnectionError("down")),
        retryable=lambda exc: True,
        backoff=Backoff(3600, 3600),
        deadline=time.monotonic() + 60,
        sleep=slept.append,
    )
    assert len(slept) == 1 and 0 < slept[0] <= 60


def test_retry_without_attempts_or_deadline_is_refused() -> None:
    with pytest.raises(ValueError, match="attempts or a deadline"):
        retry(Flaky(), retryable=lambda exc: True, backoff=Backoff(1, 1))


def test_poll_until_returns_the_first_answer() -> None:
    answers = iter([None, None, 7])
    assert poll_until(lambda: next(answers), time.monotonic() + 60, interval=0.001) == 7


def test_poll_until_checks_once_and_gives_none_past_its_deadline() -> None:
    calls: list[int] = []

    def check() -> int | None:
        calls.append(1)
        return None

    assert poll_until(check, time.monotonic() - 1) is None
    assert calls == [1]


def test_sleep_until_never_passes_the_deadline() -> None:
    slept: list[float] = []
    assert sleep_until(time.monotonic() - 1, 5.0, sleep=slept.append) is False
    assert sleep_until(None, 5.0, sleep=slept.append) is True
    assert sleep_until(time.monotonic() + 60, 5.0, sleep=slept.append) is True
    assert slept == [5.0, 5.0]
    assert sleep_until(time.monotonic() + 1, 5.0, sleep=slept.append) is True
    assert 0 < slept[-1] <= 1


class _Clocks:
    """Two clocks a test moves by hand: ``wall`` steps, ``mono`` runs."""

    def __init__(self) -> None:
        self.wall, self.mono = 1_800_000_000.0, 50.0

    def clock(self) -> Clock:
        return Clock(time=lambda: self.wall, monotonic=lambda: self.mono)

    def run(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


@pytest.mark.parametrize("step", [2 * 3600.0, -2 * 3600.0, 86400.0 * 365])
def test_a_stamps_age_is_time_that_passed_here_whatever_the_wall_clock_does(step: float) -> None:
    clocks = _Clocks()
    ages = StampAges(clocks.clock())
    stamp = clocks.wall - 0.5  # written half a second before it is first seen
    assert ages.age("progress.updated", stamp) == 0.0
    clocks.run(3.0)
    assert ages.age("progress.updated", stamp) == 3.0
    clocks.wall += step  # NTP, a laptop's sleep, a resumed VM
    clocks.run(2.0)
    assert ages.age("progress.updated", stamp) == 5.0
    # a new stamp (the writer reported again) starts afresh; another key is counted apart
    assert ages.age("progress.updated", clocks.wall) == 0.0
    clocks.run(1.0)
    assert ages.age("progress.updated", clocks.wall - 1.0) == 1.0  # the same stamp, a second on
    assert ages.age("heartbeat", stamp) == 0.0
