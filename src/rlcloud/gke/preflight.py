"""Pre-flight checks of a ClusterSpec against GCE's GPU rules, before any API call (pure).

GKE would reject most of these only after minutes of provisioning, or with a message that does not
say which setting to change; checking here names the field and a valid alternative up front.
"""

from __future__ import annotations

import re

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.gke.machines import ACCELERATOR_FAMILIES, FIXED_GPU_MACHINES, N1_GPU_LIMITS, MachineShape, machine_shape
from rlcloud.specs.cluster import (
    DEFAULT_MACHINE_TYPES,
    EXPERIMENTAL_GPU_TYPES,
    G4_GPUS,
    ClusterSpec,
    GpuType,
)

__all__ = ["check_cluster_spec", "cluster_spec_warnings"]

# How Compute Engine sells the A3 shapes (cloud.google.com/compute/docs/accelerator-optimized-machines, A3 High:
# "a3-highgpu-1g, a3-highgpu-2g, a3-highgpu-4g ... only available with Spot VMs or Flex-start"; AI Hypercomputer
# "Consumption options": "For A3 Ultra, you must request reservations").
_SPOT_ONLY_RE = re.compile(r"^a3-highgpu-[124]g$")
_RESERVATION_ONLY_RE = re.compile(r"^a3-ultragpu-")

_SERIES_EXAMPLES = {
    "n1": "n1-standard-8, n1-highmem-8 or custom-8-30720",
    "g2": "g2-standard-8 (1 GPU), g2-standard-24 (2), g2-standard-48 (4), g2-standard-96 (8)",
    "a2": "a2-highgpu-1g/2g/4g/8g, a2-megagpu-16g (A100 40GB), a2-ultragpu-1g/2g/4g/8g (A100 80GB)",
    "a3": "a3-highgpu-1g/2g/4g/8g (H100), a3-edgegpu-8g (H100), a3-megagpu-8g (H100 Mega), a3-ultragpu-8g (H200)",
    "a4": "a4-highgpu-8g (B200)",
    "a4x": "a4x-highgpu-4g (GB200)",
    "g4": "g4-standard-48 (1 GPU), g4-standard-96 (2), g4-standard-192 (4), g4-standard-384 (8)",
}


