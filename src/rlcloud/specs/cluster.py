"""ClusterSpec: what a GKE cluster for experiments should look like (user input, pure data)."""

from __future__ import annotations

import math
import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlcloud.errors import excerpt
from rlcloud.specs._base import NOT_BOOL, Duration, StrictModel, Usd, check_dns_label, take_budget_alias, why

ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
RESERVATION_RE = re.compile(r"^(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
QUEUE_RE = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# A Google service account's email: 6-30 character account id @ project id (or a Google-managed domain).
SERVICE_ACCOUNT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\.gserviceaccount\.com$")
#: The in-cluster reaper runs every 5 minutes, so a shorter idle time could not be honoured.
MIN_AUTODOWN_SECONDS = 600


class GpuType(StrEnum):
    """Accelerators GKE offers today (the value is the GCE accelerator type)."""

    P100 = "nvidia-tesla-p100"
    P4 = "nvidia-tesla-p4"
    V100 = "nvidia-tesla-v100"
    T4 = "nvidia-tesla-t4"
    L4 = "nvidia-l4"
    A100 = "nvidia-tesla-a100"
    A100_80GB = "nvidia-a100-80gb"
    H100 = "nvidia-h100-80gb"
    H100_MEGA = "nvidia-h100-mega-80gb"
    H200 = "nvidia-h200-141gb"
    # newer than what rlcloud has run on: accepted with a warning (EXPERIMENTAL_GPU_TYPES)
    B200 = "nvidia-b200"
    GB200 = "nvidia-gb200"
    RTX_PRO_6000 = "nvidia-rtx-pro-6000"


#: The short names people type (`--gpu-type t4`, ``gpu_type: a100``) for each accelerator type.
GPU_TYPE_ALIASES: dict[str, GpuType] = {
    "p100": GpuType.P100,
    "p4": GpuType.P4,
    "v100": GpuType.V100,
    "t4": GpuType.T4,
    "l4": GpuType.L4,
    "a100": GpuType.A100,
    "a100-40gb": GpuType.A100,
    "a100-80gb": GpuType.A100_80GB,
    "h100": GpuType.H100,
    "h100-80gb": GpuType.H100,
    "h100-mega": GpuType.H100_MEGA,
    "h100-mega-80gb": GpuType.H100_MEGA,
    "h200": GpuType.H200,
    "h200-141gb": GpuType.H200,
    "b200": GpuType.B200,
    "gb200": GpuType.GB200,
    "rtx-pro-6000": GpuType.RTX_PRO_6000,
}

#: GPU types rlcloud accepts but has not run on, each with what to expect (a warning when a cluster uses them).
#: Machine types and names from cloud.google.com/compute/docs/gpus (A4: B200, A4X: GB200, G4: RTX PRO 6000).
EXPERIMENTAL_GPU_TYPES: dict[GpuType, str] = {
    GpuType.B200: "nvidia-b200 (A4, a4-highgpu-8g) is new to rlcloud: its price, quota names and capacity "
    "rules are not in rlcloud's tables; A4 capacity comes mostly through reservations, Spot or Flex-start",
    GpuType.GB200: "nvidia-gb200 (A4X, a4x-highgpu-4g) is new to rlcloud: A4X machines are Arm (aarch64), "
    "and rlcloud's runner images are built for amd64, so runs need an arm64 image of your own; capacity "
    "comes through reservations",
    GpuType.RTX_PRO_6000: "nvidia-rtx-pro-6000 (G4, g4-standard-48/96/192/384) is new to rlcloud: its price "
    "and quota names are not in rlcloud's tables",
}

#: Hopper and newer GPUs: TensorFlow's wheels carry machine code (SASS) up to sm_89 and only compute_90 PTX
#: for these, which the node's driver must JIT-compile; GKE's DEFAULT driver branch can be too old for
#: that PTX (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), so their nodes get the LATEST driver by default.
LATEST_DRIVER_GPU_TYPES = frozenset(
    {GpuType.H100, GpuType.H100_MEGA, GpuType.H200, GpuType.B200, GpuType.GB200, GpuType.RTX_PRO_6000}
)


#: Memory of each GPU type in GB (cloud.google.com/compute/docs/gpus: T4 16, P4 8, P100 16, V100 16, L4 24,
#: A100 40/80, H100 80, H200 141, B200 180, GB200 186, RTX PRO 6000 96).
GPU_MEMORY_GB: dict[GpuType, int] = {
    GpuType.P100: 16,
    GpuType.P4: 8,
    GpuType.V100: 16,
    GpuType.T4: 16,
    GpuType.L4: 24,
    GpuType.A100: 40,
    GpuType.A100_80GB: 80,
    GpuType.H100: 80,
    GpuType.H100_MEGA: 80,
    GpuType.H200: 141,
    GpuType.B200: 180,
    GpuType.GB200: 186,
    GpuType.RTX_PRO_6000: 96,
}
#: What each process sharing a GPU leaves for its CUDA context and cuDNN/cuBLAS workspaces (MiB): the driver's
#: context takes a few hundred MiB per process outside TensorFlow's allocator.
GPU_CONTEXT_MIB = 512


def shared_gpu_memory_mb(gpu_type: str, trials_per_gpu: int) -> int:
    """The MiB of GPU memory each of ``trials_per_gpu`` TensorFlow processes on one ``gpu_type`` GPU may take:
    the GPU's memory (less 5% the driver keeps) split evenly, less each process's CUDA context."""
    total_mib = GPU_MEMORY_GB[GpuType(gpu_type)] * 1024 * 0.95
    return max(int(total_mib / trials_per_gpu) - GPU_CONTEXT_MIB, 256)


def valid_gpu_types() -> str:
    """Every accepted GPU type for an error message: the GKE names, each with its short aliases."""
    short: dict[GpuType, list[str]] = {}
    for alias, gpu in GPU_TYPE_ALIASES.items():
        short.setdefault(gpu, []).append(alias)
    return ", ".join(f"{t.value} ({'/'.join(short[t])})" if t in short else t.value for t in GpuType)


def gpu_type_value(value: str) -> str | None:
    """The GKE accelerator type ``value`` names (itself, or what a short alias such as ``t4`` stands for;
    any case, surrounding spaces ignored), or None when it names none."""
    key = value.strip().lower()
    if key in GPU_TYPE_ALIASES:
        return GPU_TYPE_ALIASES[key].value
    if key in {t.value for t in GpuType}:
        return key
    # "nvidia-t4" / "tesla-t4": a GKE prefix around an alias
    for prefix in ("nvidia-tesla-", "nvidia-", "tesla-"):
        if key.startswith(prefix) and key[len(prefix) :] in GPU_TYPE_ALIASES:
            return GPU_TYPE_ALIASES[key[len(prefix) :]].value
    return None


RETIRED_GPU_TYPES = {
    "nvidia-tesla-k80": "nvidia-tesla-k80 reached end of support on 2024-05-01 and GKE can no longer create it",
}

# The machine type used when a spec names neither machine_type nor cpus/memory: the smallest sensible
# host for one GPU of each type (GCE ties A100/H100/L4 to their own machine families).
DEFAULT_MACHINE_TYPES: dict[GpuType | None, str] = {
    None: "n1-standard-4",
    GpuType.P100: "n1-standard-8",
    GpuType.P4: "n1-standard-8",
    GpuType.V100: "n1-standard-8",
    GpuType.T4: "n1-standard-8",
    GpuType.L4: "g2-standard-8",
    GpuType.A100: "a2-highgpu-1g",
    GpuType.A100_80GB: "a2-ultragpu-1g",
    GpuType.H100: "a3-highgpu-1g",
    GpuType.H100_MEGA: "a3-megagpu-8g",
    GpuType.H200: "a3-ultragpu-8g",
    GpuType.B200: "a4-highgpu-8g",
    GpuType.GB200: "a4x-highgpu-4g",
    GpuType.RTX_PRO_6000: "g4-standard-48",
}

#: GPUs built into G2 (L4) and G4 (RTX PRO 6000) machine types, by vCPU count (cloud.google.com/compute/docs/gpus).
G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8}
G4_GPUS = {48: 1, 96: 2, 192: 4, 384: 8}
# A2/A3/A4/A4X machine types say their GPU count in their name: a3-highgpu-4g has 4.
_COUNT_IN_NAME_RE = re.compile(r"^a[0-9]x?-[a-z]+gpu-([0-9]+)g$")
_G_SERIES_RE = re.compile(r"^(g2|g4)-standard-([0-9]+)$")


