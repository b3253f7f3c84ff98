"""Population-based training (PBT, Jaderberg et al. 2017) without a controller: each trial of a sweep with a
``population:`` section (rlcloud.specs.population) decides for itself, at timesteps, from the store's data.

A trial gets its settings through ``RLCLOUD_EARLY_STOPPING`` with ``rule: pbt`` (the channel of every
decision at timesteps: rlcloud.runner.early_stop). :class:`PopulationMember` is an
:class:`~rlcloud.runner.early_stop.EarlyStopper` with another decision, and inherits its machinery: the loop
holds at each point (``perturbation_interval``, twice that, ...) while the *earlier trials* (lower index)
have not settled there, so that a decision is a function of the trials' curves, not of their timing, and a
trial never waits for a later one (a sweep with ``max_parallel`` below its size goes on).

At a point a member

1. snapshots its agent into the store, ``<sweep>/population/<trial>/ckpt-<timestep:012d>/`` (files written
   before the record that names them: a record always names a complete checkpoint), once per point;
2. ranks its objective value with the earlier trials' values there (:func:`quantiles`: Ray Tune's
   ``PopulationBasedTraining._quantiles``: the bottom and top ``ceil(n x quantile)``, at most ``n / 2``);
3. in the bottom, exploits: picks a trial of the top at random, and explores: that trial's parameter values
   at the point, perturbed (:func:`explore`: numbers x0.8 or x1.2, or drawn anew from their distribution
   with ``resample_probability``; lists and choices drawn anew). The random numbers come from
   :func:`decision_rng`, seeded with the sweep's ``sampler_seed``, the point and the trial: any machine draws
   the same;
4. writes its record create-only, ``<sweep>/decisions/pbt/<point:012d>/<trial>.json``: its value, the
   parameter values it trained with, its snapshot, the decision (``continue`` or ``exploit``) and, for an
   exploit, the lineage: ``donor``, ``donor_checkpoint``, ``donor_value``, ``donor_at``, ``next_params`` and
   each ``mutations`` entry's ``from``/``to``;
5. for an exploit, downloads the donor's snapshot and goes on from it with the new values
   (:meth:`rlcloud.runner.loop.Trainer.adopt`: a new agent, the snapshot restored, a checkpoint of its own
   written at once, the values kept in its ``state.json`` so that a resumed trial has them again).

A record is made once. A trial killed at any moment (kill -9 of the process or its pod) resumes from its
last checkpoint, finds its own records, and applies again those made after that checkpoint: the same
decision, the same donor snapshot, the same values. Records at or before the checkpoint are in it already.
"""

from __future__ import annotations

import logging
import math
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.layout import POPULATION
from rlcloud.runner.early_stop import CONTINUE, EarlyStopper, _finite, record_name

if TYPE_CHECKING:
    from rlcloud.storage import Store

__all__ = [
    "EXPLOIT",
    "RULE",
    "PopulationMember",
    "decision_rng",
    "explore",
    "lineage",
    "mark_exploits",
    "pbt_decision",
    "quantiles",
    "read_pbt_records",
    "snapshot_name",
]

logger = logging.getLogger(__name__)

RULE = "pbt"
EXPLOIT = "exploit"
#: Where the members' snapshots go, relative to the sweep's location.
_SNAPSHOT = re.compile(rf"{POPULATION}/[a-z0-9][a-z0-9-]*/ckpt-\d{{12}}")
#: The factors a number is perturbed by (Ray Tune's and the paper's).
FACTORS = (0.8, 1.2)


def snapshot_name(trial: str, timestep: int) -> str:
    """Where ``trial``'s snapshot at ``timestep`` goes, relative to the sweep's location."""
    return f"{POPULATION}/{trial}/ckpt-{timestep:012d}"


# ------------------------------------------------------------------------------------------------ the rule


def quantiles(scores: Mapping[str, float | None], quantile: float) -> tuple[list[str], list[str]]:
    """(bottom, top) of the trials in ``scores`` (in their order; None or not finite: not ranked): sorted by
    score (stable: ties keep the mapping's order), the lowest and the highest ``ceil(n x quantile)``, at most
    ``floor(n / 2)``; none when fewer than two are ranked (Ray Tune's ``_quantiles``)."""
    finite = {name: float(v) for name, v in scores.items() if v is not None and math.isfinite(v)}
    ranked = sorted(finite, key=lambda name: finite[name])
    if len(ranked) <= 1:
        return [], []
    count = math.ceil(len(ranked) * quantile)
    if count > len(ranked) / 2:
        count = math.floor(len(ranked) / 2)
    return ranked[:count], ranked[-count:]


