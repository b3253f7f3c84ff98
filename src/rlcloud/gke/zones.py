"""Which zones offer a GPU type: Compute Engine's ``acceleratorTypes``, and the zones a GPU pool gets.

A regional cluster's GPU pool must name its zones: GKE's "Regional clusters" page (Limitations) says "You
must use the --node-locations flag ... to specify the zone or zones containing the requested GPUs"; a
default zone without the GPU fails with 400 INVALID_ARGUMENT 'Accelerator type ... does not exist in zone
...' (not a stockout: no fallback helps). rlcloud asks Compute which zones offer the type
(``acceleratorTypes.aggregatedList``, one request) and picks one zone of the region, so GPUs and cost do
not triple; a spec's ``node_locations`` are checked against the same answer.

Calls go to Google with the given credentials, or to the local fake ``RLCLOUD_GOOGLE_API_HOST`` names
(as the doctor's do).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.gke.doctor import API_HOST_ENV
from rlcloud.specs.cluster import REGION_RE, ClusterSpec

__all__ = ["GpuPlacement", "accelerator_zones", "place_gpu_pool", "region_of"]

_TIMEOUT = 30.0


def region_of(location: str) -> str:
    """The region of ``location`` (a zone, or a region: itself)."""
    return location if REGION_RE.match(location) else location.rsplit("-", 1)[0]


def accelerator_zones(project: str, accelerator: str, *, credentials: Any = None) -> list[str]:
    """Every zone (sorted) where Compute Engine offers ``accelerator`` to ``project``.

    One ``acceleratorTypes.aggregatedList`` call filtered by name (needs ``compute.acceleratorTypes.list``,
    in roles/compute.viewer). Raises the client library's exception when it fails.
    """
    from google.cloud import compute_v1

    host = os.environ.get(API_HOST_ENV)
    if host:
        from google.auth.credentials import AnonymousCredentials

        endpoint = host if "://" in host else f"http://{host}"
        client = compute_v1.AcceleratorTypesClient(
            credentials=AnonymousCredentials(), transport="rest", client_options={"api_endpoint": endpoint}
        )
    else:
        client = compute_v1.AcceleratorTypesClient(credentials=credentials, transport="rest")
    request = compute_v1.AggregatedListAcceleratorTypesRequest(project=project, filter=f"name = {accelerator}")
    zones: set[str] = set()
    with client:
        for scope, scoped in client.aggregated_list(request=request, timeout=_TIMEOUT):
            if any(t.name == accelerator for t in scoped.accelerator_types):
                zones.add(scope.removeprefix("zones/"))
    return sorted(zones)


@dataclass(frozen=True)
class GpuPlacement:
    """Where a regional cluster's GPU pool goes: ``zones`` now, ``spares`` for a stockout (same region)."""

    zones: tuple[str, ...]
    spares: tuple[str, ...] = ()


def place_gpu_pool(spec: ClusterSpec, offered: list[str] | None, *, lookup_error: str = "") -> GpuPlacement:
    """The zones of ``spec``'s GPU pool, given the zones that offer its GPU (``offered``; None: the lookup
    failed, ``lookup_error`` says how). Raises SpecError naming the field to change, before anything exists.

    Zonal or CPU-only specs: no placement (the cluster's zone or default zones hold every pool). A regional
    GPU spec: its ``node_locations`` when each offers the GPU, else the first zone of the region that does,
    with the region's other such zones as spares.
    """
    if not spec.gpus_per_node or spec.gpu_type is None or not REGION_RE.match(spec.location):
        return GpuPlacement(())
    accelerator, region = spec.gpu_type.value, spec.location
    if offered is None:
        if spec.node_locations:
            return GpuPlacement(tuple(spec.node_locations))
        raise SpecError(
            [
                SpecProblem(
                    "node_locations",
                    f"a regional GPU pool needs zones that offer {accelerator}, and rlcloud could not ask Compute "
                    f"Engine which zones of {region} do ({lookup_error or 'no answer'}): set node_locations: "
                    f"[{region}-a] (zones listed by `gcloud compute accelerator-types list --filter="
                    f"name={accelerator}`), or grant roles/compute.viewer",
                    None,
                )
            ]
        )
    in_region = [z for z in offered if region_of(z) == region]
    if spec.node_locations:
        missing = [z for z in spec.node_locations if z not in in_region]
        if missing:
            where = f"zones of {region} that do: {', '.join(in_region)}" if in_region else f"no zone of {region} does"
            raise SpecError(
                [
                    SpecProblem(
                        "node_locations",
                        f"{', '.join(missing)} {'does' if len(missing) == 1 else 'do'} not offer {accelerator} "
                        f"(GKE would answer 'Accelerator type {accelerator} does not exist in zone'); {where}",
                        list(spec.node_locations),
                    )
                ]
            )
        return GpuPlacement(tuple(spec.node_locations))
    if not in_region:
        regions = sorted({region_of(z) for z in offered})
        elsewhere = (
            f"regions that have it: {', '.join(regions[:12])}{' ...' if len(regions) > 12 else ''}"
            if regions
            else "Compute Engine offers it in no zone this project can see"
        )
        raise SpecError(
            [
                SpecProblem(
                    "location",
                    f"no zone of {region} offers {accelerator}; {elsewhere}. Set location to one of those "
                    "regions (or one of its zones), or choose another gpu_type",
                    region,
                )
            ]
        )
    return GpuPlacement((in_region[0],), tuple(in_region[1:]))
