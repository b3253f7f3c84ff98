"""Specs: pydantic models of user input (ClusterSpec, ExperimentSpec) and how files become them.

Pure data: nothing here imports the cloud libraries, the runner or the network. Observed state
(ExperimentStatus, ClusterInfo) lives in separate classes (rlcloud.backend, rlcloud.gke).
"""

from __future__ import annotations

from rlcloud.specs._base import Duration, Frequency
from rlcloud.specs.cluster import Autoscaling, ClusterSpec, GpuType
from rlcloud.specs.experiment import EvaluationSpec, ExperimentSpec, Resources, RolesResources
from rlcloud.specs.legacy import LegacySpecWarning

__all__ = [
    "Autoscaling",
    "ClusterSpec",
    "Duration",
    "EvaluationSpec",
    "ExperimentSpec",
    "Frequency",
    "GpuType",
    "LegacySpecWarning",
    "Resources",
    "RolesResources",
]
