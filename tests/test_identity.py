"""Run identity: a run keeps the spec it was created with; a start that would learn something else is refused
before anything is written, one that only changes how long/often/where resumes and is added to the history."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from rlcloud import Experiment, ExperimentSpec, SpecError
from rlcloud.record import HISTORY_FILE, SPEC_FILE, check_resume, create_record, read_history
from rlcloud.specs.identity import ChangedRunError, diff_specs, fingerprint, split_changes
from rlcloud.storage import open_store
from tests.fakes.gcs import FakeGcsServer

CARTPOLE = {"type": "gym", "level": "CartPole-v1"}


def _spec(**overrides: object) -> ExperimentSpec:
    data: dict[str, object] = {
        "name": "ident",
        "environment": CARTPOLE,
        "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
        "network": "auto",
        "total_timesteps": 600,
        "seed": 1,
        **overrides,
    }
    return ExperimentSpec.from_dict(data)


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
    record = (location / SPEC_FILE).read_bytes()

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
    assert (location / SPEC_FILE).read_bytes() == record
    history = read_history(open_store(location))
    assert [h["event"] for h in history] == ["created", "resumed"]
    assert history[1]["changes"] == [{"field": "total_timesteps", "from": 600, "to": 1200}]
    assert (location / HISTORY_FILE).exists()
