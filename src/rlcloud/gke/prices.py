"""An hourly cost estimate for a ClusterSpec, from a dated table of list prices (pure, no network).

THIS IS AN ESTIMATE. The table holds Google Cloud's public on-demand list prices in us-central1, in
USD per hour; other regions cost up to ~30 % more, prices change, committed-use and negotiated
discounts are ignored, and spot prices move (they are modelled as a flat fraction of on-demand).

What was checked, and against what (stored copies of Google's pages, searched 2026-11-22; none of
them shows a "last updated" date, so :data:`PRICES_DATE` stays the date the table was first recorded):

* Verified: the GKE cluster management fee, $0.10 per cluster per hour, and the free tier's monthly
  credit that covers one zonal (or Autopilot) cluster -- https://cloud.google.com/kubernetes-engine/pricing.
* Verified: how accelerator-optimized machines are billed -- their attached GPUs, plus predefined vCPU
  and memory, plus bundled Local SSD -- https://cloud.google.com/compute/docs/accelerator-optimized-machines.
  The estimate therefore prices a G2/A2/A3 node as vCPU + memory + its built-in GPUs, each once.
* Checked, kept as a fraction: spot prices -- https://cloud.google.com/spot-vms/pricing (see
  :data:`SPOT_FRACTION`).
* NOT verified (kept from the table as first recorded, marked "unverified" below): every per-vCPU and
  per-GB machine rate, every per-GPU rate, and the balanced persistent disk rate. Of the stored copies
  of https://cloud.google.com/compute/vm-instance-pricing, https://cloud.google.com/compute/gpus-pricing
  and https://cloud.google.com/compute/disks-image-pricing the search reached only the opening
  sections, not the price tables. Check them (or the Billing console) before relying on a figure.

Not included: A3 machines' bundled Local SSD, network egress, premium images, sustained-use discounts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlcloud.gke.machines import machine_shape
from rlcloud.gke.plan import PoolPlan, plan_pools, pool_zone_count
from rlcloud.specs.cluster import ClusterSpec

__all__ = [
    "CLUSTER_FEE_PER_HOUR",
    "DISK_PER_GB_HOUR",
    "GPU_PER_HOUR",
    "MACHINE_PER_HOUR",
    "PRICES_DATE",
    "PRICES_REGION",
    "SPOT_FRACTION",
    "CostEstimate",
    "CostItem",
    "CostSoFar",
    "estimate_cost_so_far",
    "estimate_hourly_cost",
    "machine_hourly_cost",
    "node_hourly_cost",
]

# The date the table's figures were recorded. The stored pages used to check them carry no date of
# their own, so this is not moved (see the module docstring for what was verified).
PRICES_DATE = "2025-06-01"
PRICES_REGION = "us-central1"
NOTE = (
    f"Estimate from rlcloud's table of on-demand list prices in {PRICES_REGION} recorded {PRICES_DATE} "
    "(USD/hour); other regions, discounts and today's prices differ, spot prices vary. "
    "See https://cloud.google.com/compute/vm-instance-pricing, https://cloud.google.com/compute/gpus-pricing "
    "and https://cloud.google.com/kubernetes-engine/pricing."
)

# Per series: (USD per vCPU-hour, USD per GB-hour) for predefined machine types. For G2, A2 and A3
# this is the vCPU and memory part only; their built-in GPUs are priced from GPU_PER_HOUR.
# Unverified: no stored copy of https://cloud.google.com/compute/vm-instance-pricing reached its tables.
MACHINE_PER_HOUR: dict[str, tuple[float, float]] = {
    "n1": (0.031611, 0.004237),  # unverified
    "n2": (0.031611, 0.004237),  # unverified
    "n2d": (0.027502, 0.003686),  # unverified
    "e2": (0.021811, 0.002923),  # unverified
    "c2": (0.03398, 0.00455),  # unverified
    "c3": (0.03465, 0.00464),  # unverified
    "g2": (0.024988, 0.002928),  # unverified
    "a2": (0.031611, 0.004237),  # unverified
    # Unverified, and known to be approximate: A3 has its own vCPU/memory SKUs (the spot page lists
    # different A3-HIGH and A2 rates), but no stored page gave A3's on-demand figure, so A2's is used.
    # For a3-highgpu-8g this part is ~15 % of the node's estimate; the GPUs are the rest.
    "a3": (0.031611, 0.004237),
}
# Custom machine types cost ~5 % more per vCPU and GB than predefined ones. Unverified.
CUSTOM_PER_HOUR: dict[str, tuple[float, float]] = {
    "n1": (0.033174, 0.004446),
    "n2": (0.033174, 0.004446),
    "n2d": (0.028877, 0.003870),
    "e2": (0.022890, 0.003067),
}
# USD per GPU-hour, on demand (for G2/A2/A3 the accelerator part of the machine's price, billed as a
# separate GPU SKU next to the vCPU and memory ones). Unverified: no stored copy of
# https://cloud.google.com/compute/gpus-pricing reached its table. (T4, L4, A100 40GB/80GB and H100
# agree, to the cent, with Cloud Billing catalog figures for us-central1 seen in public code.)
GPU_PER_HOUR: dict[str, float] = {
    "nvidia-tesla-t4": 0.35,  # unverified
    "nvidia-tesla-p4": 0.60,  # unverified
    "nvidia-tesla-p100": 1.46,  # unverified
    "nvidia-tesla-v100": 2.48,  # unverified
    "nvidia-l4": 0.56,  # unverified
    "nvidia-tesla-a100": 2.93,  # unverified
    "nvidia-a100-80gb": 3.93,  # unverified
    "nvidia-h100-80gb": 9.80,  # unverified
    "nvidia-h100-mega-80gb": 10.30,  # unverified, no corroboration found
    "nvidia-h200-141gb": 10.60,  # unverified, no corroboration found
}
# Balanced persistent disk (GKE's default boot disk): USD 0.10 per GB-month, 730 hours a month.
# Unverified: the stored https://cloud.google.com/compute/disks-image-pricing shows only the standard
# ($0.04) and SSD ($0.17 per GB-month, US) rates; $0.10 for balanced is from third-party pages.
DISK_PER_GB_HOUR = 0.10 / 730
# GKE cluster management fee, $0.10 per cluster per hour, any mode or topology. The free tier's monthly
# credit ($74.40) covers one zonal or Autopilot cluster; it is not subtracted here.
# Verified: https://cloud.google.com/kubernetes-engine/pricing (stored copy, undated).
CLUSTER_FEE_PER_HOUR = 0.10
# Spot VMs and spot GPUs cost this fraction of on-demand in the estimate. https://cloud.google.com/spot-vms/pricing
# gives per-resource spot prices, but its stored copies only reach the per-series vCPU/memory table
# (its region tab is not labelled; its A2 and E2 figures are 40 % of the us-central1 rates above), not
# the GPU table, so a per-series table would leave the GPU part -- most of a GPU node -- on the
# fraction anyway. Observed there: A2 and E2 spot at 40 % of on-demand, C2 ~15 %, C3 ~17 %; the text
# says discounts of 60-91 % (older copies) or "up to 91 %" (current), i.e. a fraction of 0.09-0.40.
# 0.35 sits near the top of that range, so spot estimates lean high rather than low.
SPOT_FRACTION = 0.35


@dataclass(frozen=True)
class CostItem:
    """One line of an estimate: ``quantity`` x ``unit_price`` = ``hourly`` (None when unknown)."""

    item: str
    quantity: float
    unit_price: float | None
    hourly: float | None


@dataclass(frozen=True)
class CostEstimate:
    """Estimated USD per hour of a cluster at its planned size (autoscaling pools: at their initial size).

    ``max_hourly``: with every autoscaling pool at its maximum -- the spec's ``autoscaling.max_nodes``
    for the experiment pool, :data:`~rlcloud.gke.plan.SYSTEM_MAX_NODES` for a GPU cluster's CPU pool;
    None when no pool autoscales.
    """

    hourly: float
    items: list[CostItem]
    max_hourly: float | None = None
    unknown: list[str] = field(default_factory=list)  # machine series without a price in the table
    currency: str = "USD"
    prices_date: str = PRICES_DATE
    region: str = PRICES_REGION
    note: str = NOTE

    def __str__(self) -> str:
        lines = [f"Estimated cost: ~${self.hourly:.2f}/hour (estimate; prices of {self.prices_date}, {self.region})"]
        if self.max_hourly is not None:
            lines[0] += f", up to ~${self.max_hourly:.2f}/hour at the autoscaling maximum"
        for item in self.items:
            lines.append(f"  {item.item}: " + ("price unknown" if item.hourly is None else f"${item.hourly:.3f}/h"))
        if self.unknown:
            lines.append(f"  (no price in the table for: {', '.join(self.unknown)}; not included)")
        lines.append(f"  {self.note}")
        return "\n".join(lines)


def _pool_items(plan: PoolPlan, nodes: int, spot_factor: float, unknown: list[str]) -> list[CostItem]:
    shape = machine_shape(plan.machine_type)
    table = CUSTOM_PER_HOUR if shape.custom else MACHINE_PER_HOUR
    rates = table.get(shape.family)
    items: list[CostItem] = []
    label = f"{plan.name}: {nodes} x {plan.machine_type}{' (spot)' if plan.spot else ''}"
    if plan.max_nodes is not None:
        label += f" (autoscaling {plan.min_nodes or 0}-{plan.max_nodes} per zone)"
    if rates is None or shape.vcpus is None or shape.memory_gb is None:
        unknown.append(plan.machine_type)
        items.append(CostItem(label, nodes, None, None))
    else:
        per_node = (shape.vcpus * rates[0] + shape.memory_gb * rates[1]) * spot_factor
        items.append(CostItem(label, nodes, round(per_node, 6), nodes * per_node))
    # A G2/A2/A3 machine comes with its GPUs: count those (once), whatever the spec asked for; the
    # machine rate above is its vCPU and memory part only.
    gpu_type, gpus_per_node = shape.fixed_gpus or (plan.gpu_type, plan.gpus)
    if gpus_per_node and gpu_type:
        gpu_price = GPU_PER_HOUR.get(gpu_type)
        gpus = nodes * gpus_per_node
        gpu_label = f"{plan.name}: {gpus} x {gpu_type}{' (spot)' if plan.spot else ''}"
        if plan.sharing:
            # a shared GPU is billed once, whatever number of containers share it (GKE time-sharing/MPS)
            gpu_label += f" (each shared by up to {plan.sharing[1]} trials)"
        if gpu_price is None:
            unknown.append(gpu_type)
            items.append(CostItem(gpu_label, gpus, None, None))
        else:
            items.append(CostItem(gpu_label, gpus, gpu_price * spot_factor, gpus * gpu_price * spot_factor))
    disk_gb = nodes * plan.disk_size_gb
    items.append(
        CostItem(f"{plan.name}: {disk_gb} GB boot disk", disk_gb, DISK_PER_GB_HOUR, disk_gb * DISK_PER_GB_HOUR)
    )
    return items


def estimate_hourly_cost(spec: ClusterSpec) -> CostEstimate:
    """Estimate what ``spec``'s cluster costs per hour (machines, GPUs, disks, GKE fee) — an estimate.

    Regional clusters have each pool's nodes in three zones, so they cost three times the nodes, except a
    GPU pool, which is in its ``node_locations`` (one zone when the spec names none).
    Autoscaling pools are counted at their initial size in ``hourly`` and at their maximum in
    ``max_hourly`` (a GPU cluster's CPU pool always autoscales, so its estimate always has a maximum).
    """
    unknown: list[str] = []
    items: list[CostItem] = [CostItem("GKE cluster management fee", 1, CLUSTER_FEE_PER_HOUR, CLUSTER_FEE_PER_HOUR)]
    max_items: list[CostItem] = list(items)
    plans = plan_pools(spec)
    for plan in plans:
        zones = pool_zone_count(spec, plan)
        spot_factor = SPOT_FRACTION if plan.spot else 1.0
        items += _pool_items(plan, plan.nodes_per_zone * zones, spot_factor, unknown)
        top = plan.max_nodes if plan.max_nodes is not None else plan.nodes_per_zone
        max_items += _pool_items(plan, top * zones, spot_factor, [])
    hourly = sum(i.hourly for i in items if i.hourly is not None)
    autoscales = any(plan.max_nodes is not None for plan in plans)
    max_hourly = sum(i.hourly for i in max_items if i.hourly is not None) if autoscales else None
    return CostEstimate(
        hourly=round(hourly, 4),
        items=items,
        max_hourly=round(max_hourly, 4) if max_hourly is not None else None,
        unknown=sorted(set(unknown)),
    )


def node_hourly_cost(spec: ClusterSpec, *, gpu: bool) -> tuple[float | None, str]:
    """Estimated USD per hour of ONE node of ``spec``'s GPU pool (``gpu``) or of its pool without GPUs, with its
    GPUs and boot disk, and what that node is (e.g. ``"1 x n1-standard-8 (spot) with 1 x nvidia-tesla-t4"``).
    None when the table has no price for it. What a short run on that pool adds to the bill (an estimate)."""
    plans = plan_pools(spec)
    plan = next((p for p in plans if bool(p.gpus) == gpu), plans[0])
    unknown: list[str] = []
    items = _pool_items(plan, 1, SPOT_FRACTION if plan.spot else 1.0, unknown)
    what = f"1 x {plan.machine_type}{' (spot)' if plan.spot else ''}"
    if plan.gpus and plan.gpu_type:
        what += f" with {plan.gpus} x {plan.gpu_type}"
    if unknown:
        return None, what
    return sum(i.hourly for i in items if i.hourly is not None), what


def machine_hourly_cost(
    machine_type: str, *, spot: bool = False, gpu_type: str | None = None, gpus: int = 0, disk_size_gb: int = 100
) -> float | None:
    """Estimated USD per hour of ONE node of ``machine_type`` (with ``gpus`` x ``gpu_type`` attached, a G2/A2/A3
    machine's own GPUs counted once, and its boot disk; GKE's default is 100 GB), None when the table has no
    price for it. What the in-cluster reaper prices a node at from its labels (:mod:`rlcloud.gke.budgets`)."""
    plan = PoolPlan(
        name="node",
        role="workers",
        machine_type=machine_type,
        nodes_per_zone=1,
        disk_size_gb=disk_size_gb,
        spot=spot,
        gpus=gpus,
        gpu_type=gpu_type,
    )
    unknown: list[str] = []
    items = _pool_items(plan, 1, SPOT_FRACTION if spot else 1.0, unknown)
    return None if unknown else sum(i.hourly for i in items if i.hourly is not None)


@dataclass(frozen=True)
class CostSoFar:
    """What a running cluster has cost since it was created, estimated from its pools and the price table.

    ``node_hours``: nodes x hours over every pool; ``usd``: those at list price plus the cluster fee.
    """

    usd: float
    hours: float
    node_hours: float
    unknown: list[str] = field(default_factory=list)
    prices_date: str = PRICES_DATE
    region: str = PRICES_REGION

    @property
    def label(self) -> str:
        """Short form for tables, e.g. ``~$12.40 (est.)``."""
        return f"~${self.usd:.2f} (est.)"

    def __str__(self) -> str:
        text = (
            f"~${self.usd:.2f} so far over {self.hours:.1f} h, {self.node_hours:.1f} node-hours "
            f"(estimate; list prices of {self.prices_date}, {self.region})"
        )
        if self.unknown:
            text += f"; no price for {', '.join(self.unknown)}"
        return text


def estimate_cost_so_far(pools: list[tuple[PoolPlan, int]], hours: float) -> CostSoFar:
    """Estimate what a cluster cost over ``hours``: each pool's ``nodes`` (all its zones together) for the
    whole time, plus the GKE cluster fee — an estimate (autoscaled pools are taken at the size given)."""
    hours = max(hours, 0.0)
    unknown: list[str] = []
    hourly = CLUSTER_FEE_PER_HOUR
    node_hours = 0.0
    for plan, nodes in pools:
        spot_factor = SPOT_FRACTION if plan.spot else 1.0
        hourly += sum(i.hourly for i in _pool_items(plan, nodes, spot_factor, unknown) if i.hourly is not None)
        node_hours += nodes * hours
    return CostSoFar(
        usd=round(hourly * hours, 2), hours=hours, node_hours=round(node_hours, 2), unknown=sorted(set(unknown))
    )
