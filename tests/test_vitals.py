"""Stall detection and the derived status figures (issue 30): pure functions over a progress.json, judged
at a given time (no sleeps: the heartbeats are written in the past)."""

from __future__ import annotations

from typing import Any

import pytest

from rlcloud.backend import (
    DEFAULT_STALL_TIMEOUT,
    STATUS_SCHEMA,
    ExperimentStatus,
    RoleStatus,
    stalled_for,
    vitals,
)
from rlcloud.display import display_state

NOW = 1_800_000_000.0


def _progress(**fields: Any) -> dict[str, Any]:
    return {"state": "running", "timestep": 3000, "episode": 30, "stall_timeout": 60, **fields}


def test_a_learner_is_stalled_once_its_heartbeat_is_stall_timeout_old() -> None:
    assert stalled_for(_progress(advanced_at=NOW - 59), NOW) is None
    assert stalled_for(_progress(advanced_at=NOW - 60), NOW) == 60
    assert stalled_for(_progress(advanced_at=NOW - 3600), NOW) == 3600


def test_the_heartbeat_falls_back_to_updated_and_the_timeout_to_the_default() -> None:
    """A progress.json from a runner before the heartbeat: its last write, judged against 10 minutes."""
    old = {"state": "running", "timestep": 5, "updated": NOW - DEFAULT_STALL_TIMEOUT}
    assert stalled_for(old, NOW) == DEFAULT_STALL_TIMEOUT
    assert stalled_for({**old, "updated": NOW - DEFAULT_STALL_TIMEOUT + 1}, NOW) is None
    assert stalled_for({"state": "running"}, NOW) is None  # no time at all: nothing to judge


@pytest.mark.parametrize("state", ["starting", "succeeded", "failed", "stopped", "stopped-early"])
def test_only_a_training_learner_can_stall(state: str) -> None:
    assert stalled_for(_progress(state=state, advanced_at=NOW - 86400), NOW) is None


def test_status_shows_stalled_instead_of_running_in_the_display_and_the_json() -> None:
    roles = [RoleStatus("single", 0, "running", restarts=1)]
    status = ExperimentStatus("x", "running", roles, _progress(advanced_at=NOW - 600), observed_at=NOW)
    assert display_state(status) == "stalled (10 min without progress)"
    doc = status.to_dict()
    assert doc["schema"] == STATUS_SCHEMA == 1
    assert doc["state"] == "stalled" and doc["vitals"]["stalled_for_s"] == 600 and doc["vitals"]["restarts"] == 1
    paused = ExperimentStatus("x", "paused", roles, _progress(advanced_at=NOW - 600), observed_at=NOW)
    assert paused.stalled_for is None and paused.to_dict()["state"] == "paused"  # not running: cannot stall
    fresh = ExperimentStatus("x", "running", roles, _progress(advanced_at=NOW - 5), observed_at=NOW)
    assert display_state(fresh) == "running" and fresh.to_dict()["state"] == "running"


def test_vitals_of_a_run_that_stops_at_timesteps() -> None:
    progress = _progress(
        advanced_at=NOW - 1,
        steps_per_second=100.0,
        mean_return=42.5,
        checkpoint="ckpt-2500",
        checkpoint_at=NOW - 90,
        elapsed=1800.4,
    )
    figures = vitals(progress, now=NOW, goal=("timestep", 12000), restarts=2, price_per_hour=0.5, budget_usd=2.0)
    assert figures == {
        "percent": 25.0,
        "eta_s": 90,  # 9,000 timesteps at 100 a second
        "steps_per_second": 100.0,
        "mean_return": 42.5,
        "restarts": 2,
        "checkpoint": "ckpt-2500",
        "checkpoint_age_s": 90,
        "elapsed_s": 1800,
        "cost_usd": 0.25,  # half an hour at $0.50
        "stalled_for_s": None,
        "budget_usd": 2.0,
        "budget_percent": 12.5,
    }
    # the in-cluster reaper's measure wins over the estimate from training time
    assert vitals(progress, now=NOW, price_per_hour=0.5, budget_usd=2.0, cost_usd=1.5)["budget_percent"] == 75.0


def test_vitals_of_a_run_that_stops_at_episodes_estimate_its_episode_rate() -> None:
    # 3,000 timesteps made 30 episodes: 100 a second is one episode a second; 70 to go
    figures = vitals(_progress(steps_per_second=100.0), now=NOW, goal=("episode", 100))
    assert figures["percent"] == 30.0 and figures["eta_s"] == 70


def test_vitals_unknown_figures_are_none_and_an_ended_run_has_no_eta_or_rate() -> None:
    assert vitals({}, now=NOW) == {
        "percent": None,
        "eta_s": None,
        "steps_per_second": None,
        "mean_return": None,
        "restarts": 0,
        "checkpoint": None,
        "checkpoint_age_s": None,
        "elapsed_s": None,
        "cost_usd": None,
        "stalled_for_s": None,
        "budget_usd": None,
        "budget_percent": None,
    }
    ended = vitals(_progress(steps_per_second=100.0), now=NOW, goal=("timestep", 12000), running=False)
    # an ended run keeps its one figure (timesteps over training time): list, status and -o json agree
    assert ended["eta_s"] is None and ended["steps_per_second"] == 100.0 and ended["percent"] == 25.0
    done = vitals(_progress(timestep=12000, steps_per_second=9.0), now=NOW, goal=("timestep", 12000))
    assert done["percent"] == 100.0 and done["eta_s"] == 0
    starting = vitals(_progress(state="starting", steps_per_second=50.0), now=NOW, goal=("timestep", 12000))
    assert starting["steps_per_second"] is None and starting["eta_s"] is None


def test_a_sweeps_figures_sum_its_trials() -> None:
    from rlcloud.backend import SweepStatus, TrialStatus

    goal = ("timestep", 1000)
    trials = [
        TrialStatus(
            0, "t0", {}, 0, "succeeded", {"state": "succeeded", "timestep": 1000, "mean_return": 90.0}, goal=goal
        ),
        TrialStatus(
            1,
            "t1",
            {},
            1,
            "running",
            _progress(timestep=500, steps_per_second=50.0, mean_return=120.0, advanced_at=NOW - 1),
            restarts=1,
            observed_at=NOW,
            goal=goal,
        ),
        TrialStatus(
            2, "t2", {}, 2, "running", _progress(timestep=0, advanced_at=NOW - 3600), observed_at=NOW, goal=goal
        ),
        TrialStatus(3, "t3", {}, 3, "queued", goal=goal),
    ]
    status = SweepStatus("s", "running", trials)
    assert status.vitals == {
        "percent": 37.5,  # (100 + 50 + 0 + 0) / 4
        "eta_s": 50,  # 500 + 1000 + 1000 timesteps left at 50 a second
        "best_return": 120.0,
        "restarts": 1,
        "stalled": 1,
        "cost_usd": None,
        "budget_usd": None,
        "budget_percent": None,
    }
    measured = SweepStatus("s", "running", trials, budget_usd=10.0, cost_usd=2.5)
    assert (measured.vitals["cost_usd"], measured.vitals["budget_percent"]) == (2.5, 25.0)
    doc = status.to_dict()
    assert doc["schema"] == 1 and [t["state"] for t in doc["trials"]] == ["succeeded", "running", "stalled", "queued"]
    assert doc["trials"][1]["vitals"]["percent"] == 50.0
    unknown = SweepStatus("s", "running", [TrialStatus(0, "t0", {}, 0, "queued")])
    assert unknown.vitals["percent"] is None and unknown.vitals["eta_s"] is None
