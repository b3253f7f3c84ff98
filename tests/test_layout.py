"""The results layout (rlcloud.layout): progress.json's typed model reads what any runner wrote and keeps
what it does not know; the names are those of docs/contracts.md."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from rlcloud import layout
from rlcloud.backend import ExperimentStatus, TrialStatus, trial_state
from rlcloud.layout import ProgressRecord
from rlcloud.storage import read_progress
from rlcloud.storage.local import LocalStore

#: progress.json as a runner before the heartbeat wrote it (no advanced_at, stall_timeout, cpu_seconds)
OLD_RUNNER = {"state": "running", "timestep": 1200, "episode": 12, "mean_return": 21.5, "updated": 1000.0}


def test_a_record_from_an_older_runner_reads_with_the_missing_fields_none() -> None:
    record = ProgressRecord(OLD_RUNNER)
    assert (record.state, record.timestep, record.episode, record.mean_return) == ("running", 1200, 12, 21.5)
    assert record.advanced_at is None and record.stall_timeout is None and record.cpu_seconds is None
    assert record.heartbeat == 1000.0  # updated stands in for the heartbeat it did not write
    assert not record.stopped_early and not record.done


def test_fields_it_does_not_know_survive_a_read_and_a_write(tmp_path: Path) -> None:
    # a newer runner's fields (a cost so far, a stall heartbeat's extras) go through an older reader
    written = {**OLD_RUNNER, "advanced_at": 990.0, "cost_so_far": {"usd": 0.12}, "beats": [1, 2]}
    store = LocalStore(tmp_path)
    store.write_text(layout.PROGRESS, json.dumps(written))
    record = read_progress(store)
    assert isinstance(record, ProgressRecord) and record == written
    assert json.loads(ProgressRecord(record, state="stopped").to_json()) == {**written, "state": "stopped"}
    assert record.heartbeat == 990.0


def test_a_field_of_the_wrong_type_reads_as_none_and_clean_drops_it_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = {"state": 7, "timestep": float("inf"), "episode": "25", "advanced_at": True, "checkpoint": 3}
    raw = ProgressRecord(odd)  # read as it stands: every accessor says None rather than raise
    assert (raw.state, raw.timestep, raw.episode, raw.advanced_at, raw.checkpoint) == (None,) * 5
    with caplog.at_level(logging.WARNING, logger="rlcloud.layout"):
        clean = ProgressRecord.clean(odd, "run-1/progress.json")
    assert clean == {"episode": 25, "advanced_at": True}  # a number written as a string taken
    assert clean.episode == 25
    assert [r.getMessage() for r in caplog.records] == [
        "run-1/progress.json: ignored field(s) of the wrong type: timestep='inf', state='7', checkpoint='3'"
    ]


def test_the_stopped_early_state_has_one_spelling_on_record_and_one_as_a_trial() -> None:
    record = ProgressRecord(state=layout.STOPPED_EARLY, stop_reason="below the median")
    assert record.stopped_early and record.done and record.stop_reason == "below the median"
    assert layout.STOPPED_EARLY in layout.FINAL_STATES
    assert trial_state("succeeded", record) == "stopped early"
    assert trial_state("succeeded", {"state": "succeeded"}) == "succeeded"


def test_statuses_hold_a_progress_record_whatever_they_are_given() -> None:
    status = ExperimentStatus("x", "running", progress={"timestep": 5})
    trial = TrialStatus(0, "t", {}, 1, "running", {"mean_return": 3})
    assert isinstance(status.progress, ProgressRecord) and status.progress.timestep == 5
    assert isinstance(trial.progress, ProgressRecord) and trial.progress.mean_return == 3.0
    assert ExperimentStatus("x", "running").progress == {}


def test_the_names_are_those_of_the_contract() -> None:
    contract = (Path(__file__).parent.parent / "docs" / "contracts.md").read_text(encoding="utf-8")
    section = contract.split("## Results layout", 1)[1].split("\n## ", 1)[0]
    for name in (layout.SPEC, layout.HISTORY, layout.PROGRESS, layout.METRICS, layout.EVALUATION, layout.LATEST):
        assert re.search(rf"^{re.escape(name)}\s", section, re.MULTILINE), name
    for directory in (layout.SUMMARIES, layout.AGENT_SUMMARIES, layout.LOGS, layout.CHECKPOINTS):
        assert re.search(rf"^{re.escape(directory)}/", section, re.MULTILINE), directory
    assert layout.checkpoint_path("ckpt-1") == "checkpoints/ckpt-1" and layout.log_path("agent-0") == "logs/agent-0.log"
    assert layout.child("gs://b/p/", "run") == "gs://b/p/run" and layout.child("runs", "a") == "runs/a"