def decision_rng(seed: int, point: int, trial: str) -> random.Random:
    """The random numbers of ``trial``'s decision at ``point``: the same on every machine (a string seed is
    hashed with SHA-512 by ``random.Random``, not with Python's per-process hash)."""
    return random.Random(f"rlcloud-pbt/{seed}/{point}/{trial}")


def pbt_decision(
    value: float | None, peers: Mapping[str, float | None], *, trial: str, quantile: float, rng: random.Random
) -> tuple[str, str | None, str]:
    """(``"continue"`` or ``"exploit"``, the donor or None, why) for ``trial`` with ``value`` among the earlier
    trials' ``peers`` (in index order) at a point."""
    if value is None:
        return CONTINUE, None, "no objective value yet: nothing to rank"
    scores = {**{k: v for k, v in peers.items() if k != trial}, trial: value}
    bottom, top = quantiles(scores, quantile)
    ranked = sum(v is not None and math.isfinite(v) for v in scores.values())
    if trial not in bottom:
        return CONTINUE, None, f"value {value:.1f} is not in the bottom {quantile:g} of {ranked} trial(s)"
    donor = rng.choice(top)
    return EXPLOIT, donor, f"value {value:.1f} is in the bottom {quantile:g} of {ranked}: exploits {donor}"


def explore(
    params: Mapping[str, Any], mutations: Mapping[str, Any], rng: random.Random, *, resample_probability: float = 0.25
) -> dict[str, Any]:
    """``params`` perturbed by ``mutations`` (key -> list of values or a Distribution), drawn with ``rng`` in the
    keys' sorted order: a number with a uniform/loguniform distribution is multiplied by 0.8 or 1.2 (an int
    stays an int, at least 1), or with ``resample_probability`` drawn anew; lists, choices and values that
    are no number are drawn anew."""
    out = dict(params)
    for key in sorted(mutations):
        spec = mutations[key]
        current = params.get(key)
        if isinstance(spec, list):
            out[key] = rng.choice(spec)
            continue
        if spec.choice is not None:
            out[key] = rng.choice(spec.choice)
            continue
        if not isinstance(current, int | float) or isinstance(current, bool) or rng.random() < resample_probability:
            out[key] = _round(spec.sample(rng))
            continue
        new = float(current) * rng.choice(FACTORS)
        out[key] = max(1, round(new)) if isinstance(current, int) else _round(new)
    return out


def _round(value: Any) -> Any:
    return float(f"{value:.6g}") if isinstance(value, float) else value


