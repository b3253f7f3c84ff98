"""``sampler: tpe`` (rlcloud.specs.tpe, rlcloud.storage.journal): the spec's rules, the configuration a trial
asks its study for when it starts (the same when it runs again), and a warm pod's TPE sweep whose trials train
and tell the study their results."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import SpecError
from rlcloud.runner import main as runner_main
from rlcloud.specs.building import build_model
from rlcloud.specs.sweep import Distribution, SweepSpec
from rlcloud.storage import open_store
from rlcloud.storage.journal import open_study
from tests.support.kubernetes import make_spec
from tests.support.warm_sweep import _pod_args, _share

LR = {"agent.learning_rate": Distribution(loguniform=(1e-4, 1e-2)), "agent.batch_size": [2, 4]}


def _tpe(**extra: Any) -> SweepSpec:
    experiment = extra.pop("experiment", {})
    data: dict[str, Any] = {"name": "lr", "parameters": LR, "sampler": "tpe", "samples": 3, "seeds": [7]}
    return build_model(SweepSpec, {"experiment": make_spec(name="base", **experiment), **data, **extra})


def test_a_tpe_sweeps_trials_are_numbered_and_get_their_values_when_they_start() -> None:
    sweep = _tpe()
    assert sweep.trial_table() == [("tpe1", {}, 7), ("tpe2", {}, 7), ("tpe3", {}, 7)]
    assert SweepSpec.from_yaml_text(sweep.to_yaml()) == sweep


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"seeds": 3}, "one seed"),
        ({"samples": None}, "needs samples"),
        ({"objective": "evaluation"}, "objective must be mean_return"),
        ({"parameters": {"episodes": ["many"]}}, "episodes"),
    ],
)
def test_a_tpe_sweep_that_cannot_be_is_refused_naming_why(extra: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError, match=words) as exc:
        _tpe(**extra)
    assert any(p.field in ("sampler", "samples") for p in exc.value.problems), exc.value.problems


def test_without_optuna_a_tpe_sweep_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # what a machine without the extra finds
    with pytest.raises(SpecError, match=r"rlcloud\[optuna\]") as exc:
        _tpe()
    assert exc.value.problems[0].field == "sampler"


def test_a_tpe_sweep_is_refused_locally_before_anything_is_written(tmp_path: Path) -> None:
    from rlcloud.sweep import Sweep

    with pytest.raises(SpecError, match="Kubernetes") as exc:
        Sweep(_tpe(), results=str(tmp_path / "results")).start()
    assert exc.value.problems[0].field == "sampler"
    assert not (tmp_path / "results").exists()


def test_a_trial_asks_its_study_when_it_starts_and_again_gets_the_same(tmp_path: Path, pod_env: Path) -> None:
    sweep = _tpe(experiment={"saver_frequency": None})
    args = _pod_args(tmp_path, sweep, 1, 2)
    args.stride = None
    prepared = runner_main._prepare_trial(args)
    assert not isinstance(prepared, int)
    spec, _workdir = prepared
    stored = (pod_env / "tpe2" / "spec.yaml").read_text()
    study = open_study(open_store(str(pod_env)), "lr")
    (asked,) = study.get_trials()
    assert asked.user_attrs["rlcloud_trial"] == "tpe2" and asked.state.name == "RUNNING"
    rate = float(asked.params["agent.learning_rate"])
    assert spec.agent["learning_rate"] == rate and f"learning_rate: {rate}" in stored
    assert spec.agent["batch_size"] == [2, 4][asked.params["agent.batch_size"]]
    again = runner_main._prepare_trial(args)  # the trial runs again (a retry, another pod): the same values
    assert not isinstance(again, int) and again[0] == spec
    assert len(open_study(open_store(str(pod_env)), "lr").get_trials()) == 1


@pytest.mark.training
def test_a_warm_pods_tpe_trials_train_and_tell_the_study_their_mean_return(tmp_path: Path, pod_env: Path) -> None:
    import optuna

    sweep = _tpe(experiment={"episodes": None, "total_timesteps": 300, "saver_frequency": None,
                             "summary_frequency": None})  # fmt: skip
    args = _pod_args(tmp_path, sweep, 0, 1)
    args.claim = 30.0
    assert _share(args) == 0
    study = open_study(open_store(str(pod_env)), "lr")
    trials = {t.user_attrs["rlcloud_trial"]: t for t in study.get_trials()}
    assert sorted(trials) == ["tpe1", "tpe2", "tpe3"]
    for name, asked in trials.items():
        progress = json.loads((pod_env / name / "progress.json").read_text())
        assert asked.state == optuna.trial.TrialState.COMPLETE and progress["state"] == "succeeded"
        assert asked.value == pytest.approx(progress["mean_return"])
        assert f"learning_rate: {asked.params['agent.learning_rate']}" in (pod_env / name / "spec.yaml").read_text()