def built_in_gpu_count(machine_type: str) -> int | None:
    """How many GPUs an accelerator-optimized machine type comes with (None: a machine GPUs attach to, or
    one rlcloud does not know). Pure name reading: ``a3-highgpu-4g`` -> 4, ``g2-standard-24`` -> 2."""
    name = machine_type.strip().lower()
    counted = _COUNT_IN_NAME_RE.match(name)
    if counted:
        return int(counted.group(1))
    series = _G_SERIES_RE.match(name)
    if series:
        return (G2_GPUS if series.group(1) == "g2" else G4_GPUS).get(int(series.group(2)))
    return None


# N1 custom machine types: 1 or an even number of vCPUs up to 96, 0.9-6.5 GB per vCPU, memory a multiple
# of 256 MiB (cloud.google.com/compute/docs/instances/creating-instance-with-custom-machine-type).
CUSTOM_MIN_GB_PER_CPU = 0.9
CUSTOM_MAX_GB_PER_CPU = 6.5
CUSTOM_MAX_CPUS = 96
#: Nodes in one node pool: GKE allows 1000 per zone; a bigger number is a typo, and a costly one.
MAX_NODES = 1000
_NODES_WHY = "GKE allows at most 1000 nodes per node pool and zone"
#: Boot disk size in GB: a persistent disk holds at most 64 TB.
MAX_DISK_GB = 65536


