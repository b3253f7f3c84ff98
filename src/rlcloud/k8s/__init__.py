"""Kubernetes layer: pure builders (spec -> kubernetes model objects) and a backend that applies them.

Importing this package is cheap: the ``kubernetes`` client is only imported when one of the names
below is first used (``rlcloud.k8s.build_workloads``...), so ``import rlcloud`` stays light.

- :func:`build_workloads`: the ConfigMap/Jobs/Service that run an ExperimentSpec (no API call).
- :func:`build_sweep_workloads`: the ConfigMap and ONE Indexed Job that run every trial of a SweepSpec.
- :func:`build_namespace_objects`: Namespace, ServiceAccount, Role, RoleBinding.
- :class:`KubernetesBackend`: ``ExperimentBackend`` over one ``kubernetes.client.ApiClient``.
- :func:`api_client_from_kubeconfig`: one ApiClient from a kubeconfig/context, leaving the global
  default configuration alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlcloud.k8s.backend import KubernetesBackend
    from rlcloud.k8s.builders import build_workloads
    from rlcloud.k8s.client import api_client_from_kubeconfig
    from rlcloud.k8s.namespace_builders import build_credentials_secret, build_namespace_objects
    from rlcloud.k8s.sweep_builders import build_sweep_workloads

__all__ = [
    "KubernetesBackend",
    "api_client_from_kubeconfig",
    "build_credentials_secret",
    "build_namespace_objects",
    "build_sweep_workloads",
    "build_workloads",
]

_WHERE = {
    "KubernetesBackend": "rlcloud.k8s.backend",
    "api_client_from_kubeconfig": "rlcloud.k8s.client",
    "build_credentials_secret": "rlcloud.k8s.namespace_builders",
    "build_namespace_objects": "rlcloud.k8s.namespace_builders",
    "build_sweep_workloads": "rlcloud.k8s.sweep_builders",
    "build_workloads": "rlcloud.k8s.builders",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'rlcloud.k8s' has no attribute {name!r}")
