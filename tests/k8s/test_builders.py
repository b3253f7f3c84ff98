"""Pure builders: objects per run mode, GPU/CPU, credentials, labels, policies; each validated (strict)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from rlcloud.errors import SpecError
from rlcloud.k8s.builders import (
    ANNOTATION_CONFIG_HASH,
    LABEL_EXPERIMENT,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    build_workloads,
    config_hash,
)
from rlcloud.k8s.namespace_builders import build_credentials_secret, build_namespace_objects
from rlcloud.runner.watchdog import EXIT_STALLED, EXIT_STALLED_AGAIN
from rlcloud.specs import ExperimentSpec
from tests.support.kubernetes import as_dicts, container, env_of, make_spec

VERSIONS = ["1.29", "1.30", "1.31", "1.32", "1.33"]
CPU_POOL_PREFERENCE = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {"matchExpressions": [{"key": "rlcloud-pool", "operator": "In", "values": ["system"]}]},
            }
        ]
    }
}


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("run_mode", "workers", "gpu"),
    [("single", None, None), ("multi-threaded", 4, "nvidia-tesla-t4"), ("distributed", 3, "nvidia-l4")],
)
def test_every_object_validates_strictly(run_mode: str, workers: int | None, gpu: str | None, version: str) -> None:
    spec = make_spec(run_mode, workers, resources={"learner": {"cpu": "2", "memory": "4Gi"}})
    objs = build_workloads(
        spec,
        image="repo/rl:1",
        namespace="rl",
        results="gs://bucket/runs",
        gpu_type=gpu,
        credentials_secret="gcp-key",
        kubernetes_version=version,
    )
    objs += build_namespace_objects("rl", gcp_service_account="runner@p.iam.gserviceaccount.com")
    objs.append(build_credentials_secret("rl", b'{"type": "service_account"}'))
    for obj in as_dicts(objs):
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)


@pytest.mark.parametrize(("run_mode", "workers"), [("single", None), ("multi-threaded", 8)])
def test_single_and_multi_are_one_job(run_mode: str, workers: int | None) -> None:
    spec = make_spec(run_mode, workers)
    objs = as_dicts(build_workloads(spec, image="repo/rl:1", namespace="rl"))
    assert [o["kind"] for o in objs] == ["ConfigMap", "Job"]
    (job,) = by_kind(objs, "Job")
    role = "single" if run_mode == "single" else "multi"
    assert job["metadata"]["name"] == f"cartpole-{role}"
    assert container(job)["command"] == ["python", "-m", "rlcloud.runner"]
    assert container(job)["args"][:4] == ["--role", role, "--index", "0"]
    assert job["spec"]["completions"] == 1 and job["spec"]["parallelism"] == 1


def test_distributed_object_count_is_constant() -> None:
    counts = {
        n: [o["kind"] for o in as_dicts(build_workloads(make_spec("distributed", n), image="i:1", namespace="rl"))]
        for n in (1, 10, 1000)
    }
    assert counts[1] == counts[10] == counts[1000] == ["ConfigMap", "Service", "Job", "Job"]


def test_distributed_layout_dns_and_index() -> None:
    objs = as_dicts(build_workloads(make_spec("distributed", 3), image="i:1", namespace="rl", results="gs://b/p"))
    (service,) = by_kind(objs, "Service")
    env_job, agent_job = by_kind(objs, "Job")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == env_job["spec"]["template"]["metadata"]["labels"]
    assert env_job["spec"]["completionMode"] == "Indexed"
    assert env_job["spec"]["completions"] == env_job["spec"]["parallelism"] == 3
    assert env_job["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"] == "cartpole-env"
    servers = env_of(agent_job)["RLCLOUD_ENV_SERVERS"].split(",")
    assert servers == [f"cartpole-env-{i}.cartpole-env:5000" for i in range(3)]
    # the index reaches argv through the downward API and Kubernetes' own $(VAR) expansion, no shell
    args = container(env_job)["args"]
    assert args[args.index("--index") + 1] == "$(RLCLOUD_INDEX)"
    index_source = env_of(env_job)["RLCLOUD_INDEX"]
    assert "job-completion-index" in index_source["fieldRef"]["fieldPath"]
    assert env_of(env_job)["RLCLOUD_PORT"] == "5000"
    # pods may start many minutes apart on a cluster (GPU node + driver): patient timeouts
    assert int(env_of(env_job)["RLCLOUD_IDLE_TIMEOUT"]) >= 1800
    assert int(env_of(agent_job)["RLCLOUD_CONNECT_TIMEOUT"]) >= 900
    assert container(env_job)["ports"][0]["containerPort"] == 5000


def test_spec_in_configmap_mounted_and_no_shell() -> None:
    spec = make_spec("distributed", 2)
    objs = as_dicts(build_workloads(spec, image="i:1", namespace="rl", results="/tmp/$(HOME)/res"))
    (cm,) = by_kind(objs, "ConfigMap")
    assert ExperimentSpec(**{k: v for k, v in yaml.safe_load(cm["data"]["spec.yaml"]).items() if k != "kind"}) == spec
    assert cm["data"]["results"] == "/tmp/$(HOME)/res"
    for job in by_kind(objs, "Job"):
        c = container(job)
        assert c["command"][0] == "python" and "sh" not in c["command"]
        assert "--spec" in c["args"] and c["args"][c["args"].index("--spec") + 1] == "/etc/rlcloud/spec.yaml"
        # a user's "$" is escaped so that Kubernetes does not expand it
        assert env_of(job)["RLCLOUD_RESULTS"] == "/tmp/$$(HOME)/res/cartpole"
        volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
        assert volumes["spec"]["configMap"]["name"] == "cartpole-spec"
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        assert mounts["spec"]["readOnly"] is True and mounts["spec"]["mountPath"] == "/etc/rlcloud"


def test_gpu_for_the_learner_only() -> None:
    spec = make_spec("distributed", 2, resources={"learner": {"cpu": "4", "memory": "8Gi"}, "env_server": {"cpu": "1"}})
    env_job, agent_job = by_kind(
        as_dicts(build_workloads(spec, image="i:1", namespace="rl", gpu_type="nvidia-tesla-t4")), "Job"
    )
    agent_pod = agent_job["spec"]["template"]["spec"]
    limits = container(agent_job)["resources"]["limits"]
    assert limits == {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}
    assert container(agent_job)["resources"]["requests"] == limits
    assert agent_pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert agent_pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    env_pod = env_job["spec"]["template"]["spec"]
    # no GPU: no accelerator selector, no toleration of the GPU nodes' taint, a preference for the CPU pool
    assert "nodeSelector" not in env_pod and "tolerations" not in env_pod
    assert env_pod["affinity"] == CPU_POOL_PREFERENCE
    assert "affinity" not in agent_pod
    # the spec's cpu is request and limit; the memory it does not give is rlcloud's default request
    assert container(env_job)["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1", "memory": "512Mi"}}


def test_cpu_cluster_has_no_gpu_and_spec_gpus_count() -> None:
    (job,) = by_kind(as_dicts(build_workloads(make_spec(), image="i:1", namespace="rl")), "Job")
    pod = job["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "affinity" not in pod  # no GPU pool: nothing to keep pods off
    assert container(job)["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}}
    spec = make_spec(resources={"learner": {"gpus": 2}})
    (job,) = by_kind(as_dicts(build_workloads(spec, image="i:1", namespace="rl", gpu_type="nvidia-l4")), "Job")
    assert container(job)["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_workload_identity_service_account() -> None:
    ns, sa, role, binding = as_dicts(build_namespace_objects("rl", gcp_service_account="r@p.iam.gserviceaccount.com"))
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "rl"
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": "r@p.iam.gserviceaccount.com"}
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "rl"
    assert binding["subjects"][0]["name"] == sa["metadata"]["name"]
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in role["rules"])
    (job,) = by_kind(
        as_dicts(build_workloads(make_spec(), image="i:1", namespace="rl", service_account=sa["metadata"]["name"])),
        "Job",
    )
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "rlcloud-runner"
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env_of(job)


def test_secret_key_is_mounted_never_in_env_or_configmap() -> None:
    key = '{"private_key": "-----BEGIN PRIVATE KEY-----SECRET"}'
    secret = as_dicts([build_credentials_secret("rl", key)])[0]
    assert secret["stringData"]["key.json"] == key
    objs = as_dicts(build_workloads(make_spec("distributed", 2), image="i:1", namespace="rl", credentials_secret="k"))
    text = repr(objs)
    assert "PRIVATE KEY" not in text
    for job in by_kind(objs, "Job"):
        assert env_of(job)["GOOGLE_APPLICATION_CREDENTIALS"] == "/var/run/secrets/rlcloud/gcp/key.json"
        mount = next(m for m in container(job)["volumeMounts"] if m["name"] == "gcp-credentials")
        assert mount["readOnly"] is True and mount["mountPath"] == "/var/run/secrets/rlcloud/gcp"
        volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "gcp-credentials")
        assert volume["secret"] == {"secretName": "k", "defaultMode": 0o400}
        # the non-root runner reads it through its group (fsGroup), nobody else can
        pod_security = job["spec"]["template"]["spec"]["securityContext"]
        assert pod_security["runAsNonRoot"] is True and pod_security["fsGroup"] == pod_security["runAsUser"] == 10001
        assert container(job)["securityContext"]["allowPrivilegeEscalation"] is False


def test_labels_on_everything() -> None:
    objs = as_dicts(build_workloads(make_spec("distributed", 2), image="i:1", namespace="rl"))
    for obj in objs:
        labels = obj["metadata"]["labels"]
        assert labels[LABEL_MANAGED_BY] == "rlcloud" and labels[LABEL_EXPERIMENT] == "cartpole"
        assert labels[LABEL_ROLE] in {"config", "env-server", "agent"}
        assert obj["metadata"]["namespace"] == "rl"
    for job in by_kind(objs, "Job"):
        assert job["spec"]["template"]["metadata"]["labels"] == job["metadata"]["labels"]


def test_failure_policies() -> None:
    objs = as_dicts(
        build_workloads(make_spec("distributed", 2), image="i:1", namespace="rl", kubernetes_version="1.33")
    )
    env_job, agent_job = by_kind(objs, "Job")
    for job in (env_job, agent_job):
        spec = job["spec"]
        assert spec["template"]["spec"]["restartPolicy"] == "Never"
        ignore, fail, stalled = spec["podFailurePolicy"]["rules"]
        assert ignore == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
        assert fail["action"] == "FailJob" and fail["onExitCodes"]["values"] == [2, 3]
        # stalled again after a restart for a stall fails the Job; a first stall (88) is an ordinary retry
        assert stalled["action"] == "FailJob" and stalled["onExitCodes"]["values"] == [EXIT_STALLED_AGAIN]
        assert EXIT_STALLED not in [code for rule in spec["podFailurePolicy"]["rules"] for code in
                                    rule.get("onExitCodes", {}).get("values", [])]  # fmt: skip
        assert spec["ttlSecondsAfterFinished"] > 0
    assert agent_job["spec"]["backoffLimit"] >= 1
    assert env_job["spec"]["backoffLimitPerIndex"] >= 1
    assert env_job["spec"]["successPolicy"] == {"rules": [{"succeededCount": 1}]}
    # a checkpoint on SIGTERM needs time; env servers have nothing to save
    assert agent_job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 60
    old = by_kind(as_dicts(build_workloads(make_spec("distributed", 2), image="i:1", namespace="rl")), "Job")
    assert "successPolicy" not in old[0]["spec"]  # 1.29/1.30 do not know it


def test_config_hash_ignores_suspend_and_tracks_changes() -> None:
    a = build_workloads(make_spec(), image="i:1", namespace="rl")
    b = build_workloads(make_spec(), image="i:1", namespace="rl", suspend=True)
    c = build_workloads(make_spec(episodes=21), image="i:1", namespace="rl")
    ha = [o.metadata.annotations[ANNOTATION_CONFIG_HASH] for o in a]
    assert ha == [o.metadata.annotations[ANNOTATION_CONFIG_HASH] for o in b]
    assert ha != [o.metadata.annotations[ANNOTATION_CONFIG_HASH] for o in c]
    assert config_hash(a[1]) == ha[1]


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(SpecError) as err:
        build_workloads(make_spec(), image="bad image", namespace="Not_A_Label")
    assert err.value.fields == ["namespace", "image"]


def test_default_image_from_spec() -> None:
    (_, job) = as_dicts(build_workloads(make_spec(image="mine/rl:2"), namespace="rl"))
    assert container(job)["image"] == "mine/rl:2"


def test_every_container_requests_cpu_and_memory_by_default() -> None:
    # distributed on a GPU cluster, nothing in resources: before, both pods were BestEffort (no requests),
    # so they never went Pending (no autoscaling) and env servers packed onto the Spot GPU node
    env_job, agent_job = by_kind(
        as_dicts(build_workloads(make_spec("distributed", 2), image="i:1", namespace="rl", gpu_type="nvidia-l4")),
        "Job",
    )
    assert container(env_job)["resources"] == {"requests": {"cpu": "500m", "memory": "512Mi"}}
    assert container(agent_job)["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    # a CPU learner on a GPU cluster (gpus: 0) stays off the GPU nodes as env servers do
    spec = make_spec(resources={"learner": {"gpus": 0, "memory": "6Gi"}})
    (job,) = by_kind(as_dicts(build_workloads(spec, image="i:1", namespace="rl", gpu_type="nvidia-l4")), "Job")
    pod = job["spec"]["template"]["spec"]
    assert "tolerations" not in pod and pod["affinity"] == CPU_POOL_PREFERENCE
    assert container(job)["resources"] == {"requests": {"cpu": "1", "memory": "6Gi"}, "limits": {"memory": "6Gi"}}


def test_the_cpu_pool_label_is_the_one_the_gke_builders_set() -> None:
    from rlcloud.gke.plan import POOL_LABEL, plan_pools
    from rlcloud.k8s.builders import CPU_POOL
    from rlcloud.k8s.builders import POOL_LABEL as K8S_POOL_LABEL
    from rlcloud.specs import ClusterSpec

    system, workers = plan_pools(ClusterSpec(name="rl", gpu_type="t4"))
    assert K8S_POOL_LABEL == POOL_LABEL and system.role == CPU_POOL and system.gpus == 0 and workers.gpus


def test_env_servers_run_the_cpu_image_in_a_gpu_experiment() -> None:
    objs = as_dicts(
        build_workloads(
            make_spec("distributed", 2), image="gpu:1", env_server_image="cpu:1", namespace="rl", gpu_type="nvidia-l4"
        )
    )
    env_job, agent_job = by_kind(objs, "Job")
    assert container(env_job)["image"] == "cpu:1" and container(agent_job)["image"] == "gpu:1"
    with pytest.raises(SpecError, match="image"):
        build_workloads(make_spec("distributed", 2), image="gpu:1", env_server_image="bad image", namespace="rl")


def test_every_experiment_container_has_a_liveness_probe_over_its_heartbeat() -> None:
    """Issue 30: the kubelet kills an env server that stopped answering (its heartbeat is stall_timeout old) and
    a learner whose watchdog cannot run (stall_timeout plus a margin): exec probes running the inline script."""
    from rlcloud.runner.watchdog import LIVENESS_MARGIN_S, LIVENESS_SCRIPT

    objs = as_dicts(build_workloads(make_spec("distributed", 2, stall_timeout="2m"), image="i:1", namespace="rl"))
    env_job, agent_job = by_kind(objs, "Job")
    env_probe = env_job["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    agent_probe = agent_job["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    assert env_probe["exec"]["command"] == [
        "python", "-c", LIVENESS_SCRIPT, "/var/lib/rlcloud/work/.heartbeat", "120"
    ]  # fmt: skip
    assert agent_probe["exec"]["command"][-1] == f"{120 + LIVENESS_MARGIN_S:g}"
    for probe in (env_probe, agent_probe):
        assert probe["periodSeconds"] == 10 and probe["failureThreshold"] == 2 and probe["timeoutSeconds"] >= 5
    short = as_dicts(build_workloads(make_spec("single", stall_timeout="3s"), image="i:1", namespace="rl"))
    (job,) = by_kind(short, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["periodSeconds"] == 1
