"""What rlcloud knows about GCE machine types and the GPUs they take (pure data, no I/O).

Sources: cloud.google.com/compute/docs/gpus (which accelerators attach to which machine series, in
which counts, with how many vCPUs and how much memory) and cloud.google.com/compute/docs/machine-resource
(predefined shapes). Used by the pre-flight checks and the cost estimate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlcloud.specs.cluster import G2_GPUS, G4_GPUS

__all__ = [
    "ACCELERATOR_FAMILIES",
    "FIXED_GPU_MACHINES",
    "N1_GPU_LIMITS",
    "MachineShape",
    "machine_shape",
]

# GB of memory per vCPU of the predefined classes, per series.
_GB_PER_CPU: dict[str, dict[str, float]] = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "n2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "n2d": {"standard": 4, "highmem": 8, "highcpu": 1},
    "e2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "c2": {"standard": 4},
    "c3": {"standard": 4, "highmem": 8, "highcpu": 2},
}
_E2_SHARED = {"e2-micro": (2, 1.0), "e2-small": (2, 2.0), "e2-medium": (2, 4.0)}
_G2_SHAPES = {4: 16, 8: 32, 12: 48, 16: 64, 24: 96, 32: 128, 48: 192, 96: 384}
_G4_SHAPES = {48: 180, 96: 360, 192: 720, 384: 1440}

# The accelerator each accelerator-optimized machine carries, and how many (its name says the count).
FIXED_GPU_MACHINES: dict[str, tuple[str, dict[int, tuple[int, float]]]] = {
    # prefix: (accelerator type, {gpu count: (vCPUs, memory GB)})
    "a2-highgpu": ("nvidia-tesla-a100", {1: (12, 85), 2: (24, 170), 4: (48, 340), 8: (96, 680)}),
    "a2-megagpu": ("nvidia-tesla-a100", {16: (96, 1360)}),
    "a2-ultragpu": ("nvidia-a100-80gb", {1: (12, 170), 2: (24, 340), 4: (48, 680), 8: (96, 1360)}),
    "a3-highgpu": ("nvidia-h100-80gb", {1: (26, 234), 2: (52, 468), 4: (104, 936), 8: (208, 1872)}),
    "a3-megagpu": ("nvidia-h100-mega-80gb", {8: (208, 1872)}),
    "a3-ultragpu": ("nvidia-h200-141gb", {8: (224, 2952)}),
    "a3-edgegpu": ("nvidia-h100-80gb", {8: (208, 1872)}),
    # new to rlcloud (EXPERIMENTAL_GPU_TYPES): shapes from the accelerator-optimized machine family page
    "a4-highgpu": ("nvidia-b200", {8: (224, 3968)}),
    "a4x-highgpu": ("nvidia-gb200", {4: (140, 884)}),
}

# Which machine series each accelerator attaches to (the user-facing rule of the pre-flight check).
ACCELERATOR_FAMILIES: dict[str, str] = {
    "nvidia-tesla-t4": "n1",
    "nvidia-tesla-p4": "n1",
    "nvidia-tesla-p100": "n1",
    "nvidia-tesla-v100": "n1",
    "nvidia-l4": "g2",
    "nvidia-tesla-a100": "a2",
    "nvidia-a100-80gb": "a2",
    "nvidia-h100-80gb": "a3",
    "nvidia-h100-mega-80gb": "a3",
    "nvidia-h200-141gb": "a3",
    "nvidia-b200": "a4",
    "nvidia-gb200": "a4x",
    "nvidia-rtx-pro-6000": "g4",
}

# N1 + GPU: the GPU counts GCE allows and, for each, the most vCPUs and memory (GB) the VM may have.
N1_GPU_LIMITS: dict[str, dict[int, tuple[int, float]]] = {
    "nvidia-tesla-t4": {1: (48, 312), 2: (48, 312), 4: (96, 624)},
    "nvidia-tesla-p4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
    "nvidia-tesla-p100": {1: (16, 104), 2: (32, 208), 4: (96, 624)},
    "nvidia-tesla-v100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
}

_CUSTOM_RE = re.compile(r"^(?:(n1|n2|n2d|e2)-)?custom-(\d+)-(\d+)(-ext)?$")
_PREDEFINED_RE = re.compile(r"^([a-z][a-z0-9]*)-([a-z]+)-(\d+)$")
_FIXED_RE = re.compile(r"^(a[0-9]x?-[a-z]+gpu)-(\d+)g$")


@dataclass(frozen=True)
class MachineShape:
    """A machine type read apart: series ("n1", "g2", ...), vCPUs, memory, and built-in GPUs.

    ``vcpus``/``memory_gb`` are None for a series rlcloud has no table for; ``fixed_gpus`` is
    (accelerator type, count) for machines that come with their GPUs (G2, A2, A3).
    """

    name: str
    family: str
    vcpus: int | None
    memory_gb: float | None
    custom: bool = False
    fixed_gpus: tuple[str, int] | None = None


def machine_shape(machine_type: str) -> MachineShape:
    """Read a GCE machine type name (predefined, ``custom-C-MiB`` or ``<series>-custom-C-MiB``)."""
    name = machine_type.strip().lower()
    custom = _CUSTOM_RE.match(name)
    if custom:
        family = custom.group(1) or "n1"
        return MachineShape(name, family, int(custom.group(2)), int(custom.group(3)) / 1024, custom=True)
    if name in _E2_SHARED:
        cpus, memory = _E2_SHARED[name]
        return MachineShape(name, "e2", cpus, memory)
    fixed = _FIXED_RE.match(name)
    if fixed and fixed.group(1) in FIXED_GPU_MACHINES:
        accelerator, shapes = FIXED_GPU_MACHINES[fixed.group(1)]
        count = int(fixed.group(2))
        cpus_memory = shapes.get(count)
        return MachineShape(
            name,
            name.split("-", 1)[0],
            cpus_memory[0] if cpus_memory else None,
            cpus_memory[1] if cpus_memory else None,
            fixed_gpus=(accelerator, count),
        )
    predefined = _PREDEFINED_RE.match(name)
    if predefined:
        family, klass, cpus = predefined.group(1), predefined.group(2), int(predefined.group(3))
        if family == "g2" and klass == "standard" and cpus in _G2_SHAPES:
            return MachineShape(name, "g2", cpus, _G2_SHAPES[cpus], fixed_gpus=("nvidia-l4", G2_GPUS[cpus]))
        if family == "g4" and klass == "standard" and cpus in _G4_SHAPES:
            return MachineShape(name, "g4", cpus, _G4_SHAPES[cpus], fixed_gpus=("nvidia-rtx-pro-6000", G4_GPUS[cpus]))
        per_cpu = _GB_PER_CPU.get(family, {}).get(klass)
        return MachineShape(name, family, cpus, cpus * per_cpu if per_cpu else None)
    family = name.split("-", 1)[0]
    return MachineShape(name, family, None, None)
