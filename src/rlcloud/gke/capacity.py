"""The capacity ladder of a GPU pool: where to try next when Google has no GPUs (or no quota) for it.

A spec's ``capacity`` (e.g. ``[spot, on-demand, flex-start]``) is a ladder of provisioning models. The GPU pool
starts on the first rung in the first zone of its placement (:mod:`rlcloud.gke.zones`). When Compute Engine
answers with a stockout (``ZONE_RESOURCE_POOL_EXHAUSTED``, ``GCE_STOCKOUT``: that zone has no such VM now) the
pool tries the spare zones the placement computed (only those Google names as having capacity, when it names
any), then the next rung. A quota error (regional: ``Insufficient regional quota ... NVIDIA_L4_GPUS``) skips the
rung's other zones, which share the region's quota, and goes to the next rung at once. Every move is logged,
priced (the hourly estimate on the new rung) and written on the new pool's nodes as the label
:data:`TRIED_LABEL`, so ``rlcloud cluster info`` shows it from any machine.

Why a node pool and not a whole cluster: GKE creates a pool in minutes but a cluster in 5-10, and one operation
at a time runs on a cluster; with a ladder the cluster is created with its CPU pool only, and the GPU pool is
added (and moved) with CreateNodePool, each request idempotent (ALREADY_EXISTS is adopted).

A flex-start pool is created empty (``--num-nodes=0``, autoscaling): Dynamic Workload Scheduler adds its nodes
when capacity exists, so creating it cannot stock out. Budgets price nodes by their labels
(:mod:`rlcloud.gke.budgets`): a move from Spot to on-demand is priced on-demand from the first node on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from rlcloud.errors import CapacityError, QuotaExceededError, RLCloudError
from rlcloud.specs.cluster import CapacityRung, ClusterSpec

__all__ = ["TRIED_LABEL", "CapacityLadder", "CapacityMove", "rung_hourly_cost", "tried_label"]

log = logging.getLogger("rlcloud.gke")

#: Kubernetes node label of a GPU pool made after a move: the (rung, zone) steps that failed before it,
#: oldest first, e.g. ``spot-a.spot-c.on-demand-quota`` (zone letters of the cluster's region).
TRIED_LABEL = "rlcloud-capacity-tried"
#: Kubernetes node label of the GPU pool's rung (spot, on-demand or flex-start).
RUNG_LABEL = "rlcloud-capacity"
_LABEL_MAX = 63  # a Kubernetes label value holds at most 63 characters


def rung_hourly_cost(spec: ClusterSpec, rung: str) -> float | None:
    """The cluster's estimated USD per hour with its GPU pool on ``rung`` (None: a price is missing)."""
    from rlcloud.gke.prices import estimate_hourly_cost

    on_rung = spec.model_copy(update={"spot": rung == "spot", "capacity": [CapacityRung(rung)]})
    return estimate_hourly_cost(on_rung).hourly


@dataclass(frozen=True)
class CapacityMove:
    """One step down the ladder: ``rung`` in ``zone`` failed (``why``: stockout or quota); next ``to_rung`` in
    ``to_zone``, estimated at ``hourly_usd`` per hour."""

    rung: str
    zone: str
    why: str
    to_rung: str
    to_zone: str
    hourly_usd: float | None
    message: str = ""

    def line(self) -> str:
        """One line for logs, ``cluster info`` and the doctor."""
        price = f"~${self.hourly_usd:.2f}/h" if self.hourly_usd is not None else "price unknown"
        return f"{self.rung} in {self.zone}: {self.why}; now {self.to_rung} in {self.to_zone} ({price})"


def _zone_letter(zone: str) -> str:
    return zone.rsplit("-", 1)[-1] if zone else "?"


def tried_label(moves: Sequence[CapacityMove]) -> str:
    """The :data:`TRIED_LABEL` value for ``moves``: the newest steps that fit in a label, oldest first."""
    parts = [f"{m.rung}-{'quota' if m.why == 'quota' else _zone_letter(m.zone)}" for m in moves]
    while parts and len(".".join(parts)) > _LABEL_MAX:
        parts.pop(0)
    return ".".join(parts)


