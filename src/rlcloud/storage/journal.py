"""An Optuna study kept in the results store: a journal of numbered create-only objects, no database.

Optuna's ``JournalStorage`` keeps a study as an append-only log of operations (create a trial, set a parameter,
report a value, finish) and replays it; any backend that appends logs in one order for every process and reads
them back from a number on will do (``optuna.storages.journal.BaseJournalBackend``: ``read_logs(log_number_from)``
and ``append_logs(logs)``, optuna.readthedocs.io/en/stable/reference/generated/optuna.storages.journal.
BaseJournalBackend.html). :class:`StoreJournal` is one over a :class:`~rlcloud.storage.base.Store`: log ``n``
is the object ``study/<n:012d>.json`` (:data:`rlcloud.layout.STUDY`) in the sweep's location, written with
``if_generation_match=0`` (a Cloud Storage precondition: only if absent; a directory store's write under its lock):

* **append**: a writer lists the journal, then writes each log at the next free number; when another process
  took that number first (PreconditionFailedError) it tries the next. A number is tried only once the one
  before it exists, so the journal has no holes, and every log lands exactly once: many trials, in many pods,
  append at once without a controller or a database;
* **read**: one listing, then the logs from ``log_number_from`` on, in number order, up to the first missing
  number; a log never changes once written, so each is read once per process (cached by number).

Optuna is an optional extra (``pip install 'rlcloud[optuna]'``): this module imports it only in
:func:`open_study` and :func:`journal_backend`; :func:`require_optuna` raises the error that names the extra
(:class:`~rlcloud.errors.MissingExtraError`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from rlcloud.layout import STUDY
from rlcloud.storage.base import PreconditionFailedError, Store

if TYPE_CHECKING:
    import optuna

    from rlcloud.specs.sweep import Distribution

__all__ = [
    "MAX_LOG_BYTES",
    "TRIAL_ATTR",
    "StoreJournal",
    "ask_trial",
    "journal_backend",
    "log_path",
    "open_study",
    "report_trial",
    "require_optuna",
    "tell_trial",
]

logger = logging.getLogger("rlcloud.journal")

#: One journal entry is a small JSON object (a trial's parameters, a value): a larger object is not read.
MAX_LOG_BYTES = 1 << 20

#: The width of a log's number in its name: names sort as numbers do.
_DIGITS = 12


def log_path(number: int) -> str:
    """Journal log ``number``, relative to the sweep's location: ``study/<number:012d>.json``."""
    return f"{STUDY}/{number:0{_DIGITS}d}.json"


def _number(name: str) -> int | None:
    """The number of a journal object's name (None for any other object under ``study/``)."""
    stem = name[len(STUDY) + 1 :].removesuffix(".json")
    return int(stem) if len(stem) == _DIGITS and stem.isdigit() and name.endswith(".json") else None


def require_optuna(feature: str = "sampler: tpe") -> None:
    """Raise :class:`~rlcloud.errors.MissingExtraError` naming the ``optuna`` extra when Optuna is not installed
    (``feature``: what needs it)."""
    from rlcloud.errors import require

    require("optuna", "optuna", feature=feature)


class StoreJournal:
    """The journal of one study in ``store`` (the sweep's location): what Optuna's ``BaseJournalBackend`` asks
    for (:func:`journal_backend` makes one Optuna accepts). ``conflicts`` counts the numbers this process found
    taken by another when it appended (for the logs and the tests)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conflicts = 0
        self._logs: dict[int, dict[str, Any]] = {}
        self._next = 0  # the lowest number not known to be taken

    def _numbers(self) -> list[int]:
        """The numbers in the journal, in order (one listing)."""
        found = (_number(info.name) for info in self.store.list(f"{STUDY}/"))
        return sorted(n for n in found if n is not None)

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        """The logs numbered ``log_number_from`` and after, in order, up to the first number not written yet."""
        numbers = set(self._numbers())
        number = log_number_from
        while number in numbers:
            if number not in self._logs:
                data = self.store.read_record_bytes(log_path(number), MAX_LOG_BYTES)
                self._logs[number] = json.loads(data)
            self._next = max(self._next, number + 1)
            yield self._logs[number]
            number += 1

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Append ``logs`` in order, each at the next number no process has taken (create-only writes)."""
        if not logs:
            return
        numbers = self._numbers()
        number = max(self._next, numbers[-1] + 1 if numbers else 0)
        for log in logs:
            text = json.dumps(log, separators=(",", ":"))
            while True:
                try:
                    self.store.write_text(log_path(number), text, if_generation_match=0)
                    break
                except PreconditionFailedError:
                    self.conflicts += 1  # another process wrote this number first: the next one
                    number += 1
            self._logs[number] = json.loads(text)
            number += 1
            self._next = number


