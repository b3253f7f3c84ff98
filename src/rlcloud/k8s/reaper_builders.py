"""Pure builders of the in-cluster reaper: its namespace, identity, least-privilege RBAC and CronJob.

The reaper (``python -m rlcloud.gke.reaper``, :mod:`rlcloud.gke.reaper`) deletes its own GKE cluster when the
cluster's ttl has passed or it has run no rlcloud workload for its ``autodown`` time. What it may do
inside the cluster is exactly what it needs, nothing else:

* read batch Jobs and pods in every namespace (a ClusterRole with get/list/watch): rlcloud's
  experiments and sweeps are Jobs labelled ``app.kubernetes.io/managed-by=rlcloud``; for money budgets
  (:mod:`rlcloud.gke.budgets`) also read nodes (to price pods), patch Jobs (suspend a run over its budget,
  record its cost) and create Events (its warnings);
* in its own namespace only (a Role): create its ConfigMap ``rlcloud-reaper`` and get/patch/update that
  one object (``resourceNames``), and create/patch Events, so a user can read why a cluster goes.

Its Kubernetes ServiceAccount is annotated for GKE Workload Identity with a Google service account that
may only get and delete clusters (docs/gke-setup.md, "Teardown inside the cluster"). Nothing here calls
an API; :func:`rlcloud.k8s.reaper_install.install_reaper` sends what these return.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from rlcloud.k8s.builders import (
    LABEL_MANAGED_BY,
    MANAGED_BY,
    RUNNER_UID,
    WORKLOAD_IDENTITY_ANNOTATION,
)

__all__ = [
    "LABEL_COMPONENT",
    "REAPER_COMPONENT",
    "REAPER_CONFIG_MAP",
    "REAPER_NAME",
    "REAPER_NAMESPACE",
    "REAPER_SCHEDULE",
    "build_reaper_cluster_role",
    "build_reaper_cluster_role_binding",
    "build_reaper_cron_job",
    "build_reaper_namespace",
    "build_reaper_objects",
    "build_reaper_role",
    "build_reaper_role_binding",
    "build_reaper_service_account",
]

REAPER_NAMESPACE = "rlcloud-system"
REAPER_NAME = "rlcloud-reaper"  # ServiceAccount, ClusterRole(Binding), Role(Binding) and CronJob
REAPER_CONFIG_MAP = "rlcloud-reaper"  # where each run writes its decision
REAPER_SCHEDULE = "*/5 * * * *"
LABEL_COMPONENT = "app.kubernetes.io/component"
REAPER_COMPONENT = "reaper"
RBAC_GROUP = "rbac.authorization.k8s.io"
# One run reads two lists and writes one ConfigMap: a minute is plenty; a run that hangs (an unreachable
# API) must not pile up behind the next one (concurrencyPolicy Forbid) for long.
RUN_DEADLINE_SECONDS = 240
# The reaper's own Jobs and pods carry the managed-by label too (they are rlcloud's): the component label
# and the namespace tell them apart from experiments, which the reaper ignores in its own namespace.
_LABELS = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: REAPER_COMPONENT}


def _meta(name: str, namespace: str | None = None) -> k8s.V1ObjectMeta:
    return k8s.V1ObjectMeta(name=name, namespace=namespace, labels=dict(_LABELS))


def build_reaper_namespace(namespace: str = REAPER_NAMESPACE) -> k8s.V1Namespace:
    """The reaper's own namespace (apart from experiments, so its RBAC can be namespaced)."""
    return k8s.V1Namespace(api_version="v1", kind="Namespace", metadata=_meta(namespace))


def build_reaper_service_account(
    gcp_service_account: str | None, namespace: str = REAPER_NAMESPACE
) -> k8s.V1ServiceAccount:
    """The reaper's ServiceAccount, annotated for Workload Identity with ``gcp_service_account`` (a Google
    service account that may only get and delete clusters). None: no annotation, for the direct
    principal form of Workload Identity, where IAM grants the Kubernetes ServiceAccount itself."""
    meta = _meta(REAPER_NAME, namespace)
    if gcp_service_account:
        meta.annotations = {WORKLOAD_IDENTITY_ANNOTATION: gcp_service_account}
    # the reaper calls the Kubernetes API, so it needs its token (unlike the runner pods)
    return k8s.V1ServiceAccount(api_version="v1", kind="ServiceAccount", metadata=meta)


def build_reaper_cluster_role() -> k8s.V1ClusterRole:
    """Jobs, pods and nodes in every namespace: how the reaper learns what runs and what it costs; patching
    Jobs and creating Events: how it stops a run over its money budget and says so."""
    return k8s.V1ClusterRole(
        api_version=f"{RBAC_GROUP}/v1",
        kind="ClusterRole",
        metadata=_meta(REAPER_NAME),
        rules=[
            # patch: money budgets (rlcloud.gke.budgets) suspend a run's Jobs and record its cost on them
            k8s.V1PolicyRule(api_groups=["batch"], resources=["jobs"], verbs=["get", "list", "watch", "patch"]),
            k8s.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch"]),
            # a pod's cost is its node's list price (machine type, GPUs, spot) x its share of the node
            k8s.V1PolicyRule(api_groups=[""], resources=["nodes"], verbs=["get", "list"]),
            # the BudgetWarning / BudgetExceeded Events on a run's Job, in the run's namespace
            k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["create"]),
        ],
    )


