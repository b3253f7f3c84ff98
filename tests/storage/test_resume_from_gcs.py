"""A runner trains with its results in GCS and is killed; a second runner on an empty work directory
(a new pod) resumes from the latest complete checkpoint in GCS and finishes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rlcloud.storage.gcs import GcsStore
from rlcloud.storage.sync import read_latest


def start_runner(spec_path: Path, workdir: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "rlcloud.runner", "--role", "single", "--index", "0"]
    command += ["--spec", str(spec_path), "--workdir", str(workdir)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def published_state(store: GcsStore) -> dict[str, Any] | None:
    latest = read_latest(store)
    if latest is None:
        return None
    return json.loads(store.read_text(f"checkpoints/{latest[0]}/state.json"))


@pytest.mark.training
def test_killed_runner_resumes_from_gcs_on_an_empty_workdir(fake_gcs: Any, gcs_bucket: str, tmp_path: Path) -> None:
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec(
        name="cartpole",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
        seed=7,
        total_timesteps=2000,
        saver_frequency="300t",
    )
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(spec.to_yaml())
    env = {
        **os.environ,
        **fake_gcs.env,
        "RLCLOUD_RESULTS": f"gs://{gcs_bucket}/cartpole",
        "RLCLOUD_SYNC_INTERVAL": "0.5",
    }
    store = GcsStore(gcs_bucket, "cartpole", client=fake_gcs.client(), retry_initial_s=0.05)

    first = start_runner(spec_path, tmp_path / "pod-1", env)
    try:
        deadline = time.monotonic() + 300
        while (published_state(store) or {}).get("timestep", 0) < 600:
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            assert time.monotonic() < deadline, "runner 1 never published a checkpoint at >= 600 steps"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        if first.stdout:
            first.stdout.close()
    killed_at = published_state(store)
    assert killed_at is not None

    second = start_runner(spec_path, tmp_path / "pod-2", env)  # a fresh pod: nothing local
    output, _ = second.communicate(timeout=300)
    assert second.returncode == 0, output
    assert f"resumed from checkpoint {killed_at['name']}" in output, output

    progress = json.loads(store.read_text("progress.json"))
    assert progress["state"] == "succeeded" and progress["timestep"] == 2000
    records = [json.loads(line) for line in store.read_text("metrics.jsonl").splitlines() if line]
    # one run's history: every episode once, in order, the resumed ones after the checkpoint's
    assert [r["episode"] for r in records] == list(range(1, len(records) + 1))
    resumed = [r for r in records if r["episode"] > killed_at["episode"]]
    assert resumed and resumed[0]["timestep"] > killed_at["timestep"]
    latest = read_latest(store)
    assert latest is not None and latest[0] != killed_at["name"]  # runner 2 published its own since
