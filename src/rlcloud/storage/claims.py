"""Trial claims with leases: the pods of a warm sweep take the next free trial from the results store.

A warm sweep's pods (rlcloud.runner.warm with ``--claim``) share its trials by claiming them, not by a fixed
stride, so a slow or dead pod's share does not wait. No controller decides: each claim is an object in the
sweep's location, ``claims/<trial>.json`` (:data:`rlcloud.layout.CLAIMS`), and every change of it is a
conditional write (``if_generation_match``: a Cloud Storage precondition; a directory store's write under its
lock), so of several pods racing for one change exactly one wins and the others see
:class:`~rlcloud.storage.base.PreconditionFailedError`:

* **claim**: a pod creates the claim of the lowest-numbered trial without one (generation 0: create-only).
  Trials are thus started in index order, as the early stopper's decisions expect (rlcloud.runner.early_stop);
* **renew**: while the trial runs, its holder rewrites the claim every ``lease_s / 4`` seconds, each time on
  the generation it wrote last (:class:`Lease`, a thread);
* **take over**: a claim whose generation has not changed for ``lease_s`` seconds, by the monotonic clock of
  the pod that looks (:class:`rlcloud.waiting.StampAges`: never the wall clock, which steps, nor another
  machine's), was left by a dead pod: one other pod takes it over by rewriting it on that generation, and
  resumes the trial from its checkpoint. Only one such rewrite can succeed;
* **fence**: a holder that has not renewed for ``FENCE * lease_s`` seconds since its last successful renewal
  was *sent* (the store unreachable, the pod paused), or whose renewal finds another generation (it was taken
  over), stops the trial at once (``on_lost``): before anyone may take it over, since the taker waits a whole
  lease from when it first saw that renewal, which landed after it was sent. A claimed trial is never run twice
  at once;
* **finish**: the holder rewrites its claim as done, with the trial's outcome. A done claim that succeeded or
  stopped early is final; one that failed is final for its Job only (``job_uid``): a later Job of the sweep takes
  it over at once and runs the trial again, as it would a failure record of an earlier Job;
* **release**: a holder stopped by a signal (after its checkpoint) marks its claim released: any pod takes it
  over at once.

The record (JSON): ``trial``, ``index``, ``holder`` (host, process, a nonce), ``job_uid``, ``state`` (held,
done, released), ``outcome`` (done only), ``renewals``, ``took_over`` (the holder it replaced, if any) and
``written`` (the holder's wall-clock time: for people; no decision reads it). A claim that is not such a record
is held by someone unknown: taken over only once its lease expired.

Reads: one listing of ``claims/`` per look, and a read of a claim only for a generation not seen before (the
records are cached by generation), below the lowest free trial.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlcloud.errors import NotFoundError, RLCloudError
from rlcloud.layout import CLAIMS, DONE_STATES
from rlcloud.storage.base import PreconditionFailedError, Store
from rlcloud.waiting import SYSTEM_CLOCK, Clock, StampAges

__all__ = ["FENCE", "LEASE_S", "MAX_CLAIM_BYTES", "Claim", "Lease", "TrialClaims", "claim_path", "is_final"]

logger = logging.getLogger("rlcloud.claims")

#: Seconds a claim lives without a renewal before another pod may take it over (a dead pod's trial waits this
#: long, at most, for a new holder). Renewals come every quarter of it.
LEASE_S = 60.0

#: The share of a lease after which a holder that could not renew stops its trial (before anyone may take it).
FENCE = 0.75

#: A claim record is small; a larger object under a claim's name is not read (it is held by someone unknown).
MAX_CLAIM_BYTES = 16 * 1024

HELD, DONE, RELEASED = "held", "done", "released"


def claim_path(trial: str) -> str:
    """A trial's claim, relative to the sweep's location: ``claims/<trial>.json``."""
    return f"{CLAIMS}/{trial}.json"


def is_final(record: dict[str, Any], job_uid: str) -> bool:
    """Whether a claim record ends its trial for Job ``job_uid``: done and succeeded or stopped early, or done
    and failed in that Job."""
    if record.get("state") != DONE:
        return False
    outcome = record.get("outcome")
    return outcome in DONE_STATES or (outcome == "failed" and record.get("job_uid") == job_uid)


@dataclass
class Claim:
    """A trial this process holds: its ``index`` and ``name`` in the sweep, the claim's ``generation`` (what
    the next rewrite is conditional on) and its record; ``took_over``: the holder it replaced, if any."""

    index: int
    name: str
    generation: int
    record: dict[str, Any]
    took_over: str | None = None
    #: this process's monotonic time when the write of ``generation`` was sent (what fencing counts from)
    sent: float = 0.0


class TrialClaims:
    """The claims of one sweep's trials (``names``, in index order) in ``store`` (the sweep's location), as one
    process (``holder``) of Job ``job_uid`` sees and changes them.

    ``clock``: what ages others' claims (tests step it); ``lease_s``: see :data:`LEASE_S`.
    ``conflicts`` counts the conditional writes this process lost to another (for the logs and the tests).
    """

    def __init__(
        self,
        store: Store,
        names: Sequence[str],
        *,
        job_uid: str,
        lease_s: float = LEASE_S,
        holder: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.names = list(names)
        self.job_uid = job_uid
        self.lease_s = float(lease_s)
        self.holder = holder or f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.conflicts = 0
        self._ages = StampAges(clock)
        self._records: dict[str, tuple[int, dict[str, Any] | None]] = {}

    def _record(self, name: str, generation: int) -> dict[str, Any] | None:
        """Claim ``name``'s record at ``generation`` (cached by generation: a generation never changes)."""
        cached = self._records.get(name)
        if cached is not None and cached[0] == generation:
            return cached[1]
        try:
            data, got = self.store.read_versioned(claim_path(name), MAX_CLAIM_BYTES)
            record: dict[str, Any] | None = json.loads(data)
            if not isinstance(record, dict):
                record = None
        except NotFoundError:
            return None
        except (RLCloudError, ValueError) as exc:
            logger.warning("claim of trial %s unreadable: %s", name, exc)
            got, record = generation, None
        self._records[name] = (got, record)
        return record

    def look(self) -> dict[str, tuple[int, dict[str, Any] | None]]:
        """The claims there are (one listing): trial name -> (generation, record or None when not read).
        Records are read below the lowest free trial only (what choosing the next trial needs)."""
        listed = {info.name[len(CLAIMS) + 1 : -len(".json")]: info.generation for info in self.store.list(f"{CLAIMS}/")}
        free = next((i for i, name in enumerate(self.names) if name not in listed), len(self.names))
        out: dict[str, tuple[int, dict[str, Any] | None]] = {}
        for index, name in enumerate(self.names):
            if name in listed:
                generation = listed[name]
                out[name] = (generation, self._record(name, generation) if index < free else None)
        return out

    def takeable(self, name: str, generation: int, record: dict[str, Any] | None) -> bool:
        """Whether this process may take claim ``name`` at ``generation`` over now: released, failed in
        another Job, or held and unchanged for a whole lease as this process has watched it."""
        age = self._ages.age(name, generation)  # an int: a float would merge nanosecond generations
        if record is not None and record.get("state") == RELEASED:
            return True
        if record is not None and record.get("state") == DONE:
            return not is_final(record, self.job_uid)
        return age > self.lease_s

    def all_final(self, claims: dict[str, tuple[int, dict[str, Any] | None]]) -> bool:
        """Whether every trial's claim is final for this Job (nothing left for any pod to run)."""
        return all(
            name in claims and claims[name][1] is not None and is_final(claims[name][1] or {}, self.job_uid)
            for name in self.names
        )

    def claim_next(self, allowed: Callable[[int], bool] = lambda _index: True) -> Claim | bool:
        """Claim the lowest-numbered trial (among those ``allowed``) that is free or may be taken over.

        Returns the :class:`Claim`, or True when every trial is final (the pod's work is done), or False when
        nothing can be claimed now (others hold the rest: look again later). A write lost to another pod is
        counted in :attr:`conflicts` and the next trial is tried.
        """
        claims = self.look()
        if self.all_final(claims):
            return True
        for index, name in enumerate(self.names):
            if not allowed(index):
                continue
            if name not in claims:
                got = self._write(index, name, 0, None)
            else:
                generation, record = claims[name]
                if record is None:  # beyond the lowest free trial: not read by look()
                    record = self._record(name, generation)
                if not self.takeable(name, generation, record):
                    continue
                got = self._write(index, name, generation, record)
            if got is not None:
                return got
        return False

    def _write(self, index: int, name: str, generation: int, old: dict[str, Any] | None) -> Claim | None:
        """Create (``generation`` 0) or take over claim ``name``; None when another pod changed it first."""
        previous = (old or {}).get("holder") if generation else None
        record = {
            "trial": name,
            "index": index,
            "holder": self.holder,
            "job_uid": self.job_uid,
            "state": HELD,
            "renewals": 0,
            "took_over": previous,
            "written": self.clock.time(),
        }
        sent = self.clock.monotonic()
        try:
            info = self.store.write_text(claim_path(name), json.dumps(record), if_generation_match=generation)
        except PreconditionFailedError:
            self.conflicts += 1
            return None
        self._records[name] = (info.generation, record)
        if generation:
            why = {RELEASED: "released", DONE: "failed in another Job"}.get(
                str((old or {}).get("state")), "lease expired"
            )
            logger.warning("trial %s: took over its claim from %s (%s)", name, previous or "an unknown holder", why)
        return Claim(index, name, info.generation, record, took_over=previous if generation else None, sent=sent)

    def rewrite(self, claim: Claim, **changes: Any) -> bool:
        """Rewrite ``claim`` on its generation with ``changes`` (a renewal, done, released); False when another
        pod has taken it over (the write is refused: the claim is not this process's any more)."""
        record = {**claim.record, **changes, "written": self.clock.time()}
        sent = self.clock.monotonic()
        try:
            info = self.store.write_text(
                claim_path(claim.name), json.dumps(record), if_generation_match=claim.generation
            )
        except PreconditionFailedError:
            self.conflicts += 1
            return False
        claim.generation, claim.record, claim.sent = info.generation, record, sent
        self._records[claim.name] = (info.generation, record)
        return True


