"""The record of a run in its results location: the spec of record and the history of its starts.

``<location>/spec.yaml`` is written once, when the run is created, and never replaced: it says what the
run learns. Each later start compares its spec with it (:mod:`rlcloud.specs.identity`): a different
learning setup is refused before anything starts or is written; other changes (a longer budget, a new
saver frequency, another cluster) are allowed and appended to ``<location>/history.jsonl``, one JSON
object per start: ``{"time", "event": "created"|"resumed", "where", "fingerprint", "changes": [...]}``.

A sweep has a record of its own the same way: ``<sweep location>/sweep.yaml``, written once (create-only)
when the sweep is first started, and compared with every later start (:func:`start_sweep_recorded`): a
sweep that would have other trials (another grid, seeds, or base experiment learning setup) is refused
before anything starts, whichever backend runs it; its start history goes to ``<sweep location>/
history.jsonl``.

Both files go through the results store, so the rule is the same for a directory and for ``gs://``,
whichever backend runs the experiment.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlcloud.errors import NotFoundError, RecordError, RLCloudError
from rlcloud.layout import HISTORY, SPEC, SWEEP_SPEC, growth_path
from rlcloud.specs.identity import (
    Change,
    ChangedRunError,
    ChangedSweepError,
    diff_specs,
    diff_sweeps,
    fingerprint,
    split_changes,
    sweep_fingerprint,
)
from rlcloud.stored import MAX_RECORD_BYTES, parse_record, parse_record_lines

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import Growth, SweepSpec
    from rlcloud.storage.base import Store

__all__ = [
    "append_history",
    "append_sweep_event",
    "check_resume",
    "check_sweep_resume",
    "create_record",
    "grow_sweep_recorded",
    "read_history",
    "read_record",
    "read_sweep_growth",
    "read_sweep_record",
    "record_in_force",
    "start_recorded",
    "start_sweep_recorded",
    "sweep_of_record",
]

_APPEND_ATTEMPTS = 5
#: Largest history read: one ~300-byte line per start, so about 50,000 starts.
MAX_HISTORY_BYTES = 16 * 1024 * 1024

logger = logging.getLogger(__name__)


def sweep_trials(store: Store) -> list[str]:
    """Names of the trials whose spec of record is in ``store`` (``<trial>/spec.yaml``): a sweep's location.

    An experiment's location has its own ``spec.yaml`` and no trials; an experiment and a sweep of one name
    under one results root would shadow each other, so each start checks the other is not there.
    """
    return sorted(
        {o.name.split("/", 1)[0] for o in store.list() if o.name.count("/") == 1 and o.name.endswith("/" + SPEC)}
    )


def _read_of_record(store: Store, name: str, what: str) -> dict[str, Any] | None:
    """A record (``spec.yaml``, ``sweep.yaml``) as a mapping, or None when there is none. A record is input (a
    results prefix may be shared): its size is checked before the read, its text read within a spec's
    bounds, RecordError naming it otherwise."""
    try:
        data = store.read_record_bytes(name, MAX_RECORD_BYTES)
    except NotFoundError:
        return None
    try:
        return dict(parse_record(data, source=store.describe(name), form="yaml"))
    except RecordError as exc:
        raise RecordError(f"{exc}; it is not {what}: move it away to start over") from None


def read_record(store: Store) -> dict[str, Any] | None:
    """The spec of record as a mapping, or None when the run was never created here."""
    return _read_of_record(store, SPEC, "a spec of record")


def record_in_force(store: Store) -> dict[str, Any] | None:
    """The spec of record with the code the run trains with now: ``spec.yaml`` is written once, so a resume
    that accepted other code (``accept_new_code``) says so in the history, and the latest such line's
    ``code`` is the run's (an archive by digest: only the archive it names is ever fetched and checked)."""
    record = read_record(store)
    if record is None:
        return None
    for line in reversed(read_history(store)):
        found = _code_change(line)
        if found is None:
            continue
        field, to = found
        if field == "code":  # code added (a mapping) or removed
            record["code"] = to if isinstance(to, dict) else None
        elif isinstance(record.get("code"), dict):
            record["code"] = {**record["code"], "digest": to}
        break
    return record


def _code_change(line: dict[str, Any]) -> tuple[str, Any] | None:
    """``(field, to)`` of a history line's accepted code change (``code`` or ``code.digest``), or None."""
    changes = line.get("changes")
    for change in changes if isinstance(changes, list) else []:
        if isinstance(change, dict) and change.get("field") in ("code", "code.digest"):
            return str(change["field"]), change.get("to")
    return None