def _dotted(data: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(data, Mapping) or part not in data:
            return None
        data = data[part]
    return data


# ------------------------------------------------------------------------------------------ the member


class PopulationMember(EarlyStopper):
    """One trial's PBT decisions (module docstring), a loop hook like the early stopper.

    ``settings``: ``RLCLOUD_EARLY_STOPPING`` with ``rule: pbt``; ``trainer``: the trial's
    :class:`~rlcloud.runner.loop.Trainer` (its value, its agent to snapshot, :meth:`adopt`); ``store`` and
    ``peers`` as the early stopper's; ``save``: writes the snapshot's files into a directory (default: the
    trainer's agent, :func:`rlcloud.runner.saving.save_agent`).
    """

    RULES = (RULE,)
    DECISIONS = (CONTINUE, EXPLOIT)

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        trainer: Any,
        store: Store | None = None,
        peers: Sequence[str] | None = None,
        save: Callable[[Path], Any] | None = None,
    ) -> None:
        from rlcloud.specs.sweep import Distribution

        interval = int(settings["perturbation_interval"])
        self.trainer = trainer
        self.quantile = float(settings.get("quantile", 0.25))
        self.seed = int(settings.get("seed", 0))
        self.resample = float(settings.get("resample_probability", 0.25))
        self.objective = str(settings.get("objective", "mean_return"))
        self.mutations: dict[str, Any] = {
            k: v if isinstance(v, list) else Distribution.model_validate(v)
            for k, v in dict(settings["mutations"]).items()
        }
        self._snapshots: dict[int, str] = {}
        self._save = save or self._save_agent
        super().__init__(
            {**settings, "grace_timesteps": interval, "interval_timesteps": interval},
            value=self._objective,
            stop=lambda reason: None,  # a member never stops early: a bad one takes a good one's weights
            gate=lambda point: setattr(trainer, "decision_at", point),
            hold=trainer.hold,
            stopping=lambda: trainer.stop_requested,
            total_timesteps=trainer.spec.total_timesteps,
            store=store,
            peers=peers,
        )

    @classmethod
    def for_trainer(cls, trainer: Any) -> PopulationMember | None:
        """The member ``RLCLOUD_EARLY_STOPPING`` describes when its rule is ``pbt``, else None."""
        from rlcloud.runenv import RunnerEnv

        settings = RunnerEnv.from_env().early_stopping
        if settings is None or settings.get("rule") != RULE:
            return None
        return cls(dict(settings), trainer=trainer)

    def _objective(self) -> float | None:
        if self.objective == "evaluation":
            return getattr(self.trainer, "last_evaluation", None)
        return self.trainer.mean_return  # type: ignore[no-any-return]

    def params(self) -> dict[str, Any]:
        """The values of the mutated arguments this trial trains with now (None: the agent's default)."""
        spec = self.trainer.spec.model_dump(mode="json")
        return {key: _dotted(spec, key) for key in sorted(self.mutations)}

    # -- the loop hook
    def step(self, timestep: int) -> bool:
        """Decide at every point up to ``timestep`` (an exploit adopts the donor's snapshot at once); False when
        one waits for earlier trials."""
        while self.next_decision is not None and timestep >= self.next_decision:
            record = self.try_decide(self.next_decision, timestep)
            if record is None:
                return False
            self._advance()
            # a record at or before the checkpoint this run resumed from is in that checkpoint already
            if record["decision"] == EXPLOIT and int(record.get("at", 0)) > int(getattr(self.trainer, "resumed_at", 0)):
                self._exploit(record)
        return True

    def try_decide(self, point: int, timestep: int | None = None) -> dict[str, Any] | None:
        """The decision at ``point`` if it can be made now (or was made), else None (earlier trials have not
        settled there: :attr:`waiting_for`). Never blocks (but the first call at a point uploads the snapshot)."""
        name = record_name(RULE, point, self.trial)
        own = self._load(name)
        if own is not None:
            return own
        at = int(self.trainer.counters["timestep"] if timestep is None else timestep)
        checkpoint = self._snapshot(point, at)
        peers, unsettled = self._peers_at(point)
        self.waiting_for = unsettled
        if unsettled:
            return None
        value = _finite(self._value())
        rng = decision_rng(self.seed, point, self.trial)
        decision, donor, reason = pbt_decision(value, peers, trial=self.trial, quantile=self.quantile, rng=rng)
        record: dict[str, Any] = {
            "trial": self.trial,
            "index": self.index,
            "rule": RULE,
            "timestep": point,
            "at": at,
            "value": value,
            "params": self.params(),
            "checkpoint": checkpoint,
            "decision": decision,
            "reason": reason,
            "compared": sum(v is not None for v in peers.values()),
            "decided": time.time(),
        }
        if donor is not None:
            record.update(self._lineage(point, donor, rng) or {"decision": CONTINUE, "reason": reason + " (unread)"})
        return self._write(name, record)

    def _lineage(self, point: int, donor: str, rng: random.Random) -> dict[str, Any] | None:
        """An exploit's part of the record: the donor's snapshot and values, the explored values; None when the
        donor's record cannot be used (warned about)."""
        found = self._load(record_name(RULE, point, donor))
        snapshot = None if found is None else found.get("checkpoint")
        params = None if found is None else found.get("params")
        if not isinstance(snapshot, str) or not _SNAPSHOT.fullmatch(snapshot) or not isinstance(params, dict):
            logger.warning("the record of %s at %d names no snapshot and values: no exploit", donor, point)
            return None
        new = explore(params, self.mutations, rng, resample_probability=self.resample)
        return {
            "donor": donor,
            "donor_checkpoint": snapshot,
            "donor_value": found.get("value") if found is not None else None,
            "donor_at": found.get("at") if found is not None else None,
            "next_params": new,
            "mutations": {k: {"from": params.get(k), "to": new[k]} for k in sorted(self.mutations)},
        }

    # -- the store
    def _snapshot(self, point: int, at: int) -> str:
        """This trial's agent at ``point``, uploaded once (files first: the record names it afterwards)."""
        if point in self._snapshots:
            return self._snapshots[point]
        name = snapshot_name(self.trial, at)
        with tempfile.TemporaryDirectory(prefix="rlcloud-pbt-") as tmp:
            self._save(Path(tmp))
            files = sorted(p for p in Path(tmp).iterdir() if p.is_file())
            self.store.upload_files([(path, f"{name}/{path.name}") for path in files])
        self._snapshots[point] = name
        return name

    def _save_agent(self, directory: Path) -> None:
        from rlcloud.runner.saving import save_agent

        save_agent(self.trainer.agent, directory)

    def _exploit(self, record: Mapping[str, Any]) -> None:
        """Take the donor's snapshot with the explored values (:meth:`Trainer.adopt`)."""
        snapshot = str(record.get("donor_checkpoint", ""))
        new = record.get("next_params")
        if not _SNAPSHOT.fullmatch(snapshot) or not isinstance(new, dict):
            logger.warning("exploit at %s names no snapshot: not applied", record.get("timestep"))
            return
        workdir = Path(self.trainer.workdir)
        local = workdir / f".pbt-{int(record['timestep']):012d}"
        shutil.rmtree(local, ignore_errors=True)
        try:
            listed = self.store.list(snapshot + "/")
            self.store.download_files([(info, local / info.name.rsplit("/", 1)[-1]) for info in listed])
            overrides = {**dict(getattr(self.trainer, "overrides", {}) or {}), **new}
            self.trainer.adopt(overrides, local)
            logger.info(
                "exploit at timestep %s: %s's %s (value %s), values %s",
                record.get("at"),
                record.get("donor"),
                snapshot.rsplit("/", 1)[-1],
                record.get("donor_value"),
                new,
            )
        except Exception as exc:  # the run goes on with its own weights; the record still says what was decided
            logger.warning("exploit of %s at timestep %s failed: %s", snapshot, record.get("at"), exc)
        finally:
            shutil.rmtree(local, ignore_errors=True)


