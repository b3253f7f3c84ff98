"""The Experiment facade (``rlcloud.Experiment``) end to end on this machine: each public verb once, on real runs.

The reads run on the session's finished CartPole run (tests/support/trained_run.py), which tests/test_policy.py
shares for agent(), export() and video(); the start side trains a run of its own from a spec file and stops it
while it trains. What other tests check in depth is not repeated: pause and resume of a live run
(tests/local/test_lifecycle.py), the comparison table (tests/test_compare.py), the notebook view
(tests/test_display.py), listing many runs (tests/local/test_listing.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from rlcloud import Experiment, Sweep
from rlcloud.comparison import time_to_threshold
from tests.support.waiting import eventually

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.training
@pytest.mark.processes
def test_a_finished_run_is_read_back_through_the_facade(trained: Experiment, tmp_path: Path) -> None:
    name, root = trained.name, trained.results_root
    assert trained.location == str(Path(root) / name)
    assert trained.backend.kind == "local" and trained.cluster is not None and trained.cluster.kind == "local"
    assert repr(trained) == f"Experiment(name='cp-policy', run_mode='single', on=local, results='{trained.location}')"
    status = trained.status()
    assert status.finished and status.state == "succeeded" and status.goal == ("timestep", 1500)
    assert status.progress.timestep is not None and status.progress.timestep >= 1500
    assert trained.wait(timeout=60).state == "succeeded"  # a finished run: at once
    assert "succeeded" in trained._repr_html_()
    lines = list(trained.logs())
    assert lines and all(line.startswith("single-0 | ") for line in lines)

    episodes = trained.metrics()
    assert len(episodes) == status.progress.episode and episodes["timestep"].is_monotonic_increasing
    # the run's row of compare(), its time to threshold from the same episodes as metrics() gives them
    row = trained.results(window=5, threshold=0.0).iloc[0]
    assert (row["run"], row["seed"], row["state"], row["timesteps"]) == (name, 5, "succeeded", status.progress.timestep)
    assert row["episodes"] == len(episodes) and row["threshold_timesteps"] == episodes["timestep"].iloc[4]
    records = episodes.to_dict(orient="records")
    assert (row["threshold_timesteps"], row["threshold_wall_time"]) == time_to_threshold(records, 0.0, window=5)

    figure = trained.plot(tmp_path / "returns.png", window=5)
    assert (tmp_path / "returns.png").read_bytes().startswith(PNG_MAGIC) and figure.axes

    copy = trained.download(tmp_path / "copy", progress=False)
    assert copy == tmp_path / "copy"
    for stored in ("spec.yaml", "metrics.jsonl", "checkpoints/LATEST"):
        assert (copy / stored).read_bytes() == (Path(trained.location) / stored).read_bytes(), stored

    # found again from its name alone, as another session (or machine) finds it
    assert Experiment.list(results=root) == [name]
    attached = Experiment.attach(name, results=root)
    assert attached.spec == trained.spec and attached.status().state == "succeeded"
    # stopping a finished run does nothing but say so, and still brings its results where asked
    assert attached.stop(dest=tmp_path / "here") is False
    assert attached.nothing_to_do == "cp-policy has finished (succeeded); nothing to stop"
    assert attached.results_here is not None and (attached.results_here / "metrics.jsonl").is_file()


@pytest.mark.training
@pytest.mark.processes
def test_a_spec_file_with_overrides_is_validated_started_once_and_stopped_while_it_trains(tmp_path: Path) -> None:
    overrides: dict[str, object] = {"name": "facade-live", "run_mode": "single", "num_workers": 1}
    exp = Experiment(EXAMPLE, results=str(tmp_path / "results"), total_timesteps=10_000_000, **overrides)
    assert (exp.name, exp.spec.run_mode, exp.spec.total_timesteps) == ("facade-live", "single", 10_000_000)
    exp.validate()  # builds the environment, agent and network here (the runner extra)
    assert exp.start() is exp and not exp.already_running
    eventually(lambda: (exp.status().progress.timestep or 0) > 0, timeout=600, what="the first training report")
    assert exp.start().already_running  # running already: nothing started twice
    assert exp.stop(dest=tmp_path / "here") is True
    assert exp.status().state == "stopped" and exp.results_here == tmp_path / "here"
    assert (exp.results_here / "checkpoints" / "LATEST").is_file()  # the stop's checkpoint, brought here


@pytest.mark.parametrize("facade", [Experiment, Sweep])
def test_a_facades_keyword_arguments_are_typed(facade: type) -> None:
    """No ``**kwargs: Any``: a caller's keyword names and types are checked (mypy), not lost in a bag."""
    untyped = [
        f"{facade.__name__}.{name}(**{p.name})"
        for name, member in inspect.getmembers(facade, inspect.isfunction)
        if name == "__init__" or not name.startswith("_")
        for p in inspect.signature(member).parameters.values()
        if p.kind is inspect.Parameter.VAR_KEYWORD and p.annotation in ("Any", inspect.Parameter.empty)
    ]
    assert untyped == []