def build_reaper_cluster_role_binding(namespace: str = REAPER_NAMESPACE) -> k8s.V1ClusterRoleBinding:
    """Binds :func:`build_reaper_cluster_role` to the reaper's ServiceAccount."""
    return k8s.V1ClusterRoleBinding(
        api_version=f"{RBAC_GROUP}/v1",
        kind="ClusterRoleBinding",
        metadata=_meta(REAPER_NAME),
        role_ref=k8s.V1RoleRef(api_group=RBAC_GROUP, kind="ClusterRole", name=REAPER_NAME),
        subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name=REAPER_NAME, namespace=namespace)],
    )


def build_reaper_role(namespace: str = REAPER_NAMESPACE) -> k8s.V1Role:
    """In the reaper's namespace only: its one ConfigMap, and Events.

    ``create`` cannot be limited by ``resourceNames`` (the name is not known before the object exists), so
    it has its own rule; reading and changing are limited to the ConfigMap ``rlcloud-reaper``.
    """
    return k8s.V1Role(
        api_version=f"{RBAC_GROUP}/v1",
        kind="Role",
        metadata=_meta(REAPER_NAME, namespace),
        rules=[
            k8s.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["create"]),
            k8s.V1PolicyRule(
                api_groups=[""],
                resources=["configmaps"],
                resource_names=[REAPER_CONFIG_MAP],
                verbs=["get", "patch", "update"],
            ),
            k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["create", "patch"]),
        ],
    )


def build_reaper_role_binding(namespace: str = REAPER_NAMESPACE) -> k8s.V1RoleBinding:
    """Binds :func:`build_reaper_role` to the reaper's ServiceAccount, in its namespace."""
    return k8s.V1RoleBinding(
        api_version=f"{RBAC_GROUP}/v1",
        kind="RoleBinding",
        metadata=_meta(REAPER_NAME, namespace),
        role_ref=k8s.V1RoleRef(api_group=RBAC_GROUP, kind="Role", name=REAPER_NAME),
        subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name=REAPER_NAME, namespace=namespace)],
    )


def build_reaper_cron_job(
    image: str, namespace: str = REAPER_NAMESPACE, *, schedule: str = REAPER_SCHEDULE, runs_only: bool = False
) -> k8s.V1CronJob:
    """The CronJob that runs ``python -m rlcloud.gke.reaper`` in the cpu runner ``image`` every 5 minutes.

    ``runs_only``: the reaper has no Google identity, so it enforces runs' and sweeps' budgets only
    (``--runs-only``: Kubernetes calls alone; the cluster's ttl, autodown and budget are not its job).

    One run at a time (``Forbid``), no retries (the next run is 5 minutes away), and only the latest
    run of each outcome is kept, so ``kubectl -n rlcloud-system logs job/...`` shows the last decision.
    """
    container = k8s.V1Container(
        name="reaper",
        image=image,
        image_pull_policy="IfNotPresent",
        command=["python", "-m", "rlcloud.gke.reaper", *(["--runs-only"] if runs_only else [])],
        env=[
            k8s.V1EnvVar(name="RLCLOUD_REAPER_NAMESPACE", value=namespace),
            # read-only root filesystem: no bytecode cache to write
            k8s.V1EnvVar(name="PYTHONDONTWRITEBYTECODE", value="1"),
        ],
        resources=k8s.V1ResourceRequirements(requests={"cpu": "50m", "memory": "192Mi"}, limits={"memory": "512Mi"}),
        security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
        ),
    )
    pod_spec = k8s.V1PodSpec(
        restart_policy="Never",
        containers=[container],
        service_account_name=REAPER_NAME,
        enable_service_links=False,
        termination_grace_period_seconds=10,
        security_context=k8s.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=RUNNER_UID,
            run_as_group=RUNNER_UID,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
    )
    job_spec = k8s.V1JobSpec(
        backoff_limit=0,
        active_deadline_seconds=RUN_DEADLINE_SECONDS,
        ttl_seconds_after_finished=3600,
        template=k8s.V1PodTemplateSpec(metadata=k8s.V1ObjectMeta(labels=dict(_LABELS)), spec=pod_spec),
    )
    return k8s.V1CronJob(
        api_version="batch/v1",
        kind="CronJob",
        metadata=_meta(REAPER_NAME, namespace),
        spec=k8s.V1CronJobSpec(
            schedule=schedule,
            concurrency_policy="Forbid",
            # a run missed by more than 2 minutes is skipped: the next one is due soon anyway
            starting_deadline_seconds=120,
            successful_jobs_history_limit=1,
            failed_jobs_history_limit=1,
            job_template=k8s.V1JobTemplateSpec(metadata=k8s.V1ObjectMeta(labels=dict(_LABELS)), spec=job_spec),
        ),
    )


def build_reaper_objects(
    image: str, gcp_service_account: str | None, namespace: str = REAPER_NAMESPACE, *, runs_only: bool = False
) -> list[Any]:
    """Every object of the reaper, in creation order (namespace first, CronJob last); ``runs_only``: see
    :func:`build_reaper_cron_job`."""
    return [
        build_reaper_namespace(namespace),
        build_reaper_service_account(gcp_service_account, namespace),
        build_reaper_cluster_role(),
        build_reaper_cluster_role_binding(namespace),
        build_reaper_role(namespace),
        build_reaper_role_binding(namespace),
        build_reaper_cron_job(image, namespace, runs_only=runs_only),
    ]
