"""Fuzzing the readers of what other processes left in a shared store (hypothesis): a peer's curve for the
median stopping rule, one run's metrics lines, object names of a store being downloaded. Whatever the bytes,
each reader returns a value or refuses that one item with the error it documents, never another exception.
"""

from __future__ import annotations

import json
import tempfile

from hypothesis import HealthCheck, configuration, given, settings
from hypothesis import strategies as st

from rlcloud.runner.early_stop import parse_curve

configuration.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="rlcloud-hypothesis-"))

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: JSON-ish values, numbers of every kind (NaN, infinities, huge ints, bools) included
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4), max_leaves=30)
TOKENS = ["[", "]", ",", "1", "-", "0.5", "e9", "NaN", "Infinity", "null", '"', "true", "{", "}", ":", " "]


def _curve_or_value_error(data: bytes) -> None:
    try:
        curve = parse_curve(data)
    except ValueError:
        return
    assert all(len(p) == 2 and all(isinstance(x, float) for x in p) for p in curve)
    assert [p[0] for p in curve] == sorted(p[0] for p in curve)


@FUZZ
@given(JSON_VALUES)
def test_curves_from_random_json_values(value: object) -> None:
    _curve_or_value_error(json.dumps(value).encode())


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=200).map("".join))
def test_curves_from_token_soup(text: str) -> None:
    _curve_or_value_error(text.encode())


@FUZZ
@given(st.binary(max_size=512))
def test_curves_from_random_bytes(data: bytes) -> None:
    _curve_or_value_error(data)
