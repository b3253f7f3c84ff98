"""Stalled learners on Kubernetes (issue 30), against the fake kube-apiserver and kubelet, laptop closed.

The learner pod runs the stand-in runner with the real runner's stall watchdog (``STANDIN_WATCHDOG``): when
its episodes stop, the watchdog ends the pod with exit code 88 and the Job (its podFailurePolicy counts that
as an ordinary retry) starts a new pod, which resumes from the latest checkpoint; a pod started after a stall
that stalls too exits 89, which the podFailurePolicy turns into a failed Job. Nothing polls from this side
but the test's own reads: the fake Job controller does what the real one would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.status import role_statuses
from rlcloud.runner.watchdog import EXIT_STALLED, EXIT_STALLED_AGAIN
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.k8s.conftest import make_spec
from tests.k8s.test_backend import kubelet_for, make_backend


@pytest.fixture
def backend(api_client: client.ApiClient) -> KubernetesBackend:
    return make_backend(api_client)


def _env(**extra: str) -> dict[str, str]:
    base = {"STANDIN_EPISODES": "6", "STANDIN_DELAY": "0.05", "STANDIN_HANG_AFTER": "2", "STANDIN_WATCHDOG": "1"}
    return {**base, "STANDIN_STALL_TIMEOUT": "2", **extra}


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