def custom_machine_type(cpus: int, memory_gb: float) -> str:
    """The N1 custom machine type for ``cpus`` vCPUs and ``memory_gb`` GB, rounded up to 256 MiB.

    Raises ValueError saying the valid range when GCE would refuse the shape.
    """
    if cpus < 1 or cpus > CUSTOM_MAX_CPUS or (cpus > 1 and cpus % 2):
        raise ValueError(f"cpus_per_node must be 1 or an even number up to {CUSTOM_MAX_CPUS}; got {cpus}")
    mib = math.ceil(memory_gb * 1024 / 256) * 256
    low, high = CUSTOM_MIN_GB_PER_CPU * cpus, CUSTOM_MAX_GB_PER_CPU * cpus
    if not (low * 1024 - 1e-6 <= mib <= high * 1024 + 1e-6):
        raise ValueError(
            f"memory_per_node={memory_gb:g} GB is outside what GCE allows for {cpus} vCPUs: "
            f"{low:g}-{high:g} GB ({CUSTOM_MIN_GB_PER_CPU}-{CUSTOM_MAX_GB_PER_CPU} GB per vCPU)"
        )
    return f"custom-{cpus}-{mib}"


#: GPU sharing (issue 42). GKE's "Share GPUs with multiple workloads using time-sharing"
#: (cloud.google.com/kubernetes-engine/docs/how-to/timesharing-gpus): Standard clusters from 1.23.7-gke.1400, every
#: NVIDIA GPU model; "Share GPUs ... using NVIDIA MPS" (.../how-to/nvidia-mps-gpus): Standard clusters from
#: 1.27.7-gke.1088000, every NVIDIA GPU type. Both cap the containers sharing one physical GPU at 48 (GKE's
#: ComputeClass gpuSharing.maxSharedClientsPerGPU: 2-48), and each container asks for exactly one
#: nvidia.com/gpu ("at most 1 nvidia.com/gpu can be requested on GPU nodes" otherwise).
MAX_SHARED_CLIENTS_PER_GPU = 48
MIN_SHARED_CLIENTS_PER_GPU = 2
GPU_SHARING_MIN_VERSION = {"time-sharing": "1.23.7-gke.1400", "mps": "1.27.7-gke.1088000"}
#: flex-start (Dynamic Workload Scheduler) GPU node pools: GKE 1.32.2-gke.1652000 or later
#: (cloud.google.com/kubernetes-engine/docs/concepts/dws, Requirements).
FLEX_START_MIN_VERSION = "1.32.2-gke.1652000"
#: Compute Engine "About Flex-start VMs" (cloud.google.com/compute/docs/instances/about-flex-start-vms): "Flex-start
#: VMs support all accelerator-optimized machine types (except A4X and G4)": A2, A3, A4 and G2; N1 hosts (T4, P4,
#: P100, V100) are not accelerator-optimized.
FLEX_START_MACHINE_PREFIXES = ("a2-", "a3-", "a4-", "g2-")