# ------------------------------------------------------------------------------------------ reading back


def read_pbt_records(store: Store) -> list[dict[str, Any]]:
    """Every PBT record of the sweep whose location ``store`` is, in (timestep, index) order, read side by side
    (a request each); what is no record is skipped with a warning."""
    from concurrent.futures import ThreadPoolExecutor

    from rlcloud.runner.early_stop import MAX_RECORD_BYTES, parse_decision

    def read(name: str) -> dict[str, Any] | None:
        try:
            return parse_decision(store.read_record_bytes(name, MAX_RECORD_BYTES), (CONTINUE, EXPLOIT))
        except Exception as exc:  # another process's record: input
            logger.warning("skipping %s: %s", name, exc)
            return None

    names = [
        i.name for i in store.list(record_name(RULE, 0, "x").split("/", 1)[0] + f"/{RULE}/") if i.name.endswith(".json")
    ]
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(names))), thread_name_prefix="rlcloud-pbt") as pool:
        records = [r for r in pool.map(read, names) if r is not None]
    return sorted(records, key=lambda r: (r["timestep"], r["index"] if isinstance(r.get("index"), int) else 0))


def lineage(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Trial -> its path through the population, one step per exploit: ``"<-donor@timestep {key: value}"``
    joined by ``"; "`` (empty: it never exploited)."""
    out: dict[str, list[str]] = {}
    for r in records:
        if r.get("decision") != EXPLOIT:
            continue
        values = ", ".join(f"{k.rsplit('.', 1)[-1]}={v:.4g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
                           for k, v in dict(r.get("next_params") or {}).items())  # fmt: skip
        out.setdefault(str(r.get("trial")), []).append(f"<-{r.get('donor')}@{r.get('at')} {values}")
    return {trial: "; ".join(steps) for trial, steps in out.items()}


def mark_exploits(figure: Any, records: Sequence[Mapping[str, Any]]) -> int:
    """Mark each exploit of ``records`` on ``figure``'s first axes (x: its timestep, y: the value that put the
    trial in the bottom), labelled once; returns how many were marked."""
    points = [
        (float(r["at"]), float(r["value"]))
        for r in records
        if r.get("decision") == EXPLOIT and isinstance(r.get("at"), int) and isinstance(r.get("value"), int | float)
    ]
    if not points or not figure.axes:
        return 0
    axes = figure.axes[0]
    xs, ys = zip(*points, strict=True)
    axes.scatter(xs, ys, marker="x", color="black", zorder=5, label=f"PBT exploit ({len(points)})")
    axes.legend(fontsize="small")
    return len(points)
