"""Stalled learners on Kubernetes (issue 30), against the fake kube-apiserver and kubelet, laptop closed.

The learner pod runs the stand-in runner with the real runner's stall watchdog (``STANDIN_WATCHDOG``): when
its episodes stop, the watchdog ends the pod with exit code 88 and the Job (its podFailurePolicy counts that
as an ordinary retry) starts a new pod, which resumes from the latest checkpoint; a pod started after a stall
that stalls too exits 89, which the podFailurePolicy turns into a failed Job. Nothing polls from this side
but the test's own reads: the fake Job controller does what the real one would.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes import client

from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.builders import build_workloads
from rlcloud.k8s.status import role_statuses
from rlcloud.runner.remote import RemoteVectorEnv
from rlcloud.runner.watchdog import EXIT_STALLED, EXIT_STALLED_AGAIN
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import kubelet_for, make_backend, make_spec
from tests.support.waiting import eventually


@pytest.fixture
def backend(api_client: client.ApiClient) -> KubernetesBackend:
    return make_backend(api_client)


def _env(**extra: str) -> dict[str, str]:
    base = {"STANDIN_EPISODES": "6", "STANDIN_DELAY": "0.05", "STANDIN_HANG_AFTER": "2", "STANDIN_WATCHDOG": "1"}
    return {**base, "STANDIN_STALL_TIMEOUT": "2", **extra}


@pytest.mark.processes
def test_a_stalled_learner_pod_is_restarted_from_its_checkpoint_once_and_finishes(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path
) -> None:
    results = str(tmp_path / "results")
    backend.start(make_spec("single", stall_timeout="2s"), results)
    with kubelet_for(apiserver, tmp_path, **_env(STANDIN_HANG_ONCE="1")) as kubelet:
        final = backend.wait("cartpole", timeout=90)
        codes = [code for _, pod, code in kubelet.exits if pod.startswith("cartpole-single")]
    assert final.state == "succeeded", final.message
    assert codes == [EXIT_STALLED, 0]  # the stall was the pod's own doing, then a whole run
    assert final.restarts == 1 and final.roles[0].restarts == 1
    log = backend_log(tmp_path)
    assert "stalled: no timestep for" in log and "restarts from its latest checkpoint" in log
    assert "resumed from ckpt-2" in log  # the checkpoint of the episode before the hang: nothing redone
    progress = json.loads((Path(results) / "cartpole" / "progress.json").read_text())
    assert progress["state"] == "succeeded" and progress["episode"] == 6


@pytest.mark.processes
@pytest.mark.slow
def test_a_learner_hung_holding_the_gil_is_killed_by_its_liveness_probe_and_retried(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path
) -> None:
    """The hang holds the GIL, so the watchdog's thread never runs: its heartbeat file (in the pod's work
    directory) ages, and the learner container's exec liveness probe (stall_timeout + 30 s) fails; the kubelet
    kills the container (SIGKILL after the grace period: no handler runs either), the Job retries the pod
    (exit 137, counted) and the new pod resumes from the checkpoint and finishes."""
    results = str(tmp_path / "results")
    backend.start(make_spec("single", stall_timeout="2s"), results)
    env = _env(STANDIN_HANG_ONCE="1", STANDIN_HANG_GIL="1")
    with kubelet_for(apiserver, tmp_path, **env) as kubelet:
        final = backend.wait("cartpole", timeout=120)
        codes = [code for _, pod, code in kubelet.exits if pod.startswith("cartpole-single")]
        failures = [out for _, pod, out in kubelet.probe_failures if pod.startswith("cartpole-single")]
    assert final.state == "succeeded", final.message
    assert codes == [137, 0] and final.restarts == 1
    assert failures and all("no heartbeat for" in out for out in failures)
    assert "resumed from ckpt-2" in backend_log(tmp_path)


@pytest.mark.processes
def test_a_learner_pod_that_stalls_again_after_its_restart_fails_the_job(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path
) -> None:
    results = str(tmp_path / "results")
    backend.start(make_spec("single", stall_timeout="2s"), results)
    with kubelet_for(apiserver, tmp_path, **_env()) as kubelet:
        final = backend.wait("cartpole", timeout=90)
        codes = [code for _, pod, code in kubelet.exits if pod.startswith("cartpole-single")]
    assert codes == [EXIT_STALLED, EXIT_STALLED_AGAIN]
    assert final.state == "failed"
    assert "stalled again after a restart for a stall" in (final.message or ""), final.message
    assert "PodFailurePolicy" in json.dumps(apiserver.get_object("Job", "cartpole-single", "rl")["status"])
    progress = json.loads((Path(results) / "cartpole" / "progress.json").read_text())
    assert progress["state"] == "failed" and progress["stalls"] == 2 and "stalled" in progress


def backend_log(tmp_path: Path) -> str:
    """Every container log of the test's pods, in start order."""
    logs = sorted((tmp_path / "pods").rglob("container.log"), key=lambda p: p.stat().st_mtime)
    return "\n".join(p.read_text() for p in logs)