def journal_backend(store: Store) -> Any:
    """A :class:`StoreJournal` over ``store`` that is an ``optuna.storages.journal.BaseJournalBackend`` (the
    class is made when asked for: Optuna is an optional extra, not imported with rlcloud)."""
    require_optuna("a study in the results store")
    from optuna.storages.journal import BaseJournalBackend

    backend_class: Any = type("StoreJournalBackend", (StoreJournal, BaseJournalBackend), {})
    return backend_class(store)


def open_study(
    store: Store, name: str, *, direction: Literal["maximize", "minimize"] = "maximize", seed: int = 0
) -> optuna.Study:
    """The Optuna study ``name`` kept in ``store``'s journal (created by whichever process comes first, loaded by
    the others), with a TPE sampler seeded by ``seed``: give each process its own (a trial's index), or they all
    propose the same first configurations."""
    require_optuna()
    import optuna

    storage = optuna.storages.JournalStorage(journal_backend(store))
    sampler = optuna.samplers.TPESampler(seed=seed)
    return optuna.create_study(
        study_name=name, storage=storage, sampler=sampler, direction=direction, load_if_exists=True
    )


#: The Optuna user attribute that names the sweep trial an Optuna trial configures.
TRIAL_ATTR = "rlcloud_trial"


def _distributions(space: Mapping[str, Distribution | list[Any]]) -> dict[str, Any]:
    """Optuna distributions of a sweep's ``parameters``: uniform and loguniform as floats, a choice or a list as
    the index of its value (Optuna's categorical values must be scalars; a sweep's may be lists or mappings)."""
    import optuna

    out: dict[str, Any] = {}
    for key, dist in space.items():
        if isinstance(dist, list):
            out[key] = optuna.distributions.CategoricalDistribution(list(range(len(dist))))
        elif dist.uniform is not None:
            out[key] = optuna.distributions.FloatDistribution(*dist.uniform)
        elif dist.loguniform is not None:
            out[key] = optuna.distributions.FloatDistribution(*dist.loguniform, log=True)
        else:
            assert dist.choice is not None
            out[key] = optuna.distributions.CategoricalDistribution(list(range(len(dist.choice))))
    return out


def _values(space: Mapping[str, Distribution | list[Any]], params: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep trial's parameter values from an Optuna trial's ``params`` (choices back from their index)."""
    out: dict[str, Any] = {}
    for key, dist in space.items():
        value = params[key]
        if isinstance(dist, list):
            out[key] = dist[int(value)]
        elif dist.choice is not None:
            out[key] = dist.choice[int(value)]
        else:
            out[key] = float(value)
    return out


def _find(study: optuna.Study, name: str) -> optuna.trial.FrozenTrial | None:
    """The study's Optuna trial that configures sweep trial ``name`` (the first, if a crash left two)."""
    return next((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(TRIAL_ATTR) == name), None)


def ask_trial(study: optuna.Study, name: str, space: Mapping[str, Distribution | list[Any]]) -> dict[str, Any]:
    """The parameter values of sweep trial ``name`` from ``study`` (:func:`open_study`): asked from the sampler
    (TPE: from the results told so far) the first time, the same values again when the trial runs again
    (resumed from its checkpoint, taken over by another pod): they are the trial's spec of record."""
    found = _find(study, name)
    if found is None:
        asked = study.ask(_distributions(space))
        asked.set_user_attr(TRIAL_ATTR, name)
        found = _find(study, name)
        assert found is not None
    return _values(space, found.params)


def tell_trial(study: optuna.Study, name: str, value: float | None) -> bool:
    """Tell ``study`` sweep trial ``name``'s result: its objective ``value``, or None when it failed (a failed
    Optuna trial). False when the study holds no trial of that name or it was told already."""
    import optuna

    found = _find(study, name)
    if found is None or found.state.is_finished():
        return False
    if value is None or not math.isfinite(value):
        study.tell(found.number, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(found.number, value)
    return True


def report_trial(study: optuna.Study, name: str, step: int, value: float) -> None:
    """Record sweep trial ``name``'s intermediate ``value`` at timestep ``step`` (an ASHA rung's report), once
    per step (Optuna keeps the first)."""
    import optuna

    found = _find(study, name)
    if found is None or found.state.is_finished() or step in found.intermediate_values or not math.isfinite(value):
        return
    # a live Trial of that id (Optuna's public class; a FrozenTrial's id is only on its private attribute)
    optuna.trial.Trial(study, found._trial_id).report(value, step)
