"""The Kubernetes path end to end with the real runner: KubernetesBackend -> fake apiserver -> fake
kubelet -> ``python -m rlcloud.runner`` processes -> results in fake-gcs-server."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from kubernetes import client

from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.storage import open_store, read_metrics
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import FAST_RETRY, make_spec


def _timestep(tmp_path: Path) -> int:
    for path in (tmp_path / "pods" / "rl").glob("dist-k8s-agent-*/volumes/work/work/progress.json"):
        try:
            return int(json.loads(path.read_text()).get("timestep", 0))
        except (OSError, ValueError):
            return 0
    return 0


@pytest.mark.processes
@pytest.mark.training
def test_distributed_cartpole_trains_through_kubernetes_and_survives_a_killed_env_server(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, gcs: FakeGcsServer, tmp_path: Path
) -> None:
    bucket = gcs.create_bucket()
    root = f"gs://{bucket}/runs"
    spec = make_spec(
        "distributed",
        2,
        name="dist-k8s",
        episodes=None,
        total_timesteps=3000,
        seed=1,
        agent={"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
    )
    backend = KubernetesBackend(api_client, namespace="rl", image="rlcloud:test", retry=FAST_RETRY, poll_interval=0.5)
    backend.start(spec, root)
    env = {**gcs.env, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=60) as kubelet:
        deadline = time.monotonic() + 400
        while _timestep(tmp_path) < 400:  # read in the agent pod's workdir: it is there first
            status = backend.status("dist-k8s")
            assert not status.finished, status
            assert time.monotonic() < deadline, f"training did not start: {status}"
            time.sleep(0.5)
        victim = next(p for p in kubelet.running("rlcloud.io/role=env-server") if p.startswith("dist-k8s-env-1-"))
        kubelet.kill(victim)
        final = backend.wait("dist-k8s", timeout=400)
        logs = list(backend.logs("dist-k8s"))
    assert final.state == "succeeded", (final, logs[-40:])
    # the Job brought index 1 back under the same DNS name (a new pod), and the agent reconnected to it
    assert (("rl", victim, 137)) in kubelet.exits
    index_1 = [pod for _, pod in kubelet.started if pod.startswith("dist-k8s-env-1-")]
    assert len(index_1) == 2 and index_1[0] == victim
    assert {r.state for r in final.roles} == {"succeeded"}
    agent_log = "\n".join(line for line in logs if line.startswith("agent-0 | "))
    assert "env server dist-k8s-env-1.dist-k8s-env:5000 (127.0.0.1:" in agent_log, agent_log[-3000:]
    assert re.search(r"dist-k8s-env-1\.dist-k8s-env:5000 \(127\.0\.0\.1:\d+\) lost", agent_log)
    assert re.search(r"dist-k8s-env-1\.dist-k8s-env:5000 \(127\.0\.0\.1:\d+\) is back", agent_log)
    assert "no results syncer is installed" not in agent_log
    # results are in (fake) GCS, under <root>/<name>
    store = open_store(f"{root}/dist-k8s")
    progress = json.loads(store.read_text("progress.json"))
    assert progress["state"] == "succeeded" and progress["timestep"] >= 3000
    records = read_metrics(store)
    assert {r["worker"] for r in records} == {0, 1}
    print(f"k8s distributed PPO: {len(records)} episodes, {progress['timestep']} timesteps")


@pytest.mark.processes
@pytest.mark.training
def test_pause_checkpoints_to_gcs_and_resume_continues_with_the_real_runner(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, gcs: FakeGcsServer, tmp_path: Path
) -> None:
    bucket = gcs.create_bucket()
    root = f"gs://{bucket}/runs"
    # long enough that the pause lands mid-run on a fast learner (Eigen kernels: 2,500 finished before it)
    spec = make_spec(name="pausable", episodes=None, total_timesteps=8000, seed=2)
    backend = KubernetesBackend(api_client, namespace="rl", image="rlcloud:test", retry=FAST_RETRY, poll_interval=0.5)
    backend.start(spec, root)
    env = {**gcs.env, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "RLCLOUD_SYNC_INTERVAL": "1"}
    store = open_store(f"{root}/pausable")
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=120) as kubelet:
        deadline = time.monotonic() + 300
        while backend.status("pausable").progress.get("timestep", 0) < 300:
            assert time.monotonic() < deadline, backend.status("pausable")
            time.sleep(0.5)
        backend.pause("pausable")
        # the SIGTERM checkpoint is in the store before pause() returns, and nothing runs any more
        latest = store.read_text("checkpoints/LATEST").strip()
        assert latest and store.exists(f"checkpoints/{latest}/state.json")
        paused = backend.status("pausable")
        assert paused.state == "paused" and not kubelet.running()
        assert [code for _, _, code in kubelet.exits] == [143]
        backend.resume("pausable")
        final = backend.wait("pausable", timeout=300)
        logs = list(backend.logs("pausable"))
    assert final.state == "succeeded", logs[-30:]
    assert final.roles[0].restarts == 0  # suspension is not a failure
    assert any(f"resumed from checkpoint {latest}" in line for line in logs), logs[-30:]
    progress = json.loads(store.read_text("progress.json"))
    assert progress["state"] == "succeeded" and progress["timestep"] >= 2500
