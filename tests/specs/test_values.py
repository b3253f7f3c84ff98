"""The small value types of the specs: Frequency and Duration, parsed and printed."""

from __future__ import annotations

from typing import Any

import pytest

from rlcloud.specs import Duration, Frequency


@pytest.mark.parametrize(
    ("raw", "value", "unit", "text"),
    [
        ("600s", 600, "s", "600s"),
        ("600", 600, "s", "600s"),
        (600, 600, "s", "600s"),
        (600.0, 600, "s", "600s"),
        (" 100E ", 100, "e", "100e"),
        ("5000t", 5000, "t", "5000t"),
        ("10m", 600, "s", "600s"),
        ("10min", 600, "s", "600s"),
        ("1.5m", 90, "s", "90s"),
        ("2h", 7200, "s", "7200s"),
        ("30sec", 30, "s", "30s"),
    ],
)
def test_frequency_parse(raw: Any, value: int, unit: str, text: str) -> None:
    frequency = Frequency.parse(raw)
    assert (frequency.value, frequency.unit) == (value, unit)
    assert str(frequency) == text
    assert Frequency.parse(str(frequency)) == frequency  # its text form reads back
    assert Frequency.parse(frequency) is frequency


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("", "cannot read"),
        ("often", "cannot read"),
        ("10 episodes", "cannot read"),
        ("-5s", "cannot read"),
        ("1.5e", "whole number"),
        ("0t", "whole number"),
        (0.5, "whole number"),
        (True, "number of seconds"),
        (None, "number of seconds"),
        ({"every": 5}, "number of seconds"),
    ],
)
def test_frequency_refuses(raw: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Frequency.parse(raw)


@pytest.mark.parametrize(
    ("raw", "seconds", "text"),
    [("90s", 90, "90s"), ("30m", 1800, "30m"), ("6h", 21600, "6h"), ("2d", 172800, "2d"), (3600, 3600, "1h")],
)
def test_duration_parse(raw: Any, seconds: int, text: str) -> None:
    duration = Duration.parse(raw)
    assert duration.seconds == seconds
    assert str(duration) == text
    assert Duration.parse(text) == duration


@pytest.mark.parametrize("raw", ["", "6 hours", "1.5h", "0m", 0, -1, True, 2.5, None])
def test_duration_refuses(raw: Any) -> None:
    with pytest.raises(ValueError, match="'6h'"):
        Duration.parse(raw)


def test_ordering() -> None:
    assert Duration.parse("1h") < Duration.parse("2h")
    assert sorted([Frequency.parse("5000t"), Frequency.parse("100e")]) == [Frequency(100, "e"), Frequency(5000, "t")]