class GpuSharingStrategy(StrEnum):
    """How several containers share one GPU (GKE's GPUSharingConfig.GPUSharingStrategy)."""

    TIME_SHARING = "time-sharing"
    MPS = "mps"


class CapacityRung(StrEnum):
    """One way of obtaining GPU nodes, a rung of :attr:`ClusterSpec.capacity`."""

    SPOT = "spot"
    ON_DEMAND = "on-demand"
    FLEX_START = "flex-start"


class GpuSharing(StrictModel):
    """Several containers on one GPU: the GPU pool's ``gpuSharingConfig`` (each pod asks for one shared GPU)."""

    strategy: GpuSharingStrategy = Field(
        GpuSharingStrategy.TIME_SHARING,
        description="'time-sharing' (GKE 1.23.7+, the GPU switches between containers; what a sweep's "
        "trials_per_gpu uses) or 'mps' (NVIDIA Multi-Process Service, GKE 1.27.7+, kernels of several containers "
        "run at once; its pods need hostIPC, which rlcloud's pods do not ask for: for other workloads).",
    )
    clients_per_gpu: Annotated[int, NOT_BOOL] = Field(
        ...,
        ge=MIN_SHARED_CLIENTS_PER_GPU,
        le=MAX_SHARED_CLIENTS_PER_GPU,
        json_schema_extra=why("GKE shares one physical GPU among 2 to 48 containers"),
        description="Containers (trials) that share one physical GPU: 2 to 48.",
    )


class Autoscaling(StrictModel):
    """Autoscaling bounds of the GPU (or, without GPUs, the worker) node pool."""

    min_nodes: Annotated[int, NOT_BOOL] = Field(
        0,
        ge=0,
        le=MAX_NODES,
        json_schema_extra=why(_NODES_WHY),
        description="Fewest nodes the pool scales down to (0 lets it empty).",
    )
    max_nodes: Annotated[int, NOT_BOOL] = Field(
        ..., ge=1, le=MAX_NODES, json_schema_extra=why(_NODES_WHY), description="Most nodes the pool scales up to."
    )

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_nodes > self.max_nodes:
            raise PydanticCustomError(
                "at:min_nodes",
                "autoscaling.min_nodes ({min}) must not exceed autoscaling.max_nodes ({max})",
                {"min": self.min_nodes, "max": self.max_nodes},
            )
        return self


