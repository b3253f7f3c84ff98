"""Fuzzing the readers of what other processes left in a shared store (hypothesis): a peer's curve for the
median stopping rule, one run's metrics lines, object names of a store being downloaded, a sweep's record.
Whatever the bytes, each reader returns a value or refuses that one item with the error it documents, never
another exception.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, configuration, given, settings
from hypothesis import strategies as st

from rlcloud.errors import SpecError, StorageError
from rlcloud.layout import SWEEP_SPEC, ProgressRecord
from rlcloud.record import check_sweep_resume
from rlcloud.runner.early_stop import CONTINUE, STOP, parse_decision
from rlcloud.storage import open_store
from rlcloud.storage.base import ObjectInfo, local_targets
from rlcloud.storage.client import read_metrics

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


def _decision_or_value_error(data: bytes) -> None:
    """A peer's early-stopping decision record is input: it parses into a checked record or a ValueError,
    never anything else (the records replaced the peers' curves that were fuzzed here before)."""
    try:
        record = parse_decision(data)
    except ValueError:
        return
    assert record["decision"] in (CONTINUE, STOP)
    assert isinstance(record["timestep"], int) and not isinstance(record["timestep"], bool) and record["timestep"] >= 0
    value = record.get("value")
    assert value is None or (isinstance(value, int | float) and not isinstance(value, bool))


@FUZZ
@given(JSON_VALUES)
def test_decisions_from_random_json_values(value: object) -> None:
    _decision_or_value_error(json.dumps(value).encode())


@FUZZ
@given(
    st.fixed_dictionaries(
        {"decision": st.sampled_from([CONTINUE, STOP, "go", None]), "timestep": SCALARS, "value": SCALARS}
    )
)
def test_decisions_from_random_fields(record: dict[str, object]) -> None:
    _decision_or_value_error(json.dumps(record).encode())


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=200).map("".join))
def test_decisions_from_token_soup(text: str) -> None:
    _decision_or_value_error(text.encode())


@FUZZ
@given(st.binary(max_size=512))
def test_decisions_from_random_bytes(data: bytes) -> None:
    _decision_or_value_error(data)


FIELDS = ["episode", "timestep", "return", "length", "time", "worker", "at_timestep", "state", "x"]


def _metrics_never_raise(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as where:
        store = open_store(where)
        store.write_text("metrics.jsonl", "\n".join(lines) + "\n")
        for record in read_metrics(store):
            for key in ("episode", "timestep", "length", "worker", "at_timestep"):
                assert key not in record or (type(record[key]) is int and record[key] >= 0)
            for key in ("return", "time"):
                assert key not in record or type(record[key]) is float


@FUZZ
@given(st.lists(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=6), max_size=8))
def test_metrics_lines_from_random_records(records: list[dict[str, object]]) -> None:
    _metrics_never_raise([json.dumps(r) for r in records])


@FUZZ
@given(st.lists(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join), max_size=8))
def test_metrics_lines_from_token_soup(lines: list[str]) -> None:
    _metrics_never_raise(lines)


@FUZZ
@given(st.dictionaries(st.sampled_from(["timestep", "episode", "mean_return", "state", "updated"]), JSON_VALUES))
def test_progress_fields_of_any_type(progress: dict[str, object]) -> None:
    clean = ProgressRecord.clean(progress, "progress.json")
    assert "timestep" not in clean or clean["timestep"] is None or type(clean["timestep"]) is int
    assert "state" not in clean or clean["state"] is None or isinstance(clean["state"], str)


NAME_PARTS = st.one_of(
    st.sampled_from(["a", "b", "..", ".", "", "\x00", "n" * 256, "\u00e9" * 130, "logs", " ", "-"]),
    st.text(min_size=1, max_size=12),
)


@FUZZ
@given(st.lists(st.lists(NAME_PARTS, min_size=1, max_size=4).map("/".join), max_size=12))
def test_object_names_of_any_shape(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as where:
        root = Path(where)
        listing = [ObjectInfo(name=n, size=len(n) % 3, crc32c="", generation=1) for n in names]
        targets, skipped = local_targets(listing, root)
        assert len(targets) + len(skipped) <= len(listing)
        paths = [path for _, path in targets]
        for path in paths:
            assert path.resolve().is_relative_to(root.resolve()) and path != root
            assert not any(other != path and other.is_relative_to(path) for other in paths)  # no file is a folder
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")  # every target can be a file, side by side


SWEEP_TOKENS = [*TOKENS, "name: s\n", "seeds: ", "parameters:", "experiment:", "&a ", "*a", "\n  ", "- ", "!!python/"]


@FUZZ
@given(st.lists(st.sampled_from(SWEEP_TOKENS), max_size=120).map("".join))
def test_a_sweep_record_of_any_text_is_used_or_refused_by_name(text: str) -> None:
    from rlcloud.specs.sweep import SweepSpec

    experiment = {
        "name": "e",
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo"},
        "total_timesteps": 100,
    }
    sweep = SweepSpec.from_dict({"name": "s", "experiment": experiment})
    with tempfile.TemporaryDirectory() as where:
        store = open_store(where)
        store.write_text(SWEEP_SPEC, text)
        try:
            check_sweep_resume(store, sweep)
        except StorageError as exc:
            assert SWEEP_SPEC in str(exc)
        except SpecError:  # ChangedSweepError: the record read, and it is another sweep
            pass
