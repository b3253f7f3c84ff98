"""The in-cluster reaper's objects: strictly valid manifests, least privilege, an idempotent install."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from rlcloud.k8s.builders import to_dict
from rlcloud.k8s.reaper_builders import (
    REAPER_CONFIG_MAP,
    REAPER_NAME,
    REAPER_NAMESPACE,
    build_reaper_objects,
    build_reaper_service_account,
)
from rlcloud.k8s.reaper_install import install_reaper
from tests.fakes.kube_apiserver import FakeKubeApiServer

GSA = "rlcloud-reaper@rl-test-project.iam.gserviceaccount.com"


def _objects() -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in (to_dict(obj) for obj in build_reaper_objects("repo/runner-cpu:1", GSA))}


@pytest.mark.parametrize("version", ["1.30", "1.33"])
def test_every_reaper_object_validates_strictly(version: str) -> None:
    objs = build_reaper_objects("repo/runner-cpu:1", GSA)
    assert [o.kind for o in objs] == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "CronJob",
    ]
    for obj in objs:
        kubernetes_validate.validate(client.ApiClient().sanitize_for_serialization(obj), f"{version}.0", strict=True)


def test_cluster_wide_rights_read_jobs_pods_nodes_and_only_patch_jobs() -> None:
    role = _objects()["ClusterRole"]
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    # patch Jobs and create Events: money budgets suspend a run and say so; nothing is ever deleted in-cluster
    assert rules == {
        (("batch",), ("jobs",)): {"get", "list", "watch", "patch"},
        (("",), ("pods",)): {"get", "list", "watch"},
        (("",), ("nodes",)): {"get", "list"},
        (("",), ("events",)): {"create"},
    }
    binding = _objects()["ClusterRoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": REAPER_NAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": REAPER_NAME, "namespace": REAPER_NAMESPACE}]


def test_writes_are_limited_to_its_namespace_and_configmap() -> None:
    role = _objects()["Role"]
    assert role["metadata"]["namespace"] == REAPER_NAMESPACE
    verbs: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == [""]
        for resource in rule["resources"]:
            verbs.setdefault(resource, set()).update(rule["verbs"])
        if set(rule["verbs"]) & {"get", "patch", "update"} and rule["resources"] == ["configmaps"]:
            assert rule["resourceNames"] == [REAPER_CONFIG_MAP]
    assert verbs == {"configmaps": {"create", "get", "patch", "update"}, "events": {"create", "patch"}}
    assert "delete" not in str(role["rules"])


def test_cron_job_runs_the_reaper_every_five_minutes_one_at_a_time() -> None:
    cron = _objects()["CronJob"]
    assert cron["metadata"]["namespace"] == REAPER_NAMESPACE
    spec = cron["spec"]
    assert spec["schedule"] == "*/5 * * * *" and spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] <= 300
    pod = job["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "repo/runner-cpu:1"
    assert container["command"] == ["python", "-m", "rlcloud.gke.reaper"]
    assert pod["serviceAccountName"] == REAPER_NAME and pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert job["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "reaper"


def test_a_reaper_without_a_google_identity_enforces_runs_budgets_only() -> None:
    """``runs_only``: the same least-privilege RBAC (stopping a run needs Kubernetes permissions only), no
    Workload Identity annotation, and the program told not to ask the Container API (``--runs-only``)."""
    objs = {o["kind"]: o for o in (to_dict(obj) for obj in build_reaper_objects("i:1", None, runs_only=True))}
    container = objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "rlcloud.gke.reaper", "--runs-only"]
    assert objs["ServiceAccount"]["metadata"].get("annotations") is None
    assert objs["ClusterRole"]["rules"] == _objects()["ClusterRole"]["rules"]
    for obj in build_reaper_objects("i:1", None, runs_only=True):
        kubernetes_validate.validate(client.ApiClient().sanitize_for_serialization(obj), "1.33.0", strict=True)


def test_service_account_carries_the_workload_identity_annotation() -> None:
    sa = _objects()["ServiceAccount"]
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": GSA}
    # the direct principal form of Workload Identity grants the Kubernetes ServiceAccount itself
    assert to_dict(build_reaper_service_account(None))["metadata"].get("annotations") is None


def test_install_is_idempotent_and_updates(apiserver: FakeKubeApiServer, api_client: client.ApiClient) -> None:
    made = install_reaper(api_client, image="repo/runner-cpu:1", gcp_service_account=GSA)
    assert made[0] == "Namespace/rlcloud-system" and made[-1] == "CronJob/rlcloud-reaper"
    # a second install (every create() of the cluster) replaces what is there: a new image lands
    install_reaper(api_client, image="repo/runner-cpu:2", gcp_service_account=GSA)
    (cron,) = apiserver.list_objects("CronJob", REAPER_NAMESPACE)
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] == "repo/runner-cpu:2"
    assert [r["metadata"]["name"] for r in apiserver.list_objects("ClusterRole")] == [REAPER_NAME]
    assert len(apiserver.list_objects("ClusterRoleBinding")) == 1
    assert len(apiserver.list_objects("ServiceAccount", REAPER_NAMESPACE)) == 1