def check_resume(store: Store, spec: ExperimentSpec, *, accept_new_code: bool = False) -> list[Change] | None:
    """What a start of ``spec`` would change in the run recorded in ``store``.

    None: no run is recorded (the start creates one). A list: the changes allowed on resume (possibly
    empty). Raises :class:`~rlcloud.specs.identity.ChangedRunError` (a SpecError) when a learning field
    differs. ``accept_new_code``: other code (``code.digest``, code added or removed) is a change the user
    accepts, listed with the others (the history line then holds both digests), not a refusal. The code of
    record is the latest digest so accepted (:func:`record_in_force`). Reads only; writes nothing.
    """
    record = record_in_force(store)
    if record is None:
        return None
    learning, other = split_changes(diff_specs(record, spec))
    if accept_new_code:
        code = [c for c in learning if c.field.split(".", 1)[0] == "code"]
        learning, other = [c for c in learning if c not in code], code + other
    if learning:
        raise ChangedRunError(spec.name, store.describe(), learning)
    if any(c.field in ("total_timesteps", "episodes") for c in other):
        _refuse_a_budget_already_trained(store, spec)
    return other


def _refuse_a_budget_already_trained(store: Store, spec: ExperimentSpec) -> None:
    """A resume whose new stop condition the run has already reached would train nothing, and its bar and
    tables would show a total below what was trained ("72,000 of 5,000"): refused, saying what was trained."""
    from rlcloud.errors import SpecError, SpecProblem
    from rlcloud.storage.client import read_progress

    try:
        progress = read_progress(store)
    except RLCloudError:  # an unreadable progress.json: the runner decides from its checkpoint
        return
    if progress is None:
        return
    for field, limit, done, unit in (
        ("total_timesteps", spec.total_timesteps, progress.timestep, "timesteps"),
        ("episodes", spec.episodes, progress.episode, "episodes"),
    ):
        if limit is not None and done is not None and done >= limit:
            raise SpecError(
                [
                    SpecProblem(
                        field,
                        f"{spec.name} has trained {done:,} {unit} already: a resume up to {limit:,} has nothing "
                        f"to train. Give a larger {field} to train on, or a new name for a new run",
                        limit,
                    )
                ]
            )


def create_record(store: Store, spec: ExperimentSpec) -> bool:
    """Write the spec of record of a new run; False when one exists already (it is never replaced).

    Create-only (a generation precondition): of two starts racing to create one run, one writes the record
    and the other finds it, so the second can still be checked against it (:func:`check_resume`).
    """
    from rlcloud.storage.base import PreconditionFailedError

    try:
        store.write_text(SPEC, spec.to_yaml(), if_generation_match=0)
    except PreconditionFailedError:
        return False
    return True


def append_history(store: Store, spec: ExperimentSpec, *, event: str, changes: list[Change], where: str) -> None:
    """Add one line to the run's start history (``event``: "created" or "resumed")."""
    line = {
        "time": time.time(),
        "event": event,
        "where": where,
        "fingerprint": fingerprint(spec),
        "changes": [c.to_dict() for c in changes],
    }
    try:
        _append_line(store, HISTORY, json.dumps(line, sort_keys=True, default=str))
    except RecordError as exc:  # a history that is not ours (too large to read back): the run goes on
        logger.warning("start of %s not added to its history: %s", spec.name, exc)


def start_recorded(
    store: Store,
    spec: ExperimentSpec,
    start: Callable[[], bool],
    *,
    where: str,
    prepare: Callable[[], None] | None = None,
    on_failure: Callable[[], None] | None = None,
    accept_new_code: bool = False,
) -> bool:
    """Start a run under its record: check ``spec`` against the record (refusing a different learning setup
    before anything happens), ``prepare()`` (e.g. create a cluster), write the spec of record if the run is
    new, ``start()`` it (the backend's start: False when it was running already), and add a history line
    when it started. ``on_failure()`` runs when anything after the check fails. Returns what start said.
    ``accept_new_code``: other code is a recorded change, not a refusal (:func:`check_resume`).
    """
    changes = check_resume(store, spec, accept_new_code=accept_new_code)  # raises ChangedRunError: nothing written
    if prepare is not None:
        prepare()
    try:
        event = "created" if changes is None and create_record(store, spec) else "resumed"
        if changes is None and event == "resumed":  # another start created the run a moment ago
            changes = check_resume(store, spec, accept_new_code=accept_new_code)
        started = start()
    except BaseException:
        if on_failure is not None:
            on_failure()
        raise
    if not started:
        if changes:
            logger.warning(
                "experiment %s is already running; these changes apply from its next start: %s",
                spec.name,
                "; ".join(str(c) for c in changes),
            )
        return False
    append_history(store, spec, event=event, changes=changes or [], where=where)
    return True


