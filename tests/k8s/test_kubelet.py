"""The fake kubelet runs Jobs as local processes, with the Job controller's policies."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet, FakeNode, expand, gke_cpu_node, gke_gpu_node, schedule
from tests.support.waiting import eventually


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


@pytest.mark.processes
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


@pytest.mark.processes
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


@pytest.mark.processes
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


# ------------------------------------------------------------------------------------------ the scheduler


def _pod(cpu: str | None = None, *, tolerate_gpu: bool = False, **spec: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "i", "resources": resources}],
            **({"tolerations": tolerations} if tolerate_gpu else {}),
            **spec,
        },
    }


def test_the_scheduler_words_a_pod_that_fits_nowhere_as_kube_scheduler_does() -> None:
    nodes = [gke_cpu_node(), gke_gpu_node()]
    full = {nodes[0].name: {"pods": Decimal(3), "cpu": Decimal("3.5")}}
    node, message = schedule(_pod("500m"), nodes, full)
    assert node is None
    assert message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    # what tolerates the taint may use the GPU node's CPUs
    assert schedule(_pod("500m", tolerate_gpu=True), nodes, full) == (nodes[1].name, "")
    # a pod that requests nothing fits any node it tolerates, however full: it never goes Pending
    assert schedule(_pod(), nodes, full) == (nodes[0].name, "")
    # a GPU pod needs a free GPU on a node of its accelerator type
    gpu_pod = _pod(tolerate_gpu=True, nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-l4"})
    gpu_pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    node, message = schedule(gpu_pod, nodes, {})
    assert node is None and message.startswith(
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )
    gpu_pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert schedule(gpu_pod, nodes, {}) == (nodes[1].name, "")
    taken = {nodes[1].name: {"pods": Decimal(1), "nvidia.com/gpu": Decimal(1)}}
    assert "1 Insufficient nvidia.com/gpu" in schedule(gpu_pod, nodes, taken)[1]


def test_preferred_node_affinity_picks_among_the_nodes_that_fit() -> None:
    nodes = [gke_gpu_node(), gke_cpu_node()]
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "rlcloud-pool", "operator": "In", "values": ["system"]}]
                    },
                }
            ]
        }
    }
    assert schedule(_pod("1", tolerate_gpu=True, affinity=prefer), nodes, {})[0] == nodes[1].name
    # without the preference, the first node that fits
    assert schedule(_pod("1", tolerate_gpu=True), nodes, {})[0] == nodes[0].name
    # a preference is not a requirement: a full preferred node leaves the other
    full = {nodes[1].name: {"pods": Decimal(1), "cpu": Decimal(3)}}
    assert schedule(_pod("1", tolerate_gpu=True, affinity=prefer), nodes, full)[0] == nodes[0].name
    required = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rlcloud-pool", "operator": "In", "values": ["system"]}]}]}}}  # fmt: skip
    message = schedule(_pod("1", tolerate_gpu=True, affinity=required), nodes, full)[1]
    assert message.startswith("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity")


@pytest.mark.processes
def test_a_pod_that_does_not_fit_stays_pending_until_a_node_is_added(
    apiserver: FakeKubeApiServer, tmp_path: Path
) -> None:
    body = job_body("big", "print('ran')")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "3", "memory": "1Gi"},
        "limits": {"cpu": "3", "memory": "1Gi"},
    }
    node = FakeNode("small", cpu="2", memory="8Gi")
    with FakeKubelet(apiserver, tmp_path / "pods", nodes=[node]) as kubelet:
        apiserver.create_object("Job", body, "default")

        def unscheduled() -> dict[str, Any] | None:
            for pod in apiserver.list_objects("Pod", "default", "app=big"):
                for cond in pod.get("status", {}).get("conditions") or []:
                    if cond["type"] == "PodScheduled" and cond["status"] == "False":
                        return pod
            return None

        pod = eventually(unscheduled, what="the pod marked unschedulable")
        (cond,) = pod["status"]["conditions"]
        assert cond["reason"] == "Unschedulable"
        assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
        assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
        assert pod["status"]["qosClass"] == "Guaranteed"
        (event,) = [e for e in apiserver.list_objects("Event", "default") if e["reason"] == "FailedScheduling"]
        assert event["involvedObject"]["name"] == pod["metadata"]["name"]
        assert event["source"]["component"] == "default-scheduler"
        assert apiserver.get_object("Node", "small")["status"]["allocatable"]["cpu"] == "2"
        # the cluster autoscaler adds a node that fits: the pod is scheduled there and runs
        kubelet.add_node(FakeNode("large", cpu="4", memory="16Gi"))
        assert eventually(lambda: job_condition(apiserver, "big"), what="job done") == "Complete"
        assert kubelet.node_of(pod["metadata"]["name"], "default") == "large"


def test_qos_class_follows_requests_and_limits(apiserver: FakeKubeApiServer) -> None:
    def qos(resources: dict[str, Any]) -> str:
        body = {"metadata": {"generateName": "q-"}, "spec": {"containers": [{"name": "c", "image": "i",
                "resources": resources}]}}  # fmt: skip
        return str(apiserver.create_object("Pod", body, "default")["status"]["qosClass"])

    assert qos({}) == "BestEffort"
    assert qos({"requests": {"cpu": "500m", "memory": "512Mi"}}) == "Burstable"
    # a limit without a request is copied to the request
    assert qos({"limits": {"cpu": "1", "memory": "1Gi"}}) == "Guaranteed"


def test_pod_count_cordoned_nodes_and_exists_tolerations() -> None:
    small = FakeNode("small", max_pods=1)
    cordoned = FakeNode("cordoned", unschedulable=True)
    node, message = schedule(_pod(), [small, cordoned], {"small": {"pods": Decimal(1)}})
    assert node is None
    assert message.startswith("0/2 nodes are available: 1 Too many pods, 1 node(s) were unschedulable.")
    tainted = FakeNode("t", taints=[{"key": "dedicated", "value": "infra", "effect": "NoExecute"}])
    assert "untolerated taint {dedicated: infra}" in schedule(_pod(), [tainted], {})[1]
    anything = _pod(tolerations=[{"operator": "Exists"}])  # an empty key with Exists tolerates every taint
    assert schedule(anything, [tainted], {}) == ("t", "")
    # PreferNoSchedule is a preference, never a filter
    soft = FakeNode("soft", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}])
    assert schedule(_pod(), [soft], {}) == ("soft", "")


@pytest.mark.processes
def test_a_failed_liveness_probe_kills_the_container_and_the_job_replaces_its_pod(
    apiserver: FakeKubeApiServer, kubelet: FakeKubelet, tmp_path: Path
) -> None:
    """Issue 30: the first pod keeps a heartbeat under its emptyDir, then stops itself (SIGSTOP: it answers
    nothing, like a hung env server); rlcloud's exec probe fails twice in a row, the kubelet kills it (SIGTERM
    + SIGCONT), the pod fails under restartPolicy Never and the Job's replacement pod completes."""
    from rlcloud.runner.watchdog import liveness_command

    marker = tmp_path / "first-pod-was-here"
    code = (
        "import os, pathlib, signal, sys, time\n"
        "beat = pathlib.Path(sys.argv[2]) / 'env-server-0'  # the container path, rewritten by the kubelet\n"
        "beat.parent.mkdir(parents=True, exist_ok=True)\n"
        "marker = pathlib.Path(sys.argv[1])\n"
        "if marker.exists():\n"
        "    beat.touch(); print('second pod: fine', flush=True); sys.exit(0)\n"
        "marker.touch()\n"
        "beat.touch()\n"
        "print('first pod: stopping itself', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
    )
    body = job_body(
        "hung",
        code,
        backoffLimit=1,
        mounts=[{"name": "work", "mountPath": "/work"}],
        volumes=[{"name": "work", "emptyDir": {}}],
    )
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [str(marker), "/work/.heartbeat"]
    container["livenessProbe"] = {
        "exec": {"command": liveness_command("/work", 1)},
        "periodSeconds": 1,
        "timeoutSeconds": 10,
        "failureThreshold": 2,
    }
    apiserver.create_object("Job", body, "default")
    assert eventually(lambda: job_condition(apiserver, "hung"), timeout=60, what="job done") == "Complete"
    pods = sorted(apiserver.list_objects("Pod", "default", "app=hung"), key=lambda p: p["status"]["phase"])
    assert [p["status"]["phase"] for p in pods] == ["Failed", "Succeeded"]
    first = pods[0]["metadata"]["name"]
    assert pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
    reasons = [e["reason"] for e in apiserver.list_objects("Event", "default") if e["involvedObject"]["name"] == first]
    assert reasons.count("Unhealthy") == 2 and reasons[-1] == "Killing"
    assert all("no heartbeat for" in out for _, pod, out in kubelet.probe_failures if pod == first)


