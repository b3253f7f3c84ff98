"""`rlcloud experiment list` over many local runs (issue 36): each run's row from its state.json and
progress.json, its spec never parsed when its start recorded the facts a row needs (goal, budget, processes).

The runs are finished ones written in the project's layout (tests/support/written_runs.py); no process runs.
That no spec is read is observed, not mocked: every spec file is replaced by one that cannot parse, and the
rows stay right (a listing that parsed them would show "unknown (...)" rows instead).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlcloud.backend import RunFacts
from rlcloud.cli import main
from rlcloud.experiment import Experiment
from rlcloud.local import STATE_DIR
from tests.support.written_runs import write_local_runs

N = 50
GARBAGE = "name: [unclosed\n"


def _listed(capsys: pytest.CaptureFixture[str], root: Path) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["experiment", "list", "-o", "json", "--results", str(root)]) == 0
    rows: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return rows


def _break_specs(root: Path, names: list[str]) -> None:
    for name in names:
        for path in (root / name / "spec.yaml", root / name / STATE_DIR / "spec.yaml"):
            path.write_text(GARBAGE)


def test_listing_many_runs_reads_their_state_not_their_specs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "results"
    names = write_local_runs(root, N, prefix="many")
    # what Experiment.attach(name).status() says, with every spec readable: the rows must say the same
    expected = {}
    for name in names[:3]:
        exp = Experiment.attach(name, results=str(root))
        expected[name] = (exp.status().vitals, exp.spec.total_timesteps, exp.location)
    _break_specs(root, names)
    rows = _listed(capsys, root)
    assert [r["name"] for r in rows] == sorted(names)
    for row in rows:
        assert row["state"] == "succeeded", row
        assert row["timestep"] == 2500 and row["episode"] == 100 and row["total_timesteps"] == 150000
        assert row["results"] == str((root / str(row["name"])).resolve()) and row["runs_on"] == "local"
    for name, (vitals, total, location) in expected.items():
        (row,) = [r for r in rows if r["name"] == name]
        assert row["percent"] == vitals["percent"] == round(100 * 2500 / 150000, 1)
        assert row["mean_return"] == vitals["mean_return"] and row["eta_s"] == vitals["eta_s"]
        assert row["total_timesteps"] == total and row["results"] == location
    # the API's listing is the names alone, as before
    assert Experiment.list(results=str(root)) == sorted(names)


def test_runs_started_before_their_facts_were_recorded_read_their_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run from before (no facts in state.json) or with facts that are not ones rlcloud writes (a record is
    input) is listed from its spec, as before; one whose spec cannot be read is a row saying why."""
    root = tmp_path / "results"
    names = write_local_runs(root, 6, facts=False, prefix="old")
    planted = root / names[0] / STATE_DIR / "state.json"
    state = json.loads(planted.read_text())
    state["facts"] = {"goal": ["timestep", "lots"], "budget_usd": None, "processes": 1}
    planted.write_text(json.dumps(state))
    _break_specs(root, names[-1:])
    rows = {r["name"]: r for r in _listed(capsys, root)}
    assert sorted(rows) == sorted(names)
    for name in names[:-1]:
        assert rows[name]["state"] == "succeeded" and rows[name]["total_timesteps"] == 150000
        assert rows[name]["percent"] == round(100 * 2500 / 150000, 1)
    broken = rows[names[-1]]
    assert str(broken["state"]).startswith("unknown (") and "spec.yaml" in str(broken["state"])
    assert broken["timestep"] is None


@pytest.mark.parametrize(
    "record",
    [
        None,
        "facts",
        {"goal": ["timestep", 0], "budget_usd": None, "processes": 1},
        {"goal": ["hours", 5], "budget_usd": None, "processes": 1},
        {"goal": ["episode", True], "budget_usd": None, "processes": 1},
        {"goal": None, "budget_usd": -1, "processes": 1},
        {"goal": None, "budget_usd": None, "processes": 0},
        {"goal": None, "budget_usd": None},
    ],
)
def test_facts_that_rlcloud_does_not_write_are_not_taken(record: object) -> None:
    assert RunFacts.of_record(record) is None


def test_facts_round_trip() -> None:
    for facts in (
        RunFacts(goal=("timestep", 72000), budget_usd=2.5, processes=3),
        RunFacts(goal=("episode", 500), budget_usd=None, processes=1),
        RunFacts(goal=None, budget_usd=0.0, processes=1),
    ):
        assert RunFacts.of_record(json.loads(json.dumps(facts.to_record()))) == facts


def test_local_sweep_status_of_many_trials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`sweep status` of a finished local sweep of 50 trials: a row per trial from its state, in the sweep's
    order, none of the trials' specs read (they cannot parse)."""
    from tests.support.written_runs import write_local_sweep

    root = tmp_path / "results"
    names = write_local_sweep(root, "wide", N)
    _break_specs(root / "wide", names)
    capsys.readouterr()
    assert main(["sweep", "status", "wide", "-o", "json", "--results", str(root)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["state"] == "succeeded"
    assert [t["name"] for t in doc["trials"]] == names
    assert all(t["state"] == "succeeded" and t["timestep"] == 2500 for t in doc["trials"]), doc["trials"][0]
