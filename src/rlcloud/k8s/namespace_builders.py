"""Pure builders of a namespace's objects: Namespace, the runner's ServiceAccount, its Role and RoleBinding, and
the Secret of a key file for clusters without Workload Identity. No API call (rlcloud.k8s.namespace applies
them).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from rlcloud.k8s.builders import (
    CREDENTIALS_KEY,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    RUNNER_SERVICE_ACCOUNT,
    WORKLOAD_IDENTITY_ANNOTATION,
)

__all__ = [
    "build_credentials_secret",
    "build_namespace",
    "build_namespace_objects",
    "build_role",
    "build_role_binding",
    "build_service_account",
]


def build_namespace(namespace: str) -> k8s.V1Namespace:
    """The namespace rlcloud runs experiments in (created when missing)."""
    return k8s.V1Namespace(
        api_version="v1",
        kind="Namespace",
        metadata=k8s.V1ObjectMeta(name=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
    )


def build_service_account(
    namespace: str,
    *,
    name: str = RUNNER_SERVICE_ACCOUNT,
    gcp_service_account: str | None = None,
) -> k8s.V1ServiceAccount:
    """The ServiceAccount the pods run as; with ``gcp_service_account`` (an email) it is annotated for
    GKE Workload Identity, so pods reach GCS as that Google service account without any key."""
    annotations = {WORKLOAD_IDENTITY_ANNOTATION: gcp_service_account} if gcp_service_account else None
    return k8s.V1ServiceAccount(
        api_version="v1",
        kind="ServiceAccount",
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels={LABEL_MANAGED_BY: MANAGED_BY},
            annotations=annotations,
        ),
        # pods never call the Kubernetes API; Workload Identity does not need the token either
        automount_service_account_token=False,
    )


def build_role(namespace: str, *, name: str = RUNNER_SERVICE_ACCOUNT) -> k8s.V1Role:
    """A Role limited to the namespace: read-only access to the experiment's own kinds of objects."""
    return k8s.V1Role(
        api_version="rbac.authorization.k8s.io/v1",
        kind="Role",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
        rules=[
            k8s.V1PolicyRule(api_groups=[""], resources=["pods", "configmaps"], verbs=["get", "list", "watch"]),
            k8s.V1PolicyRule(api_groups=["batch"], resources=["jobs"], verbs=["get", "list", "watch"]),
        ],
    )


def build_role_binding(
    namespace: str, *, name: str = RUNNER_SERVICE_ACCOUNT, service_account: str = RUNNER_SERVICE_ACCOUNT
) -> k8s.V1RoleBinding:
    """Binds :func:`build_role` to the runner's ServiceAccount, in the namespace only."""
    return k8s.V1RoleBinding(
        api_version="rbac.authorization.k8s.io/v1",
        kind="RoleBinding",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
        role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=name),
        subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name=service_account, namespace=namespace)],
    )


def build_namespace_objects(
    namespace: str, *, service_account: str = RUNNER_SERVICE_ACCOUNT, gcp_service_account: str | None = None
) -> list[Any]:
    """Namespace, ServiceAccount, Role and RoleBinding, in creation order."""
    return [
        build_namespace(namespace),
        build_service_account(namespace, name=service_account, gcp_service_account=gcp_service_account),
        build_role(namespace, name=service_account),
        build_role_binding(namespace, name=service_account, service_account=service_account),
    ]


def build_credentials_secret(namespace: str, key_json: bytes | str, *, name: str = "rlcloud-gcp-key") -> k8s.V1Secret:
    """A Secret holding a Google service-account key file, for clusters without Workload Identity.

    The key only ever lives in this Secret; pods mount it read-only and get the file's *path* in
    ``GOOGLE_APPLICATION_CREDENTIALS``. Never log or print the returned object.
    """
    text = key_json.decode() if isinstance(key_json, bytes) else key_json
    return k8s.V1Secret(
        api_version="v1",
        kind="Secret",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
        type="Opaque",
        string_data={CREDENTIALS_KEY: text},
    )
