"""Pre-flight checks of a ClusterSpec against GCE's GPU rules, before any API call (pure).

GKE would reject most of these only after minutes of provisioning, or with a message that does not
say which setting to change; checking here names the field and a valid alternative up front.
"""

from __future__ import annotations

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.gke.machines import ACCELERATOR_FAMILIES, FIXED_GPU_MACHINES, N1_GPU_LIMITS, machine_shape
from rlcloud.specs.cluster import DEFAULT_MACHINE_TYPES, ClusterSpec, GpuType

__all__ = ["check_cluster_spec"]

_SERIES_EXAMPLES = {
    "n1": "n1-standard-8, n1-highmem-8 or custom-8-30720",
    "g2": "g2-standard-8 (1 GPU), g2-standard-24 (2), g2-standard-48 (4), g2-standard-96 (8)",
    "a2": "a2-highgpu-1g/2g/4g/8g, a2-megagpu-16g (A100 40GB), a2-ultragpu-1g/2g/4g/8g (A100 80GB)",
    "a3": "a3-highgpu-1g/2g/4g/8g (H100), a3-megagpu-8g (H100 Mega), a3-ultragpu-8g (H200)",
}


def _machines_for(accelerator: str, count: int) -> list[str]:
    """Accelerator-optimized machine types that carry ``count`` x ``accelerator``."""
    if accelerator == "nvidia-l4":
        shapes = {1: "g2-standard-8", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"}
        return [shapes[count]] if count in shapes else []
    return [
        f"{prefix}-{count}g"
        for prefix, (acc, counts) in FIXED_GPU_MACHINES.items()
        if acc == accelerator and count in counts
    ]


def _counts_for(accelerator: str) -> list[int]:
    if accelerator == "nvidia-l4":
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
    machine_field = "cpus_per_node" if shape.custom and not spec.machine_type else "machine_type"
    problems: list[SpecProblem] = []

    if spec.gpus_per_node == 0:
        if shape.fixed_gpus:
            accelerator, count = shape.fixed_gpus
            problems.append(
                SpecProblem(
                    field="gpu_type",
                    message=(
                        f"machine type {machine} comes with {count} x {accelerator}: set gpu_type: {accelerator} "
                        f"and gpus_per_node: {count}, or use a machine without GPUs such as n1-standard-8"
                    ),
                    value=None,
                )
            )
        if problems:
            raise SpecError(problems)
        return

    assert spec.gpu_type is not None  # the spec's own validator guarantees it when gpus_per_node > 0
    accelerator = GpuType(spec.gpu_type).value
    count = spec.gpus_per_node
    series = ACCELERATOR_FAMILIES[accelerator]

    if shape.fixed_gpus:
        built_in, built_in_count = shape.fixed_gpus
        if built_in != accelerator:
            problems.append(
                SpecProblem(
                    field="gpu_type",
                    message=(
                        f"machine type {machine} comes with {built_in}, not {accelerator}: use gpu_type: "
                        f"{built_in}, or a machine type for {accelerator} such as "
                        f"{DEFAULT_MACHINE_TYPES[GpuType(accelerator)]}"
                    ),
                    value=accelerator,
                )
            )
        elif built_in_count != count:
            fitting = _machines_for(accelerator, count)
            hint = f" (for {count} use {', '.join(fitting)})" if fitting else ""
            problems.append(
                SpecProblem(
                    field="gpus_per_node",
                    message=(
                        f"machine type {machine} has exactly {built_in_count} x {accelerator}: set "
                        f"gpus_per_node: {built_in_count} or change machine_type{hint}; GCE offers "
                        f"{accelerator} in counts {_counts_for(accelerator)}"
                    ),
                    value=count,
                )
            )
    elif series != "n1":
        fitting = _machines_for(accelerator, count)
        problems.append(
            SpecProblem(
                field=machine_field,
                message=(
                    f"{accelerator} comes only with {series.upper()} machine types ({_SERIES_EXAMPLES[series]}); "
                    f"{machine} is {shape.family.upper()}" + (f": use machine_type: {fitting[0]}" if fitting else "")
                ),
                value=machine,
            )
        )
        if not fitting:
            problems.append(
                SpecProblem(
                    field="gpus_per_node",
                    message=f"GCE offers {accelerator} in counts {_counts_for(accelerator)} per node",
                    value=count,
                )
            )
    elif shape.family != "n1":
        problems.append(
            SpecProblem(
                field=machine_field,
                message=(
                    f"{accelerator} attaches only to N1 machine types ({_SERIES_EXAMPLES['n1']}); {machine} is "
                    f"{shape.family.upper()}"
                ),
                value=machine,
            )
        )
    else:
        limits = N1_GPU_LIMITS[accelerator]
        if count not in limits:
            problems.append(
                SpecProblem(
                    field="gpus_per_node",
                    message=f"GCE attaches {accelerator} to N1 machines in counts {sorted(limits)} only",
                    value=count,
                )
            )
        else:
            max_cpus, max_memory = limits[count]
            if shape.vcpus is not None and shape.vcpus > max_cpus:
                problems.append(
                    SpecProblem(
                        field=machine_field,
                        message=(
                            f"{machine} has {shape.vcpus} vCPUs; with {count} x {accelerator} GCE allows at most "
                            f"{max_cpus} vCPUs and {max_memory:g} GB per VM (more GPUs allow more)"
                        ),
                        value=machine,
                    )
                )
            elif shape.memory_gb is not None and shape.memory_gb > max_memory + 1e-6:
                problems.append(
                    SpecProblem(
                        field="memory_per_node" if machine_field == "cpus_per_node" else machine_field,
                        message=(
                            f"{machine} has {shape.memory_gb:g} GB; with {count} x {accelerator} GCE allows at "
                            f"most {max_memory:g} GB per VM"
                        ),
                        value=machine,
                    )
                )
    if problems:
        raise SpecError(problems)