class ClusterSpec(StrictModel):
    """A GKE cluster for running experiments: size, machines, GPUs, lifetime.

    Give either ``machine_type`` or ``cpus_per_node`` + ``memory_per_node`` (which derive an N1 custom
    machine type); with neither, a default fitting the GPU type is used.
    """

    name: str = Field(..., description="Cluster name: a DNS-1123 label of at most 40 characters.")
    project: str | None = Field(
        None, description="Google Cloud project id; when empty, taken from Application Default Credentials."
    )
    location: str = Field(
        "us-central1-a",
        description="Zone (e.g. 'us-central1-a': a zonal cluster) or region (e.g. 'us-central1': regional).",
    )
    machine_type: str | None = Field(
        None, description="GCE machine type of the experiment nodes, e.g. 'n1-standard-8' or 'g2-standard-8'."
    )
    cpus_per_node: Annotated[int | None, NOT_BOOL] = Field(
        None,
        # bounded (1 or even, up to 96) by custom_machine_type(), whose message says the whole rule
        description="vCPUs per node; with memory_per_node it derives a custom N1 machine type.",
    )
    memory_per_node: Annotated[float | None, NOT_BOOL] = Field(
        None,
        gt=0,
        le=CUSTOM_MAX_CPUS * CUSTOM_MAX_GB_PER_CPU,
        allow_inf_nan=False,
        json_schema_extra=why("an N1 custom machine type has at most 6.5 GB per vCPU and 96 vCPUs"),
        description="Memory per node in GB; with cpus_per_node it derives a custom N1 machine type.",
    )
    num_nodes: Annotated[int, NOT_BOOL] = Field(
        1,
        ge=1,
        le=MAX_NODES,
        json_schema_extra=why(_NODES_WHY),
        description="Number of experiment nodes (the GPU pool when GPUs are used).",
    )
    disk_size: Annotated[int, NOT_BOOL] = Field(
        100,
        ge=10,
        le=MAX_DISK_GB,
        json_schema_extra=why("a persistent disk holds at most 64 TB"),
        description="Boot disk size per node in GB (at least 10).",
    )
    gpus_per_node: Annotated[int, NOT_BOOL] = Field(
        0,
        ge=0,
        le=16,
        json_schema_extra=why("a GCE machine has at most 16 GPUs"),
        description="GPUs per node; 0 for a CPU-only cluster. With gpu_type and no count: what the machine type "
        "carries (1 on N1, 8 on a3-ultragpu-8g).",
    )
    gpu_type: GpuType | None = Field(
        None,
        description="Accelerator type, e.g. 'nvidia-tesla-t4' or 'nvidia-l4' (short names such as 't4', 'l4', "
        "'a100', 'a100-80gb', 'h100' are accepted); required when gpus_per_node > 0. h100 needs spot: true, h200 a "
        "reservation; b200, gb200 and rtx-pro-6000 are experimental (accepted with a warning).",
    )
    spot: bool = Field(False, description="Use Spot VMs for the experiment nodes (much cheaper, can be preempted).")
    autoscaling: Autoscaling | None = Field(
        None, description="Autoscaling bounds for the experiment node pool; none keeps num_nodes fixed."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Extra GCE labels on the cluster (lowercase keys and values)."
    )
    ttl: Duration | None = Field(
        None,
        description="Lifetime, e.g. '6h': the cluster gets an expiry label; `rlcloud cluster reap` deletes it after.",
    )
    fallback_zones: list[str] = Field(
        default_factory=list,
        description="Zones to retry in when the location has no capacity (ZONE_RESOURCE_POOL_EXHAUSTED).",
    )
    queue: str | None = Field(
        None,
        description="Kueue LocalQueue that sweeps are submitted to: their Job is created suspended with the "
        "kueue.x-k8s.io/queue-name label, and Kueue starts it when the queue has quota. Empty: no Kueue.",
    )
    autodown: Duration | None = Field(
        None,
        description="Idle time, e.g. '30m': the cluster deletes itself after running no rlcloud workload for this "
        "long (an in-cluster reaper checks every 5 minutes; at least 10m).",
    )
    budget: Usd | None = Field(
        None,
        description="A money cap for the cluster (see the experiment's budget): the in-cluster reaper warns at 90% "
        "of the cluster's estimated cost so far (its pools' node-hours at list prices plus the GKE fee) and at "
        "100% stops every rlcloud run on it (they checkpoint), waits until their pods are gone (their results "
        "are stored), then deletes the cluster.",
    )
    node_locations: list[str] = Field(
        default_factory=list,
        description="Zones of a regional cluster's GPU pool (gcloud's --node-locations), e.g. ['us-central1-a']: "
        "each zone gets num_nodes nodes. Empty: rlcloud picks one zone of the region that offers gpu_type (from "
        "Compute Engine's accelerator types). Regional GPU clusters only.",
    )
    reservation: str | None = Field(
        None,
        description="Compute Engine reservation the GPU nodes consume (a name, or projects/P/reservations/NAME "
        "for a shared one); A3 Ultra (h200) capacity comes only through reservations.",
    )
    gpu_sharing: GpuSharing | None = Field(
        None,
        description="Share each GPU among several containers, e.g. {strategy: time-sharing, clients_per_gpu: 4}: "
        "a sweep's trials_per_gpu trials then run on one GPU. None: one container per GPU.",
    )
    capacity: list[CapacityRung] = Field(
        default_factory=list,
        description="A capacity ladder for the GPU pool, e.g. [spot, on-demand, flex-start] (any order, any subset): "
        "on a stockout or quota error the pool tries the other zones that offer the GPU, then the next rung. "
        "flex-start (Dynamic Workload Scheduler) needs an accelerator-optimized machine (A2, A3, A4, G2: L4 or "
        "A100/H100, not T4). Empty: the spot setting alone.",
    )
    service_account: str | None = Field(
        None,
        description="Google service account the nodes run as, e.g. rlcloud-nodes@my-project.iam.gserviceaccount.com "
        "(least privilege: roles/container.defaultNodeServiceAccount and roles/artifactregistry.reader); "
        "none: the project's default Compute Engine service account.",
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        # gpu_type alone means as many GPUs as the node's machine type has (1 for N1, 8 for a3-ultragpu-8g): the
        # common case should not need two settings. An explicit gpus_per_node: 0 stays 0 (and contradicts
        # gpu_type, which _consistency reports).
        data = take_budget_alias(data)
        if isinstance(data, dict) and "spot" not in data and isinstance(data.get("capacity"), list):
            # a ladder that starts on spot: the pool, its quota check and its estimate are spot's
            first = data["capacity"][0] if data["capacity"] else None
            if isinstance(first, str) and first.strip().lower() == "spot":
                data = {**data, "spot": True}
        if isinstance(data, dict) and data.get("gpu_type") and data.get("gpus_per_node") is None:
            machine = data.get("machine_type")
            if not isinstance(machine, str) and data.get("cpus_per_node") is None:
                gpu = gpu_type_value(data["gpu_type"]) if isinstance(data["gpu_type"], str) else None
                machine = DEFAULT_MACHINE_TYPES.get(GpuType(gpu)) if gpu else None
            count = built_in_gpu_count(machine) if isinstance(machine, str) else None
            data = {**data, "gpus_per_node": count or 1}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_dns_label(value, what="cluster name")

    @field_validator("project")
    @classmethod
    def _project(cls, value: str | None) -> str | None:
        if value is not None and not PROJECT_RE.match(value):
            raise PydanticCustomError(
                "project",
                "project must be a Google Cloud project id: 6-30 lowercase letters, digits or '-', "
                "starting with a letter (e.g. 'my-rl-project')",
            )
        return value

    @field_validator("location")
    @classmethod
    def _location(cls, value: str) -> str:
        if not (ZONE_RE.match(value) or REGION_RE.match(value)):
            raise PydanticCustomError(
                "location",
                "location must be a zone such as 'us-central1-a' or a region such as 'us-central1'",
            )
        return value

    @field_validator("fallback_zones")
    @classmethod
    def _zones(cls, value: list[str]) -> list[str]:
        bad = [z for z in value if not ZONE_RE.match(z)]
        if bad:
            raise PydanticCustomError(
                "zones", "fallback_zones must be zones such as 'us-central1-b'; not {bad}", {"bad": excerpt(bad)}
            )
        return value

    @field_validator("node_locations")
    @classmethod
    def _node_locations(cls, value: list[str]) -> list[str]:
        bad = [z for z in value if not ZONE_RE.match(z)]
        if bad:
            raise PydanticCustomError(
                "zones", "node_locations must be zones such as 'us-central1-a'; not {bad}", {"bad": excerpt(bad)}
            )
        if len(set(value)) != len(value):
            raise PydanticCustomError("zones", "node_locations names a zone twice: {v}", {"v": excerpt(value)})
        return value

    @field_validator("reservation")
    @classmethod
    def _reservation(cls, value: str | None) -> str | None:
        if value is not None and not RESERVATION_RE.match(value):
            raise PydanticCustomError(
                "reservation",
                "reservation must name a Compute Engine reservation: a name of lowercase letters, digits and '-' "
                "(at most 63, starting with a letter), or projects/PROJECT/reservations/NAME; got {v}",
                {"v": excerpt(value)},
            )
        return value

    @field_validator("autodown")
    @classmethod
    def _autodown(cls, value: Duration | None) -> Duration | None:
        if value is not None and value.seconds < MIN_AUTODOWN_SECONDS:
            raise PydanticCustomError(
                "autodown",
                "autodown must be at least 10m: the in-cluster reaper looks every 5 minutes; got {v}",
                {"v": str(value)},
            )
        return value

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, value: str | None) -> str | None:
        if value is not None and not SERVICE_ACCOUNT_RE.match(value):
            raise PydanticCustomError(
                "service_account",
                "service_account must be a Google service account email such as "
                "rlcloud-nodes@my-project.iam.gserviceaccount.com; got {v}",
                {"v": excerpt(value)},
            )
        return value

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _gpu_type(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in RETIRED_GPU_TYPES:
            raise PydanticCustomError(
                "gpu_type",
                "{why}; use one of the current types instead: {valid} (nvidia-tesla-t4 is the usual "
                "low-cost replacement)",
                {"why": RETIRED_GPU_TYPES[value.strip().lower()], "valid": valid_gpu_types()},
            )
        if isinstance(value, str):
            # short names (t4, a100-80gb) are what people type; the spec keeps GKE's name
            known = gpu_type_value(value)
            if known is None:
                raise PydanticCustomError(
                    "gpu_type",
                    "unknown gpu_type {v}; valid: {valid}",
                    {"v": excerpt(value), "valid": valid_gpu_types()},
                )
            return known
        return value

    @field_validator("queue")
    @classmethod
    def _queue(cls, value: str | None) -> str | None:
        # it becomes a label value (at most 63 characters) naming a LocalQueue (a DNS-1123 name)
        if value is not None and not QUEUE_RE.match(value):
            raise PydanticCustomError(
                "queue",
                "queue must name a Kueue LocalQueue: at most 63 lowercase letters, digits, '-' or '.', starting "
                "and ending with a letter or digit (e.g. 'team-a')",
            )
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            if not LABEL_KEY_RE.match(key) or not LABEL_VALUE_RE.match(str(val)):
                raise PydanticCustomError(
                    "labels",
                    "label {key}={val} is not a valid GCE label: keys start with a lowercase letter, keys "
                    "and values use lowercase letters, digits, '_' and '-', at most 63 characters",
                    {"key": excerpt(key), "val": excerpt(val)},
                )
        return value

    @model_validator(mode="after")
    def _consistency(self) -> ClusterSpec:
        shape = (self.cpus_per_node, self.memory_per_node)
        if self.machine_type and any(v is not None for v in shape):
            raise PydanticCustomError(
                "at:machine_type",
                "give either machine_type or cpus_per_node + memory_per_node, not both",
            )
        if (self.cpus_per_node is None) != (self.memory_per_node is None):
            raise PydanticCustomError(
                "at:memory_per_node" if self.memory_per_node is None else "at:cpus_per_node",
                "cpus_per_node and memory_per_node go together: give both or neither",
            )
        if self.cpus_per_node is not None and self.memory_per_node is not None:
            try:
                custom_machine_type(self.cpus_per_node, self.memory_per_node)
            except ValueError as exc:
                field = "at:cpus_per_node" if str(exc).startswith("cpus_per_node") else "at:memory_per_node"
                raise PydanticCustomError(field, str(exc)) from None
        if self.gpus_per_node > 0 and self.gpu_type is None:
            valid = ", ".join(t.value for t in GpuType)
            raise PydanticCustomError(
                "at:gpu_type",
                "gpus_per_node={n} needs a gpu_type, one of: {valid}",
                {"n": self.gpus_per_node, "valid": valid},
            )
        if self.gpus_per_node == 0 and self.gpu_type is not None:
            raise PydanticCustomError(
                "at:gpus_per_node",
                "gpus_per_node is 0 but gpu_type is {gpu}: set gpus_per_node to 1 or more, or remove gpu_type "
                "for a CPU-only cluster",
                {"gpu": self.gpu_type.value},
            )
        if self.node_locations:
            if not self.is_regional:
                raise PydanticCustomError(
                    "at:node_locations",
                    "node_locations places the GPU pool of a regional cluster: set location to a region such as "
                    "{region}, or remove node_locations (a zonal cluster's nodes are in its zone)",
                    {"region": self.location.rsplit("-", 1)[0]},
                )
            outside = [z for z in self.node_locations if z.rsplit("-", 1)[0] != self.location]
            if outside:
                raise PydanticCustomError(
                    "at:node_locations",
                    "node_locations must be zones of the cluster's region {region}; not {bad}",
                    {"region": self.location, "bad": excerpt(outside)},
                )
            if not self.gpus_per_node:
                raise PydanticCustomError(
                    "at:node_locations",
                    "node_locations places the GPU pool; this cluster has no GPUs (its nodes go to the region's "
                    "default zones): remove node_locations",
                )
        self._check_capacity()
        if self.autoscaling and not (self.autoscaling.min_nodes <= self.num_nodes <= self.autoscaling.max_nodes):
            raise PydanticCustomError(
                "at:num_nodes",
                "num_nodes ({n}) must lie within autoscaling min_nodes..max_nodes ({lo}..{hi})",
                {"n": self.num_nodes, "lo": self.autoscaling.min_nodes, "hi": self.autoscaling.max_nodes},
            )
        return self

    def _check_capacity(self) -> None:
        if self.gpu_sharing is not None and not self.gpus_per_node:
            raise PydanticCustomError(
                "at:gpu_sharing", "gpu_sharing shares GPUs; this cluster has none: set gpu_type, or remove gpu_sharing"
            )
        if not self.capacity:
            return
        rungs = [str(r) for r in self.capacity]
        if len(set(rungs)) != len(rungs):
            raise PydanticCustomError("at:capacity", "capacity names a rung twice: {v}", {"v": excerpt(rungs)})
        if not self.gpus_per_node:
            raise PydanticCustomError(
                "at:capacity", "capacity is a ladder for the GPU pool; this cluster has no GPUs: remove capacity"
            )
        if self.spot and rungs[0] != CapacityRung.SPOT:
            raise PydanticCustomError(
                "at:spot",
                "spot: true contradicts capacity, whose first rung is {first}: remove spot (capacity decides)",
                {"first": rungs[0]},
            )
        if CapacityRung.FLEX_START in rungs:
            machine = self.effective_machine_type
            if not machine.startswith(FLEX_START_MACHINE_PREFIXES):
                raise PydanticCustomError(
                    "at:capacity",
                    "the flex-start rung needs an accelerator-optimized machine type (A2, A3, A4 or G2: Compute "
                    "Engine's 'About Flex-start VMs'); {machine} is not one: remove flex-start, or use e.g. "
                    "gpu_type: l4 (g2-standard-8)",
                    {"machine": machine},
                )
            if self.reservation:
                raise PydanticCustomError(
                    "at:capacity",
                    "flex-start nodes consume no reservation (GKE creates them with reservation affinity none): "
                    "remove reservation or the flex-start rung",
                )

    @property
    def capacity_ladder(self) -> list[CapacityRung]:
        """The GPU pool's rungs in order: ``capacity``, or the one rung ``spot`` names."""
        if self.capacity:
            return list(self.capacity)
        return [CapacityRung.SPOT if self.spot else CapacityRung.ON_DEMAND]

    @property
    def effective_machine_type(self) -> str:
        """The GCE machine type the experiment nodes get."""
        if self.machine_type:
            return self.machine_type
        if self.cpus_per_node is not None and self.memory_per_node is not None:
            return custom_machine_type(self.cpus_per_node, self.memory_per_node)
        return DEFAULT_MACHINE_TYPES[self.gpu_type]

    @property
    def is_regional(self) -> bool:
        """True when location is a region (a regional cluster), False for a zone."""
        return bool(REGION_RE.match(self.location))

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> ClusterSpec:
        """Load from a YAML/JSON file (tensorforce-client cluster files too); keyword arguments override settings."""
        from rlcloud.specs.building import check_kind, cluster_from_dict, read_data_file

        data = read_data_file(path)
        check_kind(data, "Cluster", str(path))
        return cluster_from_dict(data, model=cls, source=str(path), **overrides)

    @classmethod
    def from_dict(cls, data: dict[str, Any], **overrides: Any) -> ClusterSpec:
        """Build from a dict (legacy keys mapped) with overrides; problems raise SpecError."""
        from rlcloud.specs.building import cluster_from_dict

        return cluster_from_dict(data, model=cls, **overrides)

    @classmethod
    def from_yaml_text(cls, text: str, **overrides: Any) -> ClusterSpec:
        """Load from YAML/JSON text, e.g. what ``to_yaml()`` wrote."""
        from rlcloud.specs.building import check_kind, cluster_from_dict, parse_data_text

        data = parse_data_text(text, source="<string>")
        check_kind(data, "Cluster", "<string>")
        return cluster_from_dict(data, model=cls, source="<string>", **overrides)

    def to_yaml(self) -> str:
        """This spec as YAML (with ``kind: Cluster``); loading it back gives an equal spec."""
        from rlcloud.specs.building import dump_spec

        return dump_spec("Cluster", self)
