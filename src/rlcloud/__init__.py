"""rlcloud: run Tensorforce reinforcement-learning experiments in parallel, here or on GKE with GPUs.

    from rlcloud import Experiment, ExperimentSpec
    exp = Experiment(ExperimentSpec.from_file("examples/cartpole_ppo.yaml"))
    exp.start(); exp.wait(); exp.metrics()
    rlcloud.compare(["run-a", "run-b"])            # many runs: one row each; by="config" for statistics

``import rlcloud`` stays light: the facades and specs load on first use, and TensorFlow, Tensorforce, the
Google and Kubernetes clients only inside the functions that need them.
"""

from __future__ import annotations

from rlcloud.errors import (
    AuthError,
    BackendError,
    CapacityError,
    ConflictError,
    MissingExtraError,
    NotFoundError,
    PreflightError,
    ProvisioningError,
    QuotaExceededError,
    RLCloudError,
    SpecError,
    StorageError,
    WaitTimeoutError,
    WorkloadError,
)

# `typing` costs ~10 ms to import, a third of `rlcloud --help`: mypy treats any TYPE_CHECKING name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rlcloud.backend import ExperimentStatus, SweepStatus
    from rlcloud.cluster import Cluster
    from rlcloud.comparison import compare
    from rlcloud.experiment import Experiment
    from rlcloud.gke.info import ClusterInfo
    from rlcloud.specs import ClusterSpec, ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.sweep import Sweep

__version__ = "0.1.0"

__all__ = [
    "AuthError",
    "BackendError",
    "CapacityError",
    "Cluster",
    "ClusterInfo",
    "ClusterSpec",
    "ConflictError",
    "Experiment",
    "ExperimentSpec",
    "ExperimentStatus",
    "MissingExtraError",
    "NotFoundError",
    "PreflightError",
    "ProvisioningError",
    "QuotaExceededError",
    "RLCloudError",
    "SpecError",
    "StorageError",
    "Sweep",
    "SweepSpec",
    "SweepStatus",
    "WaitTimeoutError",
    "WorkloadError",
    "__version__",
    "compare",
]

_LAZY = {
    "Cluster": "rlcloud.cluster",
    "ClusterInfo": "rlcloud.gke.info",
    "ExperimentStatus": "rlcloud.backend",
    "SweepStatus": "rlcloud.backend",
    "Experiment": "rlcloud.experiment",
    "ClusterSpec": "rlcloud.specs",
    "ExperimentSpec": "rlcloud.specs",
    "Sweep": "rlcloud.sweep",
    "SweepSpec": "rlcloud.specs.sweep",
    "compare": "rlcloud.comparison",
}


def __getattr__(name: str) -> Any:
    if name == "TimeoutError":  # the old name of WaitTimeoutError (it shadowed the builtin); deprecated
        from rlcloud import errors

        return errors.__getattr__(name)
    # pydantic model construction costs ~0.3 s here: load the specs and facades on first use only.
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name])
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlcloud' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