@dataclass
class CapacityLadder:
    """Where the GPU pool goes next. ``steps``: its candidate zone sets in order (the placement's zone first,
    then the spares; ``()`` is the cluster's own zone(s)); ``location``: the cluster's location (for messages)."""

    spec: ClusterSpec
    steps: list[tuple[str, ...]]
    location: str
    rung_index: int = 0
    step_index: int = 0
    moves: list[CapacityMove] = field(default_factory=list)

    @classmethod
    def for_pool(
        cls, spec: ClusterSpec, location: str, placement: tuple[str, ...], spares: Sequence[str]
    ) -> CapacityLadder:
        """The ladder of ``spec``'s GPU pool in a cluster at ``location``: ``placement`` its zones now, ``spares``
        the other zones (of the region) that offer its GPU."""
        steps = [placement] + [(z,) for z in spares if (z,) != placement]
        return cls(spec=spec, steps=steps, location=location)

    @property
    def rungs(self) -> list[str]:
        """The rungs, in order."""
        return [str(r) for r in self.spec.capacity_ladder]

    @property
    def rung(self) -> str:
        """The rung the pool is on (or about to be created on)."""
        return self.rungs[self.rung_index]

    @property
    def locations(self) -> tuple[str, ...]:
        """The zones of the pool now (``()``: the cluster's)."""
        return self.steps[self.step_index]

    @property
    def zone(self) -> str:
        """The zones of the pool now, as text."""
        return ", ".join(self.locations) or self.location

    def advance(self, error: RLCloudError) -> bool:
        """The pool failed on the current step with ``error``: move to the next one, record and log the move.
        False when the ladder is used up (or ``error`` is no capacity or quota error: no move helps)."""
        if not isinstance(error, CapacityError | QuotaExceededError):
            return False
        quota = isinstance(error, QuotaExceededError)
        rung, zone = self.rung, self.zone
        named = [] if quota else list(getattr(error, "zones_with_capacity", []) or [])
        step = None
        if not quota:
            # the rung's other zones, those Google names first (a named zone outside our steps is no option:
            # the pool may only go where its GPU is offered)
            later = list(range(self.step_index + 1, len(self.steps)))
            if named:
                later = [i for i in later if set(self.steps[i]) & set(named)]
            step = later[0] if later else None
        if step is not None:
            self.step_index = step
        elif self.rung_index + 1 < len(self.rungs):
            self.rung_index += 1
            self.step_index = 0  # a new rung draws on other capacity (and quota): every zone again
        else:
            return False
        move = CapacityMove(
            rung=rung,
            zone=zone,
            why="quota" if quota else "stockout",
            to_rung=self.rung,
            to_zone=self.zone,
            hourly_usd=rung_hourly_cost(self.spec, self.rung),
            message=str(error)[:300],
        )
        self.moves.append(move)
        log.warning("cluster %s: GPU pool %s", self.spec.name, move.line())
        return True

    def labels(self) -> dict[str, str]:
        """The node labels of a pool created on the current step: its rung and what was tried before."""
        labels = {RUNG_LABEL: self.rung}
        if self.moves:
            labels[TRIED_LABEL] = tried_label(self.moves)
        return labels

    def exhausted(self, error: RLCloudError) -> RLCloudError:
        """The error to raise when the ladder is used up: ``error``, saying every step that was tried."""
        if not self.moves:
            return error
        tried = "; ".join(m.line() for m in self.moves)
        text = f"{error} (rlcloud's capacity ladder {' > '.join(self.rungs)} is used up: {tried})"
        if isinstance(error, QuotaExceededError):
            return QuotaExceededError(text, quota=error.quota)
        if isinstance(error, CapacityError):
            return CapacityError(text, zones_with_capacity=error.zones_with_capacity)
        return error