@pytest.mark.processes
def test_a_startup_probe_holds_liveness_back_until_it_succeeds_and_kills_a_runner_that_never_starts(
    apiserver: FakeKubeApiServer, kubelet: FakeKubelet, tmp_path: Path
) -> None:
    """Issue 30, a warm sweep pod's probes: the first pod never beats (a runner hung before its first
    heartbeat): its startupProbe fails failureThreshold times and the kubelet kills it, its liveness probe never
    having run; the replacement beats, its startupProbe succeeds once, and only then its liveness probe runs,
    whose file says its own limit (here 0.5 s), and kills it when its heartbeat stops."""
    from rlcloud.runner.watchdog import liveness_command, startup_command

    marker = tmp_path / "first-pod-was-here"
    code = (
        "import os, pathlib, signal, sys, time\n"
        "beat = pathlib.Path(sys.argv[2]) / 'pod'  # the container path, rewritten by the kubelet\n"
        "marker = pathlib.Path(sys.argv[1])\n"
        "if not marker.exists():\n"
        "    marker.touch(); print('first pod: never beats', flush=True)\n"
        "    import threading; threading.Event().wait()  # hangs before its first beat\n"
        "beat.parent.mkdir(parents=True, exist_ok=True)\n"
        "beat.write_text('0.5\\n')\n"
        "print('second pod: beat once, then stops itself', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
    )
    body = job_body(
        "slow",
        code,
        backoffLimit=1,
        mounts=[{"name": "work", "mountPath": "/work"}],
        volumes=[{"name": "work", "emptyDir": {}}],
    )
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [str(marker), "/work/.heartbeat"]
    container["startupProbe"] = {"exec": {"command": startup_command("/work")}, "periodSeconds": 1,
                                 "timeoutSeconds": 10, "failureThreshold": 3}  # fmt: skip
    # a limit of an hour on the command line: only the file's own 0.5 s can fail it
    container["livenessProbe"] = {"exec": {"command": liveness_command("/work", 3600)}, "periodSeconds": 1,
                                  "timeoutSeconds": 10, "failureThreshold": 2}  # fmt: skip
    apiserver.create_object("Job", body, "default")
    assert eventually(lambda: job_condition(apiserver, "slow"), timeout=60, what="job done") == "Failed"
    pods = sorted(
        apiserver.list_objects("Pod", "default", "app=slow"), key=lambda p: p["metadata"]["creationTimestamp"]
    )
    assert len(pods) == 2 and all(p["status"]["phase"] == "Failed" for p in pods)
    first, second = (p["metadata"]["name"] for p in pods)

    def messages(pod: str) -> list[str]:
        return [e["message"] for e in apiserver.list_objects("Event", "default") if e["involvedObject"]["name"] == pod]

    assert [m.split(":")[0] for m in messages(first)] == ["Startup probe failed"] * 3 + [
        "Container runner failed startup probe, will be restarted"]  # fmt: skip
    assert all("no heartbeat yet" in out for _, pod, out in kubelet.probe_failures if pod == first)
    assert ("default", second, "startup") in kubelet.probe_successes
    assert ("default", first, "startup") not in kubelet.probe_successes
    # its first startup probe may come before its beat
    later = [m.split(":")[0] for m in messages(second) if not m.startswith("Startup probe failed")]
    assert later == ["Liveness probe failed"] * 2 + ["Container runner failed liveness probe, will be restarted"]
    liveness = [out for _, pod, out in kubelet.probe_failures if pod == second and "no heartbeat yet" not in out]
    assert len(liveness) == 2 and all("(at most 0.5 s)" in out for out in liveness)
