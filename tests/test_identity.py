"""Run identity: a run keeps the spec it was created with; a start that would learn something else is refused
before anything is written, one that only changes how long/often/where resumes and is added to the history."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from rlcloud import Experiment, ExperimentSpec, SpecError, Sweep, SweepSpec
from rlcloud.cli import main
from rlcloud.errors import StorageError
from rlcloud.layout import HISTORY, SPEC, SWEEP_SPEC
from rlcloud.record import (
    check_resume,
    check_sweep_resume,
    create_record,
    read_history,
    start_sweep_recorded,
)
from rlcloud.specs.identity import (
    ChangedRunError,
    ChangedSweepError,
    diff_specs,
    diff_sweeps,
    fingerprint,
    split_changes,
)
from rlcloud.storage import open_store
from tests.fakes.gcs import FakeGcsServer
from tests.support.specs import CARTPOLE, cartpole_spec


def _spec(**overrides: object) -> ExperimentSpec:
    return cartpole_spec("ident", **{"total_timesteps": 600, **overrides})


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ------------------------------------------------------------------------------------------ pure rules


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seed": 2}, "seed"),
        ({"agent": {"type": "ppo", "batch_size": 10, "learning_rate": 3e-4}}, "agent.learning_rate"),
        ({"agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3, "discount": 0.9}}, "agent.discount"),
        ({"network": [{"type": "dense", "size": 32}]}, "network"),
        ({"environment": {"type": "gym", "level": "Acrobot-v1"}}, "environment.level"),
        ({"run_mode": "multi-threaded", "num_workers": 4}, "run_mode"),
        ({"max_timesteps_per_episode": 100}, "max_timesteps_per_episode"),
        ({"repeat_actions": 2}, "repeat_actions"),
        ({"deterministic": True}, "deterministic"),
    ],
)
def test_learning_changes_are_named(change: dict[str, object], field: str) -> None:
    learning, other = split_changes(diff_specs(_spec(), _spec(**change)))
    assert field in [c.field for c in learning]
    assert other == []
    assert fingerprint(_spec()) != fingerprint(_spec(**change))


@pytest.mark.parametrize(
    "change",
    [
        {"total_timesteps": 5000},
        {"episodes": 50},
        {"saver_frequency": "30s"},
        {"summary_frequency": "100t"},
        {"evaluation": {"every": "10e", "episodes": 2}},
        {"resources": {"learner": {"cpu": "2"}}},
        {"image": "ghcr.io/me/rl:2"},
        {"results": "gs://bucket/x"},
        {"debug_logging": True},
        {"description": "longer"},
    ],
)
def test_budget_and_placement_changes_are_allowed(change: dict[str, object]) -> None:
    learning, other = split_changes(diff_specs(_spec(), _spec(**change)))
    assert learning == []
    assert other
    assert fingerprint(_spec()) == fingerprint(_spec(**change))


def test_only_overlapped_execution_changes_what_is_learned() -> None:
    # overlapped gives every env server two environments (twice the agent's rows); the others step the same
    distributed = _spec(run_mode="distributed", num_workers=2)
    overlapped = _spec(run_mode="distributed", num_workers=2, execution="overlapped")
    learning, _ = split_changes(diff_specs(distributed, overlapped))
    assert [c.field for c in learning] == ["execution"]
    assert fingerprint(distributed) != fingerprint(overlapped)
    synchronous = _spec(run_mode="distributed", num_workers=2, execution="synchronous")
    assert split_changes(diff_specs(distributed, synchronous))[0] == []
    batched, processes = (
        _spec(run_mode="multi-threaded", num_workers=4, execution=e) for e in ("batched", "processes")
    )
    learning, other = split_changes(diff_specs(batched, processes))
    assert learning == [] and [c.field for c in other] == ["execution"]
    assert fingerprint(batched) == fingerprint(processes)


def test_environments_per_server_are_a_learning_field_that_left_old_fingerprints_alone() -> None:
    two = _spec(run_mode="distributed", num_workers=2, execution="overlapped")
    three = _spec(run_mode="distributed", num_workers=2, execution="overlapped", envs_per_server=3)
    learning, _ = split_changes(diff_specs(two, three))
    assert [c.field for c in learning] == ["envs_per_server"]
    assert fingerprint(two) != fingerprint(three)
    # the fingerprints rlcloud gave these specs before envs_per_server existed (sweeps compare them)
    assert fingerprint(_spec()) == "27ad9acaa6ac8b45"
    assert fingerprint(_spec(run_mode="distributed", num_workers=2)) == "d2343fa468bb1aea"


def test_a_record_is_compared_as_stored(tmp_path: Path) -> None:
    store = open_store(tmp_path / "run")
    assert check_resume(store, _spec()) is None
    assert create_record(store, _spec())
    assert not create_record(store, _spec(seed=9))  # never replaced
    assert check_resume(store, _spec()) == []
    assert [c.field for c in check_resume(store, _spec(total_timesteps=900)) or []] == ["total_timesteps"]
    with pytest.raises(ChangedRunError) as info:
        check_resume(store, _spec(seed=2, agent={"type": "ppo", "batch_size": 10, "learning_rate": 3e-4}))
    message = str(info.value)
    assert "seed: 1 (recorded) -> 2 (now)" in message
    assert "agent.learning_rate: 0.001 (recorded) -> 0.0003 (now)" in message
    assert "new name" in message and "sweep" in message
    assert info.value.fields == ["agent.learning_rate", "seed"]
    assert isinstance(info.value, SpecError)


@pytest.mark.parametrize(
    ("change", "field"),
    [({"total_timesteps": 5000}, "total_timesteps"), ({"total_timesteps": None, "episodes": 40}, "episodes")],
)
def test_a_resume_below_what_was_trained_is_refused_saying_so(
    tmp_path: Path, change: dict[str, object], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(tmp_path / "ident")
    create_record(store, _spec(total_timesteps=72_000))
    store.write_text("progress.json", '{"state": "succeeded", "timestep": 72000, "episode": 366}')
    with pytest.raises(SpecError) as info:
        check_resume(store, _spec(**change))
    assert [p.field for p in info.value.problems] == [field]
    assert "has trained" in str(info.value) and ("72,000" in str(info.value) or "366" in str(info.value))
    # a budget past what was trained, or the same one, resumes as before
    assert [c.field for c in check_resume(store, _spec(total_timesteps=100_000)) or []] == ["total_timesteps"]
    assert check_resume(store, _spec(total_timesteps=72_000)) == []
    # the CLI: exit 2 naming the flag, nothing written
    before = _tree(tmp_path)
    spec_file = tmp_path / "ident.yaml"
    spec_file.write_text(_spec(total_timesteps=72_000).to_yaml())
    sets = [f"--set={key}={'null' if value is None else value}" for key, value in change.items()]
    code = main(["experiment", "start", str(spec_file), *sets, "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "nothing to train" in err, err
    assert _tree(tmp_path) == {**before, "ident.yaml": hashlib.sha256(spec_file.read_bytes()).hexdigest()}


# ------------------------------------------------------------------- through the facade, with real runs


def test_changed_spec_is_refused_before_anything_starts(tmp_path: Path) -> None:
    root = tmp_path / "results"
    store = open_store(root / "ident")
    create_record(store, _spec())
    before = _tree(root)
    exp = Experiment(_spec(network=[{"type": "dense", "size": 8}]), results=str(root))
    with pytest.raises(ChangedRunError, match="network"):
        exp.start(validate=False)
    assert _tree(root) == before  # nothing written, nothing started
    assert not (root / "ident" / ".rlcloud-local").exists()


def test_changed_spec_is_refused_with_gcs_results(
    gcs_bucket: str, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    root = f"gs://{gcs_bucket}/runs"
    create_record(open_store(root + "/ident"), _spec())
    with pytest.raises(ChangedRunError, match="seed"):
        Experiment(_spec(seed=5), results=root).start(validate=False)
    assert read_history(open_store(root + "/ident")) == []


@pytest.mark.training
def test_rerun_resumes_extends_and_refuses(tmp_path: Path) -> None:
    root = tmp_path / "results"
    first = Experiment(_spec(), results=str(root)).start()
    assert first.wait(timeout=300).state == "succeeded"
    location = root / "ident"
    record = (location / SPEC).read_bytes()

    # a different seed and learning rate: refused, and the first run's files stay byte-identical
    before = _tree(location)
    with pytest.raises(ChangedRunError):
        Experiment(
            _spec(seed=2, agent={"type": "ppo", "batch_size": 10, "learning_rate": 3e-4}), results=str(root)
        ).start()
    assert _tree(location) == before

    # a longer budget resumes from the checkpoint and is recorded in the history
    longer = Experiment(_spec(total_timesteps=1200), results=str(root)).start()
    status = longer.wait(timeout=300)
    assert status.state == "succeeded"
    assert status.progress["timestep"] >= 1200
    assert (location / SPEC).read_bytes() == record
    history = read_history(open_store(location))
    assert [h["event"] for h in history] == ["created", "resumed"]
    assert history[1]["changes"] == [{"field": "total_timesteps", "from": 600, "to": 1200}]
    assert (location / HISTORY).exists()


# ------------------------------------------------------------------------------------------- sweeps


def _sweep_spec(**fields: object) -> SweepSpec:
    data: dict[str, object] = {
        "name": "sw",
        "experiment": {
            "name": "base",
            "environment": CARTPOLE,
            "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
            "network": "auto",
            "total_timesteps": 600,
        },
        "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
        "seeds": 2,
    }
    data.update(fields)
    return SweepSpec.from_dict(data)


def _with_experiment(**changes: object) -> dict[str, object]:
    base = _sweep_spec().experiment.model_dump(mode="json")
    return {"experiment": {**base, **changes}}


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (_with_experiment(network=[{"type": "dense", "size": 8}]), "experiment.network"),
        (
            _with_experiment(agent={"type": "ppo", "batch_size": 20, "learning_rate": 1e-3}),
            "experiment.agent.batch_size",
        ),
        (_with_experiment(environment={"type": "gym", "level": "Acrobot-v1"}), "experiment.environment.level"),
        (_with_experiment(max_timesteps_per_episode=50), "experiment.max_timesteps_per_episode"),
        ({"parameters": {"agent.learning_rate": [1e-3, 1e-4]}}, "parameters.agent.learning_rate"),
        (
            {"parameters": {"agent.learning_rate": [1e-3, 3e-4], "agent.batch_size": [5, 10]}},
            "parameters.agent.batch_size",
        ),
        ({"parameters": {"agent.learning_rate": {"loguniform": [1e-4, 1e-2]}}, "samples": 2}, "samples"),
        ({"seeds": 3}, "seeds"),
        ({"seeds": [1, 7]}, "seeds"),
    ],
)
def test_a_sweep_with_other_trials_is_named_field_by_field(fields: dict[str, object], named: str) -> None:
    refused, _ = diff_sweeps(_sweep_spec(), _sweep_spec(**fields))
    assert named in [c.field for c in refused]


@pytest.mark.parametrize(
    "fields",
    [
        {"max_parallel": 1},
        {"objective": "evaluation"},
        {"description": "longer"},
        {"early_stopping": {"grace_timesteps": 100}},
        {"seeds": [1, 2]},  # the same seeds as 2
        _with_experiment(total_timesteps=5000, saver_frequency=None),
    ],
)
def test_a_sweep_may_change_how_long_and_how_many_at_once(fields: dict[str, object]) -> None:
    refused, _ = diff_sweeps(_sweep_spec(), _sweep_spec(**fields))
    assert refused == []
    stored = yaml.safe_load(_sweep_spec().to_yaml())  # compared as stored, too
    assert diff_sweeps(stored, _sweep_spec(**fields))[0] == []


def _record_sweep(root: Path, spec: SweepSpec) -> None:
    """What a first start leaves: the sweep of record and a history line (the backend's start not run)."""
    assert start_sweep_recorded(open_store(root / spec.name), spec, lambda: True, where="earlier") is True


def test_a_changed_sweep_is_refused_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "results"
    _record_sweep(root, _sweep_spec())
    before = _tree(root)
    for fields in (
        _with_experiment(network=[{"type": "dense", "size": 8}]),
        {"parameters": {"agent.learning_rate": [1e-3, 1e-4]}},
        {"seeds": 3},
    ):
        with pytest.raises(ChangedSweepError) as caught:
            Sweep(_sweep_spec(**fields), results=str(root)).start(validate=False)
        assert "sweep 'sw' already exists" in str(caught.value) and "--name sw-2" in str(caught.value)
    assert _tree(root) == before  # nothing written, no scheduler started
    # the same through the CLI: exit 2, every changed field named, no traceback
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump(_with_experiment(network=[{"type": "dense", "size": 8}])["experiment"]))
    code = main(
        ["sweep", "start", str(experiment), "--name", "sw", "--grid", "agent.learning_rate=0.001,0.0001",
         "--seeds", "2", "--results", str(root)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "experiment.network" in err and "parameters.agent.learning_rate" in err
    assert _tree(root) == before
    # what may change is recorded as a resume of the same sweep
    _record_sweep(root, _sweep_spec(max_parallel=1))
    history = read_history(open_store(root / "sw"))
    assert [h["event"] for h in history] == ["created", "resumed"]
    assert history[1]["changes"] == [{"field": "max_parallel", "from": None, "to": 1}]
    assert history[0]["fingerprint"] == history[1]["fingerprint"]


def test_a_changed_sweep_is_refused_on_gcs_results(
    gcs_bucket: str, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    root = f"gs://{gcs_bucket}/runs"
    assert start_sweep_recorded(open_store(root + "/sw"), _sweep_spec(), lambda: True, where="earlier")
    with pytest.raises(ChangedSweepError, match=r"experiment\.agent\.batch_size"):
        Sweep(
            _sweep_spec(**_with_experiment(agent={"type": "ppo", "batch_size": 20, "learning_rate": 1e-3})),
            results=root,
        ).start(validate=False)
    assert len(read_history(open_store(root + "/sw"))) == 1
    with pytest.raises(StorageError, match="not a sweep"):  # a record that is no mapping is named, not used
        store = open_store(root + "/sw")
        store.write_text(SWEEP_SPEC, "- a list\n")
        check_sweep_resume(store, _sweep_spec())
