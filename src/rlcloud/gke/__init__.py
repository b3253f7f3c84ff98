"""GKE backend: clusters and GPU node pools through the Container API (google-cloud-container).

    from rlcloud.gke import GkeCluster
    cluster = GkeCluster(spec, project="my-project")
    print(cluster.estimate_cost())
    cluster.create()                 # safe to re-run: attaches to what exists or is in flight
    api = cluster.kube_client()      # kubernetes ApiClient with a self-refreshing token
    cluster.delete()                 # idempotent

Names load on first use, so ``import rlcloud.gke`` stays light; the Google client libraries are
imported only by the modules that call them.

The modules: ``project`` (credentials, the Container API client, list, look up, the expired), ``cluster``
(the one handle of a cluster: create, wait, delete, access; find and reap, which make handles), ``info``
(ClusterInfo and its views: age, teardown, cost so far), ``reaper_setup`` (installing the in-cluster
reaper), ``reaper`` (that program), ``doctor`` (pre-flight checks of a project), and below them
``builders``, ``plan``, ``zones``, ``machines``, ``prices``, ``preflight``, ``operations``, ``errors``, ``kube``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlcloud.gke.cluster import GkeCluster, dedicated_cluster, reap
    from rlcloud.gke.errors import ClusterBusyError
    from rlcloud.gke.info import ClusterInfo
    from rlcloud.gke.operations import OperationUpdate
    from rlcloud.gke.preflight import check_cluster_spec
    from rlcloud.gke.prices import CostEstimate, CostItem, estimate_hourly_cost
    from rlcloud.gke.project import GkeProject

__all__ = [
    "ClusterBusyError",
    "ClusterInfo",
    "CostEstimate",
    "CostItem",
    "GkeCluster",
    "GkeProject",
    "OperationUpdate",
    "check_cluster_spec",
    "dedicated_cluster",
    "estimate_hourly_cost",
    "reap",
]

_LAZY = {
    "ClusterBusyError": "rlcloud.gke.errors",
    "ClusterInfo": "rlcloud.gke.info",
    "CostEstimate": "rlcloud.gke.prices",
    "CostItem": "rlcloud.gke.prices",
    "GkeCluster": "rlcloud.gke.cluster",
    "GkeProject": "rlcloud.gke.project",
    "OperationUpdate": "rlcloud.gke.operations",
    "check_cluster_spec": "rlcloud.gke.preflight",
    "dedicated_cluster": "rlcloud.gke.cluster",
    "estimate_hourly_cost": "rlcloud.gke.prices",
    "reap": "rlcloud.gke.cluster",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlcloud.gke' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
