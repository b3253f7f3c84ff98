"""The record of a run in its results location: the spec of record and the history of its starts.

``<location>/spec.yaml`` is written once, when the run is created, and never replaced: it says what the
run learns. Each later start compares its spec with it (:mod:`rlcloud.specs.identity`): a different
learning setup is refused before anything starts or is written; other changes (a longer budget, a new
saver frequency, another cluster) are allowed and appended to ``<location>/history.jsonl``, one JSON
object per start: ``{"time", "event": "created"|"resumed", "where", "fingerprint", "changes": [...]}``.

Both files go through the results store, so the rule is the same for a directory and for ``gs://``,
whichever backend runs the experiment.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import yaml

from rlcloud.errors import NotFoundError, RLCloudError, StorageError
from rlcloud.specs.identity import Change, ChangedRunError, diff_specs, fingerprint, split_changes

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.storage.base import Store

__all__ = [
    "HISTORY_FILE",
    "SPEC_FILE",
    "append_history",
    "check_resume",
    "create_record",
    "read_history",
    "read_record",
    "start_recorded",
]

SPEC_FILE = "spec.yaml"
HISTORY_FILE = "history.jsonl"
_APPEND_ATTEMPTS = 5

logger = logging.getLogger(__name__)


def sweep_trials(store: Store) -> list[str]:
    """Names of the trials whose spec of record is in ``store`` (``<trial>/spec.yaml``): a sweep's location.

    An experiment's location has its own ``spec.yaml`` and no trials; an experiment and a sweep of one name
    under one results root would shadow each other, so each start checks the other is not there.
    """
    return sorted(
        {o.name.split("/", 1)[0] for o in store.list() if o.name.count("/") == 1 and o.name.endswith("/" + SPEC_FILE)}
    )


def read_record(store: Store) -> dict[str, Any] | None:
    """The spec of record as a mapping, or None when the run was never created here."""
    try:
        text = store.read_text(SPEC_FILE)
    except NotFoundError:
        return None
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise StorageError(f"{store.describe(SPEC_FILE)} is not a spec (a mapping); move it away to start over")
    return data


def check_resume(store: Store, spec: ExperimentSpec) -> list[Change] | None:
    """What a start of ``spec`` would change in the run recorded in ``store``.

    None: no run is recorded (the start creates one). A list: the changes allowed on resume (possibly
    empty). Raises :class:`~rlcloud.specs.identity.ChangedRunError` (a SpecError) when a learning field
    differs. Reads only; writes nothing.
    """
    record = read_record(store)
    if record is None:
        return None
    learning, other = split_changes(diff_specs(record, spec))
    if learning:
        raise ChangedRunError(spec.name, store.describe(), learning)
    return other


def create_record(store: Store, spec: ExperimentSpec) -> bool:
    """Write the spec of record of a new run; False when one exists already (it is never replaced).

    Create-only (a generation precondition): of two starts racing to create one run, one writes the record
    and the other finds it, so the second can still be checked against it (:func:`check_resume`).
    """
    from rlcloud.storage.base import PreconditionFailedError

    try:
        store.write_text(SPEC_FILE, spec.to_yaml(), if_generation_match=0)
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
    _append_line(store, HISTORY_FILE, json.dumps(line, sort_keys=True, default=str))


def start_recorded(
    store: Store,
    spec: ExperimentSpec,
    start: Callable[[], bool],
    *,
    where: str,
    prepare: Callable[[], None] | None = None,
    on_failure: Callable[[], None] | None = None,
) -> bool:
    """Start a run under its record: check ``spec`` against the record (refusing a different learning setup
    before anything happens), ``prepare()`` (e.g. create a cluster), write the spec of record if the run is
    new, ``start()`` it (the backend's start: False when it was running already), and add a history line
    when it started. ``on_failure()`` runs when anything after the check fails. Returns what start said.
    """
    changes = check_resume(store, spec)  # raises ChangedRunError, having written nothing
    if prepare is not None:
        prepare()
    try:
        event = "created" if changes is None and create_record(store, spec) else "resumed"
        if changes is None and event == "resumed":  # another start created the run a moment ago
            changes = check_resume(store, spec)
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


def read_history(store: Store) -> list[dict[str, Any]]:
    """The run's start history (oldest first); empty when there is none."""
    try:
        text = store.read_text(HISTORY_FILE)
    except NotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _append_line(store: Store, name: str, line: str) -> None:
    """Append one line to a store object: read, add, write under a generation precondition, retried when
    another writer won (object stores have no append)."""
    from rlcloud.storage.base import PreconditionFailedError

    for _ in range(_APPEND_ATTEMPTS):
        info = store.stat(name)
        current = store.read_text(name) if info is not None else ""
        if current and not current.endswith("\n"):
            current += "\n"
        try:
            store.write_text(name, current + line + "\n", if_generation_match=info.generation if info else 0)
            return
        except PreconditionFailedError:
            continue
    raise RLCloudError(f"could not append to {store.describe(name)}: it kept changing under concurrent writers")
