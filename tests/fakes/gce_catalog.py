"""Which Compute Engine zones offer which GPUs: the one table the GKE fake and the Google APIs fake share.

The rule it serves comes from Google: an accelerator type exists in some zones of a region and not in others
(cloud.google.com/compute/docs/gpus/gpu-regions-zones), Compute Engine's ``acceleratorTypes`` list says
which, and GKE refuses a node pool in a zone without its GPU with 400 INVALID_ARGUMENT 'Accelerator type
"nvidia-l4" does not exist in zone europe-west3-a.' (the "Regional clusters" page, Limitations:
cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters). That europe-west3-a lacks L4 is the
page's own example; the other rows are illustrative, shaped like Google's table, not a copy of it (the
real table changes month by month: rlcloud asks Compute, never a table of its own).

Zones missing here are unknown to the fakes, which then accept any GPU there.
"""

from __future__ import annotations

__all__ = ["ACCELERATOR_ZONES", "default_zones", "offers", "zones_offering"]

_OLDER = {
    "nvidia-tesla-t4",
    "nvidia-tesla-p4",
    "nvidia-tesla-p100",
    "nvidia-tesla-v100",
    "nvidia-l4",
    "nvidia-tesla-a100",
    "nvidia-a100-80gb",
}
_HOPPER = {"nvidia-h100-80gb", "nvidia-h100-mega-80gb", "nvidia-h200-141gb"}

#: zone -> the accelerator types Compute Engine offers there
ACCELERATOR_ZONES: dict[str, frozenset[str]] = {
    "us-central1-a": frozenset(_OLDER | _HOPPER | {"nvidia-b200"}),
    "us-central1-b": frozenset(_OLDER | {"nvidia-h100-80gb", "nvidia-rtx-pro-6000"}),
    "us-central1-c": frozenset(_OLDER | _HOPPER),
    "us-central1-f": frozenset(_OLDER - {"nvidia-l4"}),
    "europe-west3-a": frozenset({"nvidia-tesla-t4"}),
    "europe-west3-b": frozenset({"nvidia-tesla-t4", "nvidia-l4"}),
    "europe-west3-c": frozenset({"nvidia-l4"}),
    "europe-west4-a": frozenset({"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-a100", "nvidia-h100-80gb"}),
    "europe-west4-b": frozenset(_OLDER | {"nvidia-h100-80gb"}),
    "europe-west4-c": frozenset({"nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-v100", "nvidia-h100-80gb"}),
}


def _region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def offers(zone: str, accelerator: str) -> bool:
    """True when ``zone`` offers ``accelerator``, or the table does not know ``zone``."""
    return zone not in ACCELERATOR_ZONES or accelerator in ACCELERATOR_ZONES[zone]


def zones_offering(accelerator: str, region: str | None = None) -> list[str]:
    """The zones (of ``region``, or all) that offer ``accelerator``, sorted."""
    return sorted(z for z, types in ACCELERATOR_ZONES.items() if accelerator in types and region in (None, _region(z)))


def default_zones(region: str) -> list[str]:
    """The three zones GKE spreads a regional cluster's nodes over when no node locations are set."""
    known = sorted(z for z in ACCELERATOR_ZONES if _region(z) == region)
    return known[:3] if known else [f"{region}-{z}" for z in "abc"]