class Lease:
    """Keeps a :class:`Claim` while its trial runs: a thread renews it every quarter lease, another calls
    ``on_lost`` (once) when the claim was taken over or has not been renewed for ``FENCE`` of a lease, counted
    from when its last successful write was sent (a renewal that hangs in the store's retries counts too): the
    trial must stop at once, someone else may resume it soon. Use as a context manager around the trial;
    :meth:`finish` or :meth:`release` after it."""

    def __init__(self, claims: TrialClaims, claim: Claim, on_lost: Callable[[str], None]) -> None:
        self.claims = claims
        self.claim = claim
        self.on_lost = on_lost
        self.renewals = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._lost = threading.Lock()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Lease:
        for target, what in ((self._renew, "lease"), (self._fence, "fence")):
            thread = threading.Thread(target=target, name=f"rlcloud-{what}-{self.claim.name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _lose(self, why: str) -> None:
        if self._lost.acquire(blocking=False):  # once, whichever thread sees it first
            self._stop.set()
            self.on_lost(why)

    def _renew(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self.claims.lease_s / 4)  # woken at once by the trial's end
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    kept = self.claims.rewrite(self.claim, renewals=self.renewals + 1)
                except RLCloudError as exc:  # the fence counts how long this lasts
                    logger.warning("trial %s: could not renew its claim: %s", self.claim.name, exc)
                    continue
            if not kept:
                self._lose(f"its claim was taken over by {self._holder()}")
                return
            self.renewals += 1

    def _fence(self) -> None:
        clock, limit = self.claims.clock, FENCE * self.claims.lease_s
        while not self._stop.is_set():
            self._stop.wait(self.claims.lease_s / 16)
            if not self._stop.is_set() and clock.monotonic() - self.claim.sent > limit:
                self._lose(f"its claim could not be renewed for {limit:.0f} s")
                return

    def _holder(self) -> str:
        with contextlib.suppress(RLCloudError, ValueError, AttributeError):
            data = self.claims.store.read_bytes(claim_path(self.claim.name))
            return str(json.loads(data).get("holder") or "?")
        return "another pod"

    def _end(self, **changes: Any) -> bool:
        self._stop.set()
        with self._lock:  # no renewal in flight: the rewrite below is on the latest generation
            try:
                return self.claims.rewrite(self.claim, **changes)
            except RLCloudError as exc:
                logger.error("trial %s: could not write its claim (%s): it expires instead", self.claim.name, exc)
                return False

    def finish(self, outcome: str) -> bool:
        """Mark the claim done with the trial's ``outcome`` (a progress state: succeeded, stopped-early, failed);
        False when it was not this process's any more."""
        return self._end(state=DONE, outcome=outcome)

    def release(self) -> bool:
        """Give the claim up (the trial checkpointed and stopped by a signal): any pod may take it at once."""
        return self._end(state=RELEASED)
