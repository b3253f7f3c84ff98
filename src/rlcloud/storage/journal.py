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
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from rlcloud.layout import STUDY
from rlcloud.storage.base import PreconditionFailedError, Store

if TYPE_CHECKING:
    import optuna

__all__ = ["MAX_LOG_BYTES", "StoreJournal", "journal_backend", "log_path", "open_study", "require_optuna"]

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