def _machines_for(accelerator: str, count: int) -> list[str]:
    """Accelerator-optimized machine types that carry ``count`` x ``accelerator``."""
    if accelerator == "nvidia-l4":
        shapes = {1: "g2-standard-8", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"}
        return [shapes[count]] if count in shapes else []
    if accelerator == "nvidia-rtx-pro-6000":
        return [f"g4-standard-{cpus}" for cpus, gpus in G4_GPUS.items() if gpus == count]
    return [
        f"{prefix}-{count}g"
        for prefix, (acc, counts) in FIXED_GPU_MACHINES.items()
        if acc == accelerator and count in counts
    ]


def _counts_for(accelerator: str) -> list[int]:
    if accelerator in ("nvidia-l4", "nvidia-rtx-pro-6000"):
        return [1, 2, 4, 8]
    if accelerator in N1_GPU_LIMITS:
        return sorted(N1_GPU_LIMITS[accelerator])
    return sorted({c for acc, counts in FIXED_GPU_MACHINES.values() if acc == accelerator for c in counts})


def check_cluster_spec(spec: ClusterSpec) -> None:
    """Raise SpecError listing every GPU/machine combination GCE would refuse; return None if fine.

    Rules (cloud.google.com/compute/docs/gpus): T4, P4, P100 and V100 attach to N1 machine types in
    counts of 1, 2, 4 (V100 also 8), each count capping the VM's vCPUs and memory; L4 comes with G2,
    A100 with A2, H100 and H200 with A3, in the count the machine type's name states.
    """
    machine = spec.effective_machine_type
    shape = machine_shape(machine)
    if spec.gpus_per_node == 0:
        problems = _without_gpus(machine, shape)
    else:
        assert spec.gpu_type is not None  # the spec's own validator guarantees it when gpus_per_node > 0
        accelerator = GpuType(spec.gpu_type).value
        machine_field = "cpus_per_node" if shape.custom and not spec.machine_type else "machine_type"
        problems = [
            *_machine_problems(machine, shape, accelerator, spec.gpus_per_node, machine_field),
            *_sale_problems(spec, machine, accelerator),
        ]
    if problems:
        raise SpecError(problems)


def _without_gpus(machine: str, shape: MachineShape) -> list[SpecProblem]:
    """A spec without GPUs on a machine type that comes with them."""
    if not shape.fixed_gpus:
        return []
    accelerator, count = shape.fixed_gpus
    return [
        SpecProblem(
            field="gpu_type",
            message=(
                f"machine type {machine} comes with {count} x {accelerator}: set gpu_type: {accelerator} "
                f"and gpus_per_node: {count}, or use a machine without GPUs such as n1-standard-8"
            ),
            value=None,
        )
    ]


def _machine_problems(
    machine: str, shape: MachineShape, accelerator: str, count: int, machine_field: str
) -> list[SpecProblem]:
    """What GCE refuses of ``count`` x ``accelerator`` on ``machine``: its series, its built-in GPUs, N1's limits."""
    series = ACCELERATOR_FAMILIES[accelerator]
    if shape.fixed_gpus:
        return _fixed_problems(machine, shape.fixed_gpus, accelerator, count)
    if series != "n1" and shape.family == series:
        return []  # the right series, a shape rlcloud's tables lack: cluster_spec_warnings says so, GKE checks it
    if series != "n1":
        fitting = _machines_for(accelerator, count)
        problems = [
            SpecProblem(
                field=machine_field,
                message=(
                    f"{accelerator} comes only with {series.upper()} machine types ({_SERIES_EXAMPLES[series]}); "
                    f"{machine} is {shape.family.upper()}" + (f": use machine_type: {fitting[0]}" if fitting else "")
                ),
                value=machine,
            )
        ]
        if not fitting:
            problems.append(
                SpecProblem(
                    field="gpus_per_node",
                    message=f"GCE offers {accelerator} in counts {_counts_for(accelerator)} per node",
                    value=count,
                )
            )
        return problems
    if shape.family != "n1":
        return [
            SpecProblem(
                field=machine_field,
                message=(
                    f"{accelerator} attaches only to N1 machine types ({_SERIES_EXAMPLES['n1']}); {machine} is "
                    f"{shape.family.upper()}"
                ),
                value=machine,
            )
        ]
    return _n1_problems(machine, shape, accelerator, count, machine_field)


def _fixed_problems(machine: str, fixed: tuple[str, int], accelerator: str, count: int) -> list[SpecProblem]:
    """A machine type with built-in GPUs (``fixed``): the spec must ask for exactly those."""
    built_in, built_in_count = fixed
    if built_in != accelerator:
        return [
            SpecProblem(
                field="gpu_type",
                message=(
                    f"machine type {machine} comes with {built_in}, not {accelerator}: use gpu_type: "
                    f"{built_in}, or a machine type for {accelerator} such as "
                    f"{DEFAULT_MACHINE_TYPES[GpuType(accelerator)]}"
                ),
                value=accelerator,
            )
        ]
    if built_in_count == count:
        return []
    fitting = _machines_for(accelerator, count)
    hint = f" (for {count} use {', '.join(fitting)})" if fitting else ""
    return [
        SpecProblem(
            field="gpus_per_node",
            message=(
                f"machine type {machine} has exactly {built_in_count} x {accelerator}: set "
                f"gpus_per_node: {built_in_count} or change machine_type{hint}; GCE offers "
                f"{accelerator} in counts {_counts_for(accelerator)}"
            ),
            value=count,
        )
    ]


def _n1_problems(
    machine: str, shape: MachineShape, accelerator: str, count: int, machine_field: str
) -> list[SpecProblem]:
    """An N1 machine with attached GPUs: GCE's counts, and the vCPUs and memory each count allows."""
    limits = N1_GPU_LIMITS[accelerator]
    if count not in limits:
        return [
            SpecProblem(
                field="gpus_per_node",
                message=f"GCE attaches {accelerator} to N1 machines in counts {sorted(limits)} only",
                value=count,
            )
        ]
    max_cpus, max_memory = limits[count]
    if shape.vcpus is not None and shape.vcpus > max_cpus:
        return [
            SpecProblem(
                field=machine_field,
                message=(
                    f"{machine} has {shape.vcpus} vCPUs; with {count} x {accelerator} GCE allows at most "
                    f"{max_cpus} vCPUs and {max_memory:g} GB per VM (more GPUs allow more)"
                ),
                value=machine,
            )
        ]
    if shape.memory_gb is not None and shape.memory_gb > max_memory + 1e-6:
        return [
            SpecProblem(
                field="memory_per_node" if machine_field == "cpus_per_node" else machine_field,
                message=(
                    f"{machine} has {shape.memory_gb:g} GB; with {count} x {accelerator} GCE allows at "
                    f"most {max_memory:g} GB per VM"
                ),
                value=machine,
            )
        ]
    return []


def _sale_problems(spec: ClusterSpec, machine: str, accelerator: str) -> list[SpecProblem]:
    """How Compute Engine sells ``machine``: some A3 shapes only as Spot, A3 Ultra only through a reservation."""
    problems = []
    if _SPOT_ONLY_RE.match(machine) and not spec.spot:
        problems.append(
            SpecProblem(
                field="spot",
                message=(
                    f"{machine} is sold only as Spot or Flex-start VMs, not on demand: set spot: true, or use "
                    "machine_type: a3-highgpu-8g with gpus_per_node: 8 (on demand or with a reservation)"
                ),
                value=spec.spot,
            )
        )
    if _RESERVATION_ONLY_RE.match(machine) and not spec.reservation:
        problems.append(
            SpecProblem(
                field="reservation",
                message=(
                    f"{machine} (A3 Ultra, {accelerator}) capacity comes only through a Compute Engine reservation: "
                    "reserve it with your Google account team, then set reservation: NAME (or "
                    "projects/PROJECT/reservations/NAME for a shared one); for H100 without one use gpu_type: h100 "
                    "with spot: true"
                ),
                value=None,
            )
        )
    return problems


def cluster_spec_warnings(spec: ClusterSpec) -> list[str]:
    """What rlcloud cannot vouch for in ``spec`` without refusing it: a GPU type it has not run on
    (:data:`~rlcloud.specs.cluster.EXPERIMENTAL_GPU_TYPES`), a GPU machine shape its tables lack."""
    warnings: list[str] = []
    if spec.gpu_type is not None and GpuType(spec.gpu_type) in EXPERIMENTAL_GPU_TYPES:
        warnings.append(f"experimental GPU type: {EXPERIMENTAL_GPU_TYPES[GpuType(spec.gpu_type)]}")
    if spec.gpus_per_node and spec.gpu_type is not None:
        machine = spec.effective_machine_type
        shape = machine_shape(machine)
        if ACCELERATOR_FAMILIES[GpuType(spec.gpu_type).value] != "n1" and not shape.fixed_gpus:
            warnings.append(
                f"machine type {machine} is not in rlcloud's tables: GKE will say whether it takes "
                f"{spec.gpus_per_node} x {spec.gpu_type.value}; the cost estimate leaves it out"
            )
    return warnings
