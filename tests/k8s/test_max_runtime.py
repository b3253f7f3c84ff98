"""max_runtime: an experiment's Jobs carry activeDeadlineSeconds, and a run past it is stopped (the learner
checkpoints) and fails with DeadlineExceeded, as the Job controller does."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from rlcloud.errors import SpecError
from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.builders import build_workloads, to_dict
from rlcloud.k8s.sweep_builders import build_sweep_workloads
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import FAST_RETRY, make_spec, make_sweep, standin
from tests.support.waiting import eventually


def test_max_runtime_becomes_every_jobs_active_deadline() -> None:
    objs = build_workloads(make_spec("distributed", 2, max_runtime="12h"), image="i:1", namespace="rl")
    jobs = [to_dict(o) for o in objs if o.kind == "Job"]
    assert [j["spec"]["activeDeadlineSeconds"] for j in jobs] == [43200, 43200]
    (job,) = [to_dict(o) for o in build_workloads(make_spec(), image="i:1", namespace="rl") if o.kind == "Job"]
    assert "activeDeadlineSeconds" not in job["spec"]  # no limit unless asked
    with pytest.raises(ValueError, match="duration"):
        make_spec(max_runtime="soon")
    sweep = make_sweep(2)
    sweep = sweep.model_copy(update={"experiment": sweep.experiment.replace(max_runtime="1h")})
    with pytest.raises(SpecError) as info:
        build_sweep_workloads(sweep, image="i:1", namespace="rl")
    assert info.value.fields == ["experiment.max_runtime"]


@pytest.mark.processes
def test_a_run_past_max_runtime_is_stopped_and_fails(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = KubernetesBackend(
        api_client, namespace="rl", image="rlcloud:test", retry=FAST_RETRY, local_results=True, poll_interval=0.1
    )
    results = tmp_path / "results"
    backend.start(make_spec(max_runtime="2s"), str(results))
    env = {"STANDIN_EPISODES": "100000", "STANDIN_DELAY": "0.05"}
    with FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10):
        status = backend.wait("cartpole", timeout=60)
    assert status.state == "failed"
    (role,) = status.roles
    assert role.reason == "Job was active longer than specified deadline"
    job = apiserver.get_object("Job", "cartpole-single", "rl")
    (failed,) = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "DeadlineExceeded"
    # the learner was stopped with SIGTERM: it checkpointed on the way out
    assert (results / "cartpole" / "checkpoints" / "LATEST").exists()
    assert eventually(lambda: not apiserver.list_objects("Pod", "rl", "rlcloud.io/role=single") or all(
        p["status"]["phase"] in ("Failed", "Succeeded") for p in apiserver.list_objects("Pod", "rl")
    ), what="no pod left running")  # fmt: skip
