"""Waiting for GKE operations: polling with backoff, an overall deadline, and progress from the operation.

GKE mutations return an ``Operation`` at once; the work (minutes) shows up in later GetOperation
answers: ``status`` PENDING -> RUNNING -> DONE, ``detail``, and ``progress`` (metrics such as
NODES_DONE/NODES_TOTAL, stages). Progress callbacks receive those fields, not a guessed clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlcloud.errors import WaitTimeoutError
from rlcloud.gke.builders import operation_path
from rlcloud.gke.errors import api_errors, is_transient
from rlcloud.waiting import Backoff

__all__ = [
    "OperationUpdate",
    "ProgressCallback",
    "logging_progress",
    "progress_fraction",
    "tqdm_progress",
    "wait_operation",
]

log = logging.getLogger("rlcloud.gke")


@dataclass(frozen=True)
class OperationUpdate:
    """What one poll of an operation said."""

    operation: str  # short name, e.g. "operation-1718024305921-fd4f65ea"
    kind: str  # operation type, e.g. "CREATE_CLUSTER"
    status: str  # PENDING, RUNNING, DONE, ABORTING
    target: str  # what it works on (cluster or node pool path)
    detail: str  # GKE's human-readable detail, often empty
    fraction: float | None  # 0..1 when the operation reports countable progress, else None
    elapsed: float  # seconds since rlcloud started waiting
    error: str = ""  # the error message of a failed, finished operation

    @property
    def done(self) -> bool:
        """True once the operation finished (successfully or not)."""
        return self.status == "DONE"

    def __str__(self) -> str:
        percent = f" {self.fraction:.0%}" if self.fraction is not None else ""
        detail = f" ({self.detail})" if self.detail else ""
        target = self.target.rsplit("/clusters/", 1)[-1]
        return f"{self.kind} {target}: {self.status}{percent}{detail} [{self.elapsed:.0f}s]"


ProgressCallback = Callable[[OperationUpdate], None]


def progress_fraction(operation: Any) -> float | None:
    """0..1 from the operation's own progress: X_DONE/X_TOTAL metrics, else finished stages; None if neither."""
    progress = operation.progress
    metrics = {m.name: (m.int_value or m.double_value) for m in progress.metrics}
    for name, total in metrics.items():
        if name.endswith("_TOTAL") and total:
            done = metrics.get(name[: -len("_TOTAL")] + "_DONE")
            if done is not None:
                return max(0.0, min(1.0, float(done) / float(total)))
    stages = list(progress.stages)
    if stages:
        finished = sum(1 for s in stages if int(s.status) == 3)  # DONE
        return finished / len(stages)
    return None


def _update(operation: Any, started: float, clock: Callable[[], float]) -> OperationUpdate:
    type_enum = type(operation).Type
    status_enum = type(operation).Status
    return OperationUpdate(
        operation=operation.name,
        kind=type_enum(operation.operation_type).name,
        status=status_enum(operation.status).name,
        target=operation.target_link,
        detail=operation.detail,
        fraction=progress_fraction(operation),
        elapsed=clock() - started,
        error=(
            (operation.error.message or operation.status_message or "failed")
            if int(operation.status) == int(status_enum.DONE) and operation.error and operation.error.code
            else ""
        ),
    )


def logging_progress() -> ProgressCallback:
    """A progress callback that logs each change of status/detail at INFO (the default without a UI)."""
    last: dict[str, tuple[str, str, float | None]] = {}

    def report(update: OperationUpdate) -> None:
        key = (update.status, update.detail, update.fraction)
        if last.get(update.operation) != key:
            last[update.operation] = key
            log.info("%s", update)

    return report


def tqdm_progress(**tqdm_options: Any) -> ProgressCallback:
    """A progress callback drawing one ``tqdm.auto`` bar per operation (a widget in notebooks).

    The bar shows the operation's own progress (0-100 %) when GKE reports countable progress, and its
    status and detail as the postfix otherwise; it closes when the operation is DONE.
    """
    from tqdm.auto import tqdm

    bars: dict[str, Any] = {}

    def report(update: OperationUpdate) -> None:
        bar = bars.get(update.operation)
        if bar is None:
            target = update.target.rsplit("/clusters/", 1)[-1]
            bar = bars[update.operation] = tqdm(
                total=100, desc=f"{update.kind} {target}", unit="%", leave=True, **tqdm_options
            )
        if update.fraction is not None:
            bar.n = round(update.fraction * 100)
        bar.set_postfix_str(update.status + (f": {update.detail}" if update.detail else ""), refresh=False)
        bar.refresh()
        if update.done:
            if not update.error:
                bar.n = 100
                bar.refresh()
            bar.close()
            del bars[update.operation]

    return report


def wait_operation(
    client: Any,
    project: str,
    operation: Any,
    *,
    deadline: float,
    poll_interval: float = 2.0,
    max_poll_interval: float = 20.0,
    progress: ProgressCallback | None = None,
    action: str = "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Poll ``operation`` until DONE and return the finished Operation (its error is for the caller to read).

    The interval grows x1.5 from ``poll_interval`` to ``max_poll_interval``; ``deadline`` is a
    ``clock()`` value after which rlcloud WaitTimeoutError is raised (the operation itself keeps running
    in GKE, so calling create/delete again attaches to it).

    A poll that fails transiently (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL or another 5xx, a reset
    connection: :func:`~rlcloud.gke.errors.is_transient`) is logged and polled again until ``deadline``:
    the operation runs in GKE whatever happens to one GetOperation, and a caller that gave up here would
    treat a cluster GKE is still building as failed (and delete it). Polling is this loop's alone (the
    client library's own 20 s retry is off), so one backoff and one deadline govern it.
    """
    report = progress or logging_progress()
    started = clock()
    pauses = Backoff(poll_interval, max_poll_interval, factor=1.5).pauses()
    location = operation.location or operation.zone
    name = operation_path(project, location, operation.name)
    done = type(operation).Status.DONE
    report(_update(operation, started, clock))
    failures = 0
    last_failure: BaseException | None = None
    while int(operation.status) != int(done):
        remaining = deadline - clock()
        if remaining <= 0:
            unreachable = (
                f" ({failures} poll(s) failed transiently, the last with {type(last_failure).__name__}: {last_failure})"
                if last_failure is not None
                else ""
            )
            raise WaitTimeoutError(
                f"{action + ': ' if action else ''}operation {operation.name} "
                f"({type(operation).Type(operation.operation_type).name}) is still "
                f"{type(operation).Status(operation.status).name} after waiting {clock() - started:.0f}s"
                f"{unreachable}. It keeps running in GKE: run the same command again to attach to it, or delete "
                "the cluster."
            )
        sleep(min(next(pauses), remaining))
        try:
            with api_errors(project=project, action=action):
                polled = client.get_operation(name=name, retry=None)
        except Exception as exc:
            if not is_transient(exc):
                raise
            failures += 1
            last_failure = cause = exc.__cause__ or exc
            log.warning(
                "%spolling %s failed transiently (%s); polling again",
                action + ": " if action else "",
                operation.name,
                type(cause).__name__,
            )
            continue
        last_failure = None
        operation = polled
        report(_update(operation, started, clock))
    return operation