def read_sweep_record(store: Store) -> dict[str, Any] | None:
    """The sweep of record (``sweep.yaml`` in the sweep's location) as a mapping, or None when the sweep was
    never started there."""
    return _read_of_record(store, SWEEP_SPEC, "a sweep of record")


def check_sweep_resume(store: Store, sweep: SweepSpec) -> list[Change] | None:
    """What a start of ``sweep`` would change in the sweep recorded in ``store`` (its location).

    None: no sweep is recorded there. A list: the changes allowed (possibly empty). Raises
    :class:`~rlcloud.specs.identity.ChangedSweepError` (a SpecError naming each changed field) when the
    sweep would have other trials. Reads only.
    """
    record = read_sweep_record(store)
    if record is None:
        return None
    refused, allowed = diff_sweeps(record, sweep)
    if refused:
        raise ChangedSweepError(sweep.name, store.describe(), refused)
    return allowed


def start_sweep_recorded(store: Store, sweep: SweepSpec, start: Callable[[], bool], *, where: str) -> bool:
    """Start a sweep under its record, as :func:`start_recorded` starts a run: refuse a sweep with other
    trials than the recorded one before anything happens, write the record when the sweep is new
    (create-only: of two racing starts, the second is checked against the first's record), ``start()``
    it, and add a line to the sweep's history when it started. Returns what ``start()`` said."""
    from rlcloud.storage.base import PreconditionFailedError

    changes = check_sweep_resume(store, sweep)  # raises ChangedSweepError, having written nothing
    event = "resumed"
    if changes is None:
        try:
            store.write_text(SWEEP_SPEC, sweep.to_yaml(), if_generation_match=0)
            event = "created"
        except PreconditionFailedError:  # another start created it a moment ago: this one must match it
            changes = check_sweep_resume(store, sweep)
    started = start()
    if started:
        line = {
            "time": time.time(),
            "event": event,
            "where": where,
            "fingerprint": sweep_fingerprint(sweep),
            "changes": [c.to_dict() for c in changes or []],
        }
        _append_line(store, HISTORY, json.dumps(line, sort_keys=True, default=str))
    elif changes:
        logger.warning(
            "sweep %s is already running; these changes apply from its next start: %s",
            sweep.name,
            "; ".join(str(c) for c in changes),
        )
    return started


# ------------------------------------------------------------------------------------------ growing sweeps

#: Most growth steps one sweep may have (each is one small read when the sweep of record is read back).
MAX_GROWTH_STEPS = 1000


def read_sweep_growth(store: Store) -> list[Growth]:
    """The growth steps recorded for the sweep in ``store`` (its location), oldest first: ``growth/000001.json``,
    ``growth/000002.json``, ... until the first missing one (each written create-only: numbers are never
    reused, so the list is the same from any machine)."""
    from rlcloud.specs.sweep import Growth

    steps: list[Growth] = []
    for number in range(1, MAX_GROWTH_STEPS + 1):
        name = growth_path(number)
        try:
            data = store.read_record_bytes(name, MAX_RECORD_BYTES)
        except NotFoundError:
            break
        steps.append(Growth.model_validate(parse_record(data, source=store.describe(name))))
    return steps


def sweep_of_record(store: Store, sweep: SweepSpec) -> SweepSpec:
    """``sweep`` with the growth of record (the growth its ``sweep.yaml`` was written with, then each recorded
    step): the trials the sweep in ``store`` has. ``sweep`` itself when none is recorded there."""
    record = read_sweep_record(store)
    if record is None:
        return sweep
    from rlcloud.specs.sweep import Growth

    first = [Growth.model_validate(step) for step in record.get("growth") or []]
    growth = first + read_sweep_growth(store)
    return sweep if growth == sweep.growth else sweep.with_growth(growth)


def _who() -> str:
    """``user@host`` of this process: who grew a sweep (the history says; nothing secret)."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): the uid says as much
        import os

        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def append_sweep_event(store: Store, sweep: SweepSpec, event: str, *, where: str, **details: Any) -> None:
    """Add one line to the sweep's history: ``{"time", "event", "who", "where", "fingerprint", ...details}``."""
    line = {"time": time.time(), "event": event, "who": _who(), "where": where,
            "fingerprint": sweep_fingerprint(sweep), **details}  # fmt: skip
    _append_line(store, HISTORY, json.dumps(line, sort_keys=True, default=str))


