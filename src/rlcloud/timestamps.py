"""RFC 3339 timestamps as Kubernetes and Google Cloud APIs write them, read in one place (pure, no imports).

Kubernetes writes ``2024-05-01T12:00:00Z`` (``metav1.Time``, whole seconds) and ``2024-05-01T12:00:00.123456Z``
(``MicroTime``); GKE's ``Cluster.create_time`` and Compute Engine's ``creationTimestamp`` carry an offset and
fractional seconds (``2024-05-01T12:00:00.123456789+00:00``, ``2024-05-01T05:00:00.123-07:00``). Each is a
moment: a value without an offset is refused rather than read in this machine's zone (a laptop in UTC-7 would
shift every age by seven hours), as Kubernetes' own parser (Go's ``time.RFC3339``) refuses it.
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = ["format_rfc3339", "parse_rfc3339", "rfc3339_seconds"]

# RFC 3339 section 5.6 date-time: "T" or "t" (or, as its note allows, a space) between date and time, any
# number of fractional digits, "Z"/"z" or a numeric offset
_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2})(?P<fraction>\.\d+)?(?P<offset>[Zz]|[+-]\d{2}:\d{2})"
)


def parse_rfc3339(value: object) -> _dt.datetime | None:
    """The moment an RFC 3339 timestamp names, timezone-aware; None for anything else.

    Args:
        value: the timestamp as an API returned it (a string, or an aware ``datetime`` from a typed client);
            absent, empty, malformed, offset-less or impossible values (``2024-02-30``) are None, never an
            exception: a record from an API is input.

    Returns:
        An aware datetime (fractional seconds past microseconds are dropped), or None.
    """
    if isinstance(value, _dt.datetime):
        return value if value.utcoffset() is not None else None
    if not isinstance(value, str):
        return None
    match = _RFC3339.fullmatch(value.strip())
    if match is None:
        return None
    fraction = (match["fraction"] or "")[:7]  # a dot and microseconds: nanoseconds are past a datetime's grain
    offset = "+00:00" if match["offset"] in ("Z", "z") else match["offset"]
    try:
        return _dt.datetime.fromisoformat(f"{match['date']}T{match['time']}{fraction}{offset}")
    except ValueError:  # a well-formed impossible date or time (month 13, 25:00, a leap second)
        return None


def rfc3339_seconds(value: object) -> float | None:
    """:func:`parse_rfc3339` as Unix seconds (what ages and costs are computed with); None when unreadable."""
    moment = parse_rfc3339(value)
    return moment.timestamp() if moment is not None else None


def format_rfc3339(seconds: float) -> str:
    """Unix ``seconds`` as Kubernetes writes a ``metav1.Time``: UTC, whole seconds, ``Z`` (``2024-05-01T12:00:00Z``)."""
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
