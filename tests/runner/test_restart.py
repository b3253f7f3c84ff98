"""A restarted run's record continues from the checkpoint it resumes (or from empty without one), and a
latest checkpoint that cannot be restored falls back to the previous complete one. Real Tensorforce runs
(CartPole PPO, small budgets); the dead attempts are real runner processes killed with SIGKILL."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from rlcloud.runner.loop import CheckpointError, Trainer, latest_checkpoint, read_jsonl, restorable_checkpoints
from tests.support.runner import checkpoint_state, make_spec, run_runner, wait_for


def _assert_one_record(workdir: Path) -> list[dict[str, object]]:
    """Episodes numbered 1..N once each, timesteps never going backwards."""
    records = read_jsonl(workdir / "metrics.jsonl")
    assert [r["episode"] for r in records] == list(range(1, len(records) + 1))
    steps = [r["timestep"] for r in records]
    assert steps == sorted(steps), steps
    return records


def _kill_after(workdir: Path, spec_kwargs: dict[str, object], episodes: int) -> None:
    """A real runner that dies (SIGKILL) once it has logged ``episodes`` episodes."""
    proc = run_runner(make_spec(**spec_kwargs), workdir)  # type: ignore[arg-type]
    try:
        wait_for(lambda: len(read_jsonl(workdir / "metrics.jsonl")) >= episodes, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


@pytest.mark.training
def test_a_run_restarted_before_its_first_checkpoint_starts_its_record_over(tmp_path: Path) -> None:
    _kill_after(tmp_path, {"total_timesteps": 10_000_000, "saver_frequency": None}, episodes=19)
    assert latest_checkpoint(tmp_path) is None and len(read_jsonl(tmp_path / "metrics.jsonl")) >= 19
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["timestep"] > 0  # what the dead attempt reached
    trainer = Trainer(make_spec(total_timesteps=300), tmp_path)
    trainer._mark_starting()  # while starting, progress shows where the run resumes: the beginning
    assert json.loads((tmp_path / "progress.json").read_text())["timestep"] == 0
    result = trainer.run()
    assert result.state == "succeeded" and result.timesteps == 300
    records = _assert_one_record(tmp_path)
    assert records[-1]["timestep"] <= 300  # none of the dead attempt's episodes is left


@pytest.mark.training
def test_a_restart_drops_records_past_the_checkpoint_by_episode_and_by_timestep(tmp_path: Path) -> None:
    assert Trainer(make_spec(total_timesteps=500), tmp_path).run().state == "succeeded"
    state = checkpoint_state(tmp_path)
    assert state is not None and state["timestep"] == 500
    with (tmp_path / "metrics.jsonl").open("a") as fh:  # what a dead attempt after the checkpoint left
        fh.write(json.dumps({"episode": state["episode"] + 1, "timestep": 520, "return": 1.0}) + "\n")
        fh.write(json.dumps({"episode": 1, "timestep": 99_999, "return": 1.0}) + "\n")  # past it by timestep
        fh.write(json.dumps({"episode": "x", "timestep": 510, "return": 1.0}) + "\n")  # not a record at all
        fh.write('{"episode": 99, "timest')  # torn
    with (tmp_path / "evaluation.jsonl").open("a") as fh:
        fh.write(json.dumps({"at_episode": 1, "at_timestep": 600, "return": 1.0}) + "\n")
    result = Trainer(make_spec(total_timesteps=800), tmp_path).run()
    assert result.timesteps == 800
    records = _assert_one_record(tmp_path)
    assert all(r["timestep"] <= 800 for r in records)
    assert all(r["at_timestep"] <= 800 for r in read_jsonl(tmp_path / "evaluation.jsonl"))


def _corrupt(checkpoint: Path, how: str) -> None:
    if how == "truncated-data":
        (data,) = checkpoint.glob("agent*.data-*")
        data.write_bytes(data.read_bytes()[:16])
    elif how == "garbage-index":
        (index,) = checkpoint.glob("agent*.index")
        index.write_bytes(b"\x00not an index" * 10)
    elif how == "broken-state":
        (checkpoint / "state.json").write_text('{"timestep": 12')
    elif how == "wrong-state":
        (checkpoint / "state.json").write_text('{"timestep": "soon", "episode": []}')


@pytest.mark.training
@pytest.mark.parametrize("how", ["truncated-data", "garbage-index", "broken-state", "wrong-state"])
def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous_one(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert Trainer(make_spec(total_timesteps=600, saver_frequency="200t"), tmp_path).run().state == "succeeded"
    names = restorable_checkpoints(tmp_path)
    assert names == ["ckpt-000000000600", "ckpt-000000000400", "ckpt-000000000200"]
    _corrupt(tmp_path / "checkpoints" / names[0], how)
    with caplog.at_level(logging.INFO, logger="rlcloud.runner.loop"):
        trainer = Trainer(make_spec(total_timesteps=800, saver_frequency="200t"), tmp_path)
        trainer.setup()
    assert trainer.counters["timestep"] == 400
    assert "resumed from the previous complete checkpoint ckpt-000000000400 instead" in caplog.text
    assert f"checkpoint {names[0]} cannot be restored" in caplog.text
    assert latest_checkpoint(tmp_path) == "ckpt-000000000400"
    assert (tmp_path / "checkpoints" / f".unreadable-{names[0]}").is_dir()  # set aside, not deleted
    result = trainer.run()
    assert result.state == "succeeded" and result.timesteps == 800
    _assert_one_record(tmp_path)


@pytest.mark.training
def test_no_readable_checkpoint_fails_clearly_and_trains_nothing(tmp_path: Path) -> None:
    assert Trainer(make_spec(total_timesteps=400, saver_frequency="200t"), tmp_path).run().state == "succeeded"
    for name in restorable_checkpoints(tmp_path):
        _corrupt(tmp_path / "checkpoints" / name, "truncated-data")
    before = (tmp_path / "metrics.jsonl").read_text()
    with pytest.raises(CheckpointError, match="none of the 2 checkpoint") as caught:
        Trainer(make_spec(total_timesteps=800), tmp_path).setup()
    assert "ckpt-000000000400" in str(caught.value) and "ckpt-000000000200" in str(caught.value)
    assert (tmp_path / "metrics.jsonl").read_text() == before  # nothing dropped, nothing set aside
    assert restorable_checkpoints(tmp_path) == ["ckpt-000000000400", "ckpt-000000000200"]
    # the runner process: exit 3 with that message, no traceback
    proc = run_runner(make_spec(total_timesteps=800), tmp_path)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 3, output
    assert "none of the 2 checkpoint(s)" in output and "Traceback" not in output


@pytest.mark.training
def test_a_fresh_pod_falls_back_to_an_earlier_stored_checkpoint(fake_gcs: Any, gcs_bucket: str, tmp_path: Path) -> None:
    from rlcloud.storage.gcs import GcsStore

    # a first pod's work, synced: three checkpoints in the store, the latest of them corrupt there
    first = tmp_path / "pod-1"
    assert Trainer(make_spec(total_timesteps=600, saver_frequency="200t"), first).run().state == "succeeded"
    store = GcsStore(gcs_bucket, "cartpole", client=fake_gcs.client(), retry_initial_s=0.05)
    files = [p for p in first.rglob("*") if p.is_file() and not p.name.startswith(".")]
    store.upload_files([(p, p.relative_to(first).as_posix()) for p in files])  # what three syncs left there
    (data,) = (first / "checkpoints" / "ckpt-000000000600").glob("agent*.data-*")
    store.write_bytes(f"checkpoints/ckpt-000000000600/{data.name}", data.read_bytes()[:16])
    env = {**os.environ, **fake_gcs.env, "RLCLOUD_RESULTS": f"gs://{gcs_bucket}/cartpole"}
    second = tmp_path / "pod-2"  # a fresh pod: only the latest checkpoint is restored into it at first
    proc = run_runner(make_spec(total_timesteps=800, saver_frequency="200t"), second, env=env)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    assert "trying the earlier checkpoint(s) ckpt-000000000400, ckpt-000000000200" in output, output
    assert "resumed from the previous complete checkpoint ckpt-000000000400 instead" in output, output
    assert store.read_text("checkpoints/LATEST").strip() == "ckpt-000000000800"
    records = [json.loads(line) for line in store.read_text("metrics.jsonl").splitlines() if line]
    assert [r["episode"] for r in records] == list(range(1, len(records) + 1))
