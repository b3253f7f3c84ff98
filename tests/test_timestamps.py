"""RFC 3339 timestamps as Kubernetes and Google Cloud APIs write them (rlcloud.timestamps)."""

from __future__ import annotations

import datetime as _dt

import pytest

from rlcloud.timestamps import format_rfc3339, parse_rfc3339, rfc3339_seconds

NOON = _dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=_dt.UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # Kubernetes metav1.Time (creationTimestamp, startTime, finishedAt, lastTransitionTime)
        ("2024-05-01T12:00:00Z", NOON),
        # Kubernetes MicroTime (Events' eventTime, Leases)
        ("2024-05-01T12:00:00.250000Z", NOON + 0.25),
        # GKE Cluster.create_time: an offset and nanoseconds (past a datetime's microseconds: dropped)
        ("2024-05-01T12:00:00.123456789+00:00", NOON + 0.123456),
        # Compute Engine creationTimestamp: milliseconds and the zone of the API's clock
        ("2024-05-01T05:00:00.500-07:00", NOON + 0.5),
        ("2024-05-01T17:30:00+05:30", NOON),
        # RFC 3339 allows lower-case separators, one fractional digit, and (its note) a space for the T
        ("2024-05-01t12:00:00z", NOON),
        ("2024-05-01T12:00:00.5Z", NOON + 0.5),
        ("2024-05-01 12:00:00Z", NOON),
        # the day changes with the offset
        ("2024-05-02T00:30:00+12:30", NOON),
    ],
)
def test_the_formats_of_kubernetes_and_google_apis_name_the_same_moment(text: str, seconds: float) -> None:
    assert rfc3339_seconds(text) == pytest.approx(seconds, abs=1e-6)
    moment = parse_rfc3339(text)
    assert moment is not None and moment.utcoffset() is not None


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        12345,
        1714564800.0,
        "yesterday",
        "2024-05-01",  # a date, not a moment
        "2024-05-01T12:00:00",  # no offset: this machine's zone would be a guess
        "2024-05-01T12:00Z",  # no seconds
        "20240501T120000Z",  # ISO 8601's basic format, not RFC 3339
        "2024-05-01T12:00:00+0000",  # an offset without its colon
        "2024-13-01T12:00:00Z",  # month 13
        "2024-02-30T12:00:00Z",  # February 30th
        "2024-05-01T25:00:00Z",
        "2016-12-31T23:59:60Z",  # a leap second: no datetime holds it (Google smears them: its APIs never write one)
        "2024-05-01T12:00:00Z trailing",
        _dt.datetime(2024, 5, 1, 12),  # a naive datetime: no offset either
    ],
)
def test_anything_else_is_none_never_an_exception(value: object) -> None:
    assert parse_rfc3339(value) is None and rfc3339_seconds(value) is None


def test_an_aware_datetime_from_a_typed_client_is_taken_as_it_is() -> None:
    moment = _dt.datetime(2024, 5, 1, 14, tzinfo=_dt.timezone(_dt.timedelta(hours=2)))
    assert parse_rfc3339(moment) is moment and rfc3339_seconds(moment) == NOON


def test_surrounding_whitespace_is_ignored() -> None:
    assert rfc3339_seconds(" 2024-05-01T12:00:00Z\n") == NOON


def test_what_is_written_is_what_kubernetes_writes_and_reads_back() -> None:
    assert format_rfc3339(NOON + 0.9) == "2024-05-01T12:00:00Z"  # metav1.Time: whole seconds
    assert rfc3339_seconds(format_rfc3339(NOON)) == NOON
