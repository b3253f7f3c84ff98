"""Money budgets on this machine: training time x processes x rlcloud.yaml's cpu_hour_usd, enforced by the
learner's supervisor with the real runner (it checkpoints on SIGTERM)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rlcloud.experiment import Experiment
from rlcloud.local import LocalBackend
from rlcloud.specs import ExperimentSpec
from tests.local.test_lifecycle import make_backend, standin_python  # noqa: F401  (fixtures)


def _spec(name: str, **overrides: object) -> ExperimentSpec:
    data: dict[str, object] = {
        "name": name,
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
        "total_timesteps": 10_000_000,  # never reached: the budget ends it
        "saver_frequency": "10000s",  # no periodic checkpoint: the one found is the SIGTERM's
        "seed": 1,
        **overrides,
    }
    return ExperimentSpec.from_dict(data)


@pytest.mark.training
def test_a_real_local_run_is_checkpointed_and_stopped_at_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # its own rlcloud.yaml
    # $36 a CPU-hour: a cent of budget is one second of training (the runner reports every second)
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 36\n", encoding="utf-8")
    results = tmp_path / "results"
    experiment = Experiment(_spec("capped", budget="0.04 USD"), results=str(results)).start()
    final = experiment.wait(timeout=300)
    assert final.state == "stopped"
    assert final.message is not None and "stopped by its budget" in final.message and "budget reached" in final.message
    progress = json.loads((results / "capped" / "progress.json").read_text())
    # stopped once 4 s of training were reported (the SIGTERM checkpoint's own time comes on top), checkpointed
    assert progress["elapsed"] >= 4.0 and progress["state"] == "stopped", progress
    assert progress["checkpoint"] and (results / "capped" / "checkpoints" / "LATEST").exists()
    # status shows the budget and the cost so far (training time x $36/h)
    vitals = experiment.status().to_dict()["vitals"]
    assert vitals["budget_usd"] == 0.04 and vitals["cost_usd"] >= 0.04 and vitals["budget_percent"] >= 100


def test_without_a_rate_local_runs_are_free_and_the_budget_never_acts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    from rlcloud.local.backend import _budget_options, local_run_price

    spec = _spec("free", budget=1)
    assert local_run_price(spec) is None and _budget_options(spec) == []
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 0.5\n", encoding="utf-8")
    distributed = _spec("d", budget=1, run_mode="distributed", num_workers=3)
    assert local_run_price(distributed) == 2.0  # the learner and 3 env servers
    assert _budget_options(distributed) == ["--budget-usd", "1.00", "--price-per-hour", "2.0"]


@pytest.mark.processes
def test_the_supervisor_warns_once_at_90_percent_then_stops_every_role(
    make_backend: Callable[..., LocalBackend],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stand-in reports 0.05 s of training per episode: at $36 an hour and 2 processes, $0.20 lasts 10 s."""
    monkeypatch.chdir(tmp_path)
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 36\n", encoding="utf-8")
    backend = make_backend(STANDIN_EPISODES="100000", STANDIN_DELAY="0.05")
    spec = _spec("capped-two", budget=0.20, run_mode="distributed", num_workers=1)
    backend.start(spec, str(tmp_path / "results"))
    final = backend.wait("capped-two", timeout=120)
    workdir = tmp_path / "results" / "capped-two"
    log = (workdir / "logs" / "agent-0.log").read_text()
    assert final.state == "stopped" and "stopped by its budget" in (final.message or ""), log
    assert log.count("agent-0 budget: cost so far") == 1 and "it stops at 100%" in log  # the warning, once
    assert "checkpointing and stopping the run" in log and "stopped: checkpoint ckpt-" in log
    assert (workdir / "checkpoints" / "LATEST").exists()
    # the env server was stopped as a stop stops it, not failed
    assert {r.role: r.state for r in final.roles} == {"agent": "succeeded", "env-server": "succeeded"}


@pytest.mark.training
def test_a_local_sweep_over_its_budget_stops_its_trial_and_starts_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud import Sweep, SweepSpec

    monkeypatch.chdir(tmp_path)
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 36\n", encoding="utf-8")
    spec = SweepSpec(
        name="capped-sweep",
        experiment=_spec("base"),
        parameters={"agent.learning_rate": [1e-3, 3e-4]},
        seeds=2,
        max_parallel=1,
        budget="0.04 USD",  # type: ignore[arg-type]
    )
    sweep = Sweep(spec, results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=600)
    assert status.state == "stopped" and "stopped by its budget" in (status.message or ""), status.message
    counts = status.counts()
    assert counts == {"stopped": 1, "queued": 3}, counts
    first = status.trials[0] if status.trials[0].state == "stopped" else status.trials[1]
    assert (tmp_path / "results" / "capped-sweep" / first.name / "checkpoints" / "LATEST").exists()
    vitals = sweep.status().vitals
    assert vitals["budget_usd"] == 0.04 and vitals["budget_percent"] is not None and vitals["budget_percent"] >= 100