def grow_sweep_recorded(
    store: Store,
    sweep: SweepSpec,
    plan: Callable[[SweepSpec], Growth | None],
    apply: Callable[[SweepSpec], None],
    *,
    where: str,
) -> tuple[SweepSpec, list[str]]:
    """Grow a sweep under its record: ``plan(sweep of record)`` says what to add (None: nothing more), the step
    is written create-only as the next ``growth/NNNNNN.json``, ``apply(grown sweep)`` makes the backend run it,
    and a ``"grown"`` line per step goes to the sweep's history. Returns the grown sweep and the names of the
    trials added (or given a larger budget) by the steps this call completed (its own, or one a crashed call
    recorded).

    Idempotent and crash-safe: a step is recorded before anything runs it, and a step already recorded is not
    planned again (``plan`` sees it), so a second call after a crash at any moment applies the sweep of record
    again (the backend runs what is missing: finished trials are never retrained) and writes the history line
    the first call did not. Of two racing calls the second plans again on the first's step. Raises
    NotFoundError when the sweep was never started here, ChangedSweepError when ``sweep`` is another sweep.
    """
    from rlcloud.storage.base import PreconditionFailedError

    if read_sweep_record(store) is None:
        raise NotFoundError(
            f"sweep {sweep.name} has no record in {store.describe()}: start it first (`rlcloud sweep start`)"
        )
    check_sweep_resume(store, sweep)  # raises ChangedSweepError, having written nothing
    for _ in range(_APPEND_ATTEMPTS):
        current = sweep_of_record(store, sweep)
        step = plan(current)
        if step is None:
            grown = current
            break
        grown = current.with_growth([*current.growth, step])  # validated before it is recorded
        number = len(read_sweep_growth(store)) + 1
        try:
            store.write_text(
                growth_path(number), json.dumps(step.model_dump(exclude_defaults=True)), if_generation_match=0
            )
            break
        except PreconditionFailedError:  # another growth took this number: plan again on top of it
            continue
    else:
        raise RLCloudError(f"could not grow sweep {sweep.name}: its record kept changing under concurrent growth")
    apply(grown)
    # one history line per recorded step, written once its step has been applied (a crash before: next call)
    recorded = {line.get("step") for line in read_history(store) if line.get("event") == "grown"}
    steps = read_sweep_growth(store)
    first = len(grown.growth) - len(steps)  # steps in sweep.yaml itself were never "grown" by a call
    added: list[str] = []
    for number, done in enumerate(steps, start=1):
        if number in recorded:
            continue
        before = grown.model_copy(update={"growth": grown.growth[: first + number - 1]}).trial_table()
        after = grown.model_copy(update={"growth": grown.growth[: first + number]}).trial_table()
        new = [name for name, _p, _s in after[len(before) :]] or list(done.trials)  # added, or trained on
        added += new
        append_sweep_event(
            store, grown, "grown", where=where, step=number, growth=done.model_dump(exclude_defaults=True),
            added=new, trials=len(after),
        )  # fmt: skip
    return grown, added


def read_history(store: Store) -> list[dict[str, Any]]:
    """The run's start history (oldest first); empty when there is none. Lines that are not records rlcloud
    writes are skipped with a warning naming the file and line."""
    try:
        data = store.read_record_bytes(HISTORY, MAX_HISTORY_BYTES)
    except NotFoundError:
        return []
    skipped: list[str] = []
    records = parse_record_lines(data, source=store.describe(HISTORY), skipped=skipped)
    for why in skipped:
        logger.warning("skipping %s", why)
    return records


def _append_line(store: Store, name: str, line: str) -> None:
    """Append one line to a store object: read, add, write under a generation precondition, retried when
    another writer won (object stores have no append)."""
    from rlcloud.storage.base import PreconditionFailedError

    for _ in range(_APPEND_ATTEMPTS):
        info = store.stat(name)
        current = store.read_record_bytes(name, MAX_HISTORY_BYTES).decode("utf-8", "replace") if info else ""
        if current and not current.endswith("\n"):
            current += "\n"
        try:
            store.write_text(name, current + line + "\n", if_generation_match=info.generation if info else 0)
            return
        except PreconditionFailedError:
            continue
    raise RLCloudError(f"could not append to {store.describe(name)}: it kept changing under concurrent writers")