def _pod(name: str, phase: str, created: str, code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": code}}, "restartCount": 0}]
    labels = {"batch.kubernetes.io/job-name": "cartpole-single"}
    return {"metadata": {"name": name, "labels": labels, "creationTimestamp": created}, "status": status}


def test_status_says_a_pod_stalled_and_that_the_job_failed_for_a_second_stall() -> None:
    """The pure reading of the Job and its pods: between the stalled pod and its replacement the learner reads
    "restarting from the latest checkpoint: the previous pod stalled"; a Job failed by the podFailurePolicy on
    exit code 89 says the learner stalled again."""
    job: dict[str, Any] = {"metadata": {"name": "cartpole-single"}, "spec": {"completions": 1}, "status": {}}
    (role,) = role_statuses("single", job, [_pod("a", "Failed", "2026-01-01T00:00:00Z", EXIT_STALLED)], {})
    assert role.state == "pending" and role.restarts == 0
    assert role.reason is not None and role.reason.startswith("restarting from the latest checkpoint: the previous")
    assert f"exit code {EXIT_STALLED}" in role.reason
    message = "Container runner for pod rl/b failed with exit code 89 matching FailJob rule at index 2"
    condition = {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": message}
    failed = {**job, "status": {"conditions": [condition]}}
    pods = [_pod("a", "Failed", "2026-01-01T00:00:00Z", EXIT_STALLED), _pod("b", "Failed", "2026-01-01T00:01:00Z", 89)]
    (role,) = role_statuses("single", failed, pods, {})
    assert role.state == "failed" and role.restarts == 1
    assert role.reason is not None and role.reason.startswith("stalled again after a restart for a stall")
    assert message in role.reason


@pytest.mark.processes
def test_a_hung_env_server_pod_fails_its_liveness_probe_and_the_agent_rejoins_its_replacement(
    apiserver: FakeKubeApiServer, tmp_path: Path
) -> None:
    """The env-server Job as build_workloads makes it, run by the fake kubelet with the real runner (no
    TensorFlow on that side); the test is the agent. The env server is stopped (SIGSTOP): its heartbeat ages,
    the exec livenessProbe fails twice, the kubelet kills the container, the pod fails and the Job replaces it
    on the same DNS name; the agent's step, which timed out, returns truncated from the new pod."""
    spec = make_spec("distributed", 1, stall_timeout="3s", name="hung")
    api = client.ApiClient()
    objects = build_workloads(spec, image="rlcloud:test", namespace="rl", kubernetes_version="1.31")
    apiserver.create_object("Namespace", {"metadata": {"name": "rl"}})
    for obj in objects:
        if obj.metadata.name != "hung-agent":  # the test is the agent
            apiserver.create_object(obj.kind, api.sanitize_for_serialization(obj), "rl")
    venv = None
    with FakeKubelet(apiserver, tmp_path / "pods", namespace="rl", max_grace=10) as kubelet:
        try:
            port = kubelet.host_port("hung-env-0.hung-env")
            assert port is not None
            venv = RemoteVectorEnv([f"127.0.0.1:{port}"], connect_timeout=120, step_timeout=1.0)
            venv.reset()
            venv.step(np.zeros(1, dtype=np.int64))
            (first,) = kubelet.running("rlcloud.io/role=env-server")
            kubelet.kill(first, signal.SIGSTOP)
            _states, rewards, terminals = venv.step(np.zeros(1, dtype=np.int64))
            assert terminals.tolist() == [2] and rewards.tolist() == [0.0] and venv.reconnects == 1
            (second,) = kubelet.running("rlcloud.io/role=env-server")
            assert second != first
            venv.step(np.zeros(1, dtype=np.int64))
            venv.close(finished=True)
            venv = None
            eventually(lambda: job_done(apiserver, "hung-env"), timeout=60, what="the env-server Job complete")
        finally:
            if venv is not None:
                venv.close(finished=True)
    events = [e for e in apiserver.list_objects("Event", "rl") if e["involvedObject"]["name"] == first]
    assert [e["reason"] for e in events][-1] == "Killing" and "Unhealthy" in [e["reason"] for e in events]
    assert any("no heartbeat for" in e["message"] for e in events)
    assert apiserver.get_object("Pod", first, "rl")["status"]["phase"] == "Failed"
    assert job_done(apiserver, "hung-env") == "Complete"


def job_done(apiserver: FakeKubeApiServer, name: str) -> str | None:
    """``Complete``/``Failed`` once the Job has that condition, else None."""
    for cond in (apiserver.get_object("Job", name, "rl") or {}).get("status", {}).get("conditions", []):
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None
