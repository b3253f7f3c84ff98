"""The fake kubelet runs Jobs as local processes, with the Job controller's policies."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet, expand


def eventually(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def job_body(name: str, code: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "runner",
                            "image": "python",
                            "command": ["python", "-c", code],
                            "args": [],
                            "env": spec.pop("env", []),
                            "volumeMounts": spec.pop("mounts", []),
                        }
                    ],
                    "volumes": spec.pop("volumes", []),
                    "terminationGracePeriodSeconds": 2,
                },
            },
            **spec,
        },
    }


@pytest.fixture
def kubelet(apiserver: FakeKubeApiServer, tmp_path: Path) -> Iterator[FakeKubelet]:
    with FakeKubelet(apiserver, tmp_path / "pods") as k:
        yield k


def job_condition(apiserver: FakeKubeApiServer, name: str) -> str | None:
    job = apiserver.get_object("Job", name, "default")
    for cond in (job or {}).get("status", {}).get("conditions", []):
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None


def test_expand_like_kubernetes() -> None:
    env = {"A": "1", "B": "x"}
    assert expand("$(A)-$(B)-$(C)-$$(A)", env) == "1-x-$(C)-$(A)"


def test_trivial_job_runs_with_configmap_env_and_logs(
    apiserver: FakeKubeApiServer, kubelet: FakeKubelet, tmp_path: Path
) -> None:
    apiserver.create_object("ConfigMap", {"metadata": {"name": "cfg"}, "data": {"spec.yaml": "hello: 1\n"}}, "default")
    code = "import os,sys; print(open(sys.argv[1]).read().strip(), os.environ['WHO'], os.environ['IDX'])"
    body = job_body(
        "hello",
        code,
        env=[
            {"name": "WHO", "value": "pod-$(IDX)"},
            {"name": "IDX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        mounts=[{"name": "spec", "mountPath": "/etc/rlcloud", "readOnly": True}],
        volumes=[{"name": "spec", "configMap": {"name": "cfg"}}],
    )
    body["spec"]["template"]["spec"]["containers"][0]["args"] = ["/etc/rlcloud/spec.yaml"]
    apiserver.create_object("Job", body, "default")
    assert eventually(lambda: job_condition(apiserver, "hello"), what="job done") == "Complete"
    (pod,) = apiserver.list_objects("Pod", "default", "app=hello")
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    log = (tmp_path / "pods" / "default" / pod["metadata"]["name"] / "container.log").read_text()
    # WHO was expanded before IDX existed, so $(IDX) stays literal, as in Kubernetes
    assert log.strip() == f"hello: 1 pod-$(IDX) {pod['metadata']['name']}"
    assert apiserver.get_object("Job", "hello", "default")["status"]["succeeded"] == 1


def test_indexed_job_backoff_and_fail_job_policy(apiserver: FakeKubeApiServer, kubelet: FakeKubelet) -> None:
    code = "import os,sys; sys.exit(1 if os.environ['I'] == '1' else 0)"
    body = job_body(
        "idx",
        code,
        completionMode="Indexed",
        completions=3,
        parallelism=3,
        backoffLimitPerIndex=2,
        env=[
            {
                "name": "I",
                "valueFrom": {
                    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
                },
            }
        ],
    )
    apiserver.create_object("Job", body, "default")
    # index 1 keeps failing: after backoffLimitPerIndex+1 failures the index (and so the Job) fails
    assert eventually(lambda: job_condition(apiserver, "idx"), what="job done") == "Failed"
    job = apiserver.get_object("Job", "idx", "default")
    assert job["status"]["completedIndexes"] == "0,2" and job["status"]["failedIndexes"] == "1"
    assert (
        len([p for p in apiserver.list_objects("Pod", "default", "app=idx") if p["status"]["phase"] == "Failed"]) == 3
    )

    fail_fast = job_body(
        "fast",
        "import sys; sys.exit(3)",
        backoffLimit=6,
        podFailurePolicy={
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "runner", "operator": "In", "values": [2, 3]}}
            ]
        },
    )
    apiserver.create_object("Job", fail_fast, "default")
    assert eventually(lambda: job_condition(apiserver, "fast"), what="job failed") == "Failed"
    assert len(apiserver.list_objects("Pod", "default", "app=fast")) == 1  # no retry


def test_suspend_terminates_and_resume_restarts(apiserver: FakeKubeApiServer, kubelet: FakeKubelet) -> None:
    apiserver.create_object("Job", job_body("sleepy", "import time; time.sleep(60)"), "default")
    eventually(lambda: kubelet.running("app=sleepy"), what="pod running")
    apiserver.patch_object("Job", "sleepy", "default", {"spec": {"suspend": True}})
    eventually(lambda: not apiserver.list_objects("Pod", "default", "app=sleepy"), what="pod deleted")
    eventually(lambda: not kubelet.running("app=sleepy"), what="process gone")
    apiserver.patch_object("Job", "sleepy", "default", {"spec": {"suspend": False}})
    eventually(lambda: kubelet.running("app=sleepy"), what="pod running again")
    (pod,) = kubelet.running("app=sleepy")
    kubelet.kill(pod)  # SIGKILL: 137, counted, replaced
    eventually(lambda: len(apiserver.list_objects("Pod", "default", "app=sleepy")) == 2, what="replacement")
    assert any(code == 137 for _, name, code in kubelet.exits if name == pod)
    assert sys.executable  # processes ran with this interpreter
