"""Status of a sweep whose trials start warm on Kubernetes (pods that each run several trials in turn).

A warm sweep's Job (:func:`rlcloud.k8s.sweep_builders.build_sweep_workloads` with ``warm=True``) has fewer
completion indexes than the sweep has trials: its ``P`` pods claim the next free trial from the results store
one after another (``--claim``, rlcloud.storage.claims), or, in a Job made before claims, pod ``i`` runs trials
``i``, ``i+P``, ... (rlcloud.runner.warm). Its indexes say nothing of one trial, so each trial's state comes from its
``progress.json`` in the results store (the pods write a failure record there for a trial that failed),
and the Job says only whether trials still run. Pure functions: tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlcloud.k8s.status import get, is_suspended, job_finished
from rlcloud.layout import DONE_STATES, STOPPED_EARLY, ProgressRecord

if TYPE_CHECKING:
    from rlcloud.backend import ExperimentState, SweepStatus, TrialState, TrialStatus

__all__ = [
    "claiming",
    "halted_message",
    "read_shares",
    "warm_final",
    "warm_pods",
    "warm_sweep_status",
    "warm_trial_state",
]

JSON = dict[str, Any]


def warm_pods(job: JSON | None, num_trials: int) -> int | None:
    """The number of pods sharing the trials when ``job`` is a warm sweep's Job (fewer completions than
    trials, each pod started with ``--stride``), else None."""
    if job is None:
        return None
    completions = get(job, "spec", "completions")
    containers = get(job, "spec", "template", "spec", "containers") or []
    args = (containers[0].get("args") or []) if containers else []
    if "--stride" not in args or not isinstance(completions, int) or completions >= num_trials:
        return None
    return completions


def claiming(job: JSON | None) -> bool:
    """Whether a warm sweep's ``job`` has its pods claim trials from the store (``--claim``), not by stride."""
    containers = get(job or {}, "spec", "template", "spec", "containers") or []
    return bool(containers) and "--claim" in (containers[0].get("args") or [])


def warm_trial_state(job: JSON, progress: dict[str, Any]) -> tuple[TrialState, str | None]:
    """One trial's state and reason in a warm sweep, from its progress.json and its sweep's Job.

    Finished on record (succeeded, stopped early, a failure record of this Job) is final; a trial whose
    progress says it starts or trains runs while the Job does (stopped once the Job has ended); one without
    progress waits for its pod ("queued"; "pending" while the Job is suspended).
    """
    record = ProgressRecord.of(progress)
    recorded = record.state
    uid = get(job, "metadata", "uid")
    if recorded == "succeeded":
        return "succeeded", None
    if recorded == STOPPED_EARLY:
        return "stopped early", record.stop_reason
    if recorded == "failed" and record.job_uid == uid:
        return "failed", record.stop_reason
    finished = job_finished(job)
    # "failed" without this Job's uid: the runner's own word for a crash its pod tries again (or an earlier
    # Job's failure record, tried again when the pod gets there)
    if recorded in ("starting", "running") or (recorded == "failed" and record.job_uid is None):
        if finished:
            return "stopped", f"the sweep's Job has {finished}"
        return "running", None
    if recorded == "stopped":
        # checkpointed by a signal: its pod's replacement resumes it unless the Job has ended
        return ("stopped", record.stop_reason) if finished else ("queued", "resumes from its checkpoint")
    if is_suspended(job):
        return "pending", "the sweep's Job is suspended"
    if finished:
        return "stopped", f"the sweep's Job has {finished}"
    return "queued", None


def halted_message(job: JSON, trials: list[TrialStatus], *, max_failures: int, smoke_timesteps: int) -> str | None:
    """The sweep's message when a warm pod stopped launching trials (the Job failed by its podFailurePolicy
    on the halted exit code): the smoke trial failed, or ``max_failures`` trials did; else None."""
    conditions = get(job, "status", "conditions") or []
    failed_condition = next((c for c in conditions if c.get("type") == "Failed" and c.get("status") != "False"), None)
    if failed_condition is None or failed_condition.get("reason") != "PodFailurePolicy":
        return None
    failed = sum(1 for t in trials if t.state == "failed")
    left = sum(1 for t in trials if t.state in ("queued", "stopped"))
    if max_failures and failed >= max_failures:
        return (
            f"stopped after {failed} failed trials (max_failures {max_failures}): fix what they failed of "
            f"(`rlcloud sweep status` names each reason); {left} trials did not run"
        )
    first = trials[0] if trials else None
    if (
        smoke_timesteps
        and first is not None
        and first.state == "failed"
        and (first.progress.timestep or 0) < smoke_timesteps
    ):
        return (
            f"stopped launching trials: the first trial ({first.name}) failed before training {smoke_timesteps} "
            f"timesteps (smoke_timesteps): {first.reason or 'failed'}; {left} trials did not run"
        )
    return None


def warm_sweep_status(
    name: str,
    job: JSON,
    table: list[tuple[str, dict[str, Any], int]],
    progress: dict[str, ProgressRecord],
    *,
    max_failures: int,
    smoke_timesteps: int = 0,
    backend: str,
) -> SweepStatus:
    """A warm sweep's status from its Job and its trials' progress.json (``progress``: trial name -> it)."""
    from rlcloud.backend import SweepStatus as _SweepStatus
    from rlcloud.backend import TrialStatus as _TrialStatus

    trials = []
    for index, (trial_name, params, seed) in enumerate(table):
        got = progress.get(trial_name) or ProgressRecord()
        state, reason = warm_trial_state(job, got)
        trials.append(_TrialStatus(index, trial_name, params, seed, state, got, reason))
    failed = sum(1 for t in trials if t.state == "failed")
    finished = job_finished(job)
    message: str | None = None
    overall: ExperimentState
    if finished == "succeeded":
        overall = "failed" if failed else "succeeded"
        message = f"{failed} of {len(trials)} trials failed" if failed else None
    elif finished == "failed":
        overall = "failed"
        message = halted_message(job, trials, max_failures=max_failures, smoke_timesteps=smoke_timesteps)
        if message is None:
            conditions = get(job, "status", "conditions") or []
            why = next((c.get("message") for c in conditions if c.get("type") == "Failed"), None)
            message = f"the sweep's Job failed: {why}" if why else f"{failed} of {len(trials)} trials failed"
    elif is_suspended(job):
        overall, message = "pending", "the sweep's Job is suspended"
    elif any(t.state == "running" for t in trials):
        overall, message = "running", (f"{failed} trial(s) failed" if failed else None)
    else:
        overall = "pending"
    return _SweepStatus(name=name, state=overall, trials=trials, message=message, backend=backend)


def warm_final(progress: dict[str, Any], job_uid: str | None) -> bool:
    """Whether a trial of a warm sweep is done for the Job ``job_uid``: it succeeded, stopped early, or has
    that Job's failure record (a runner's own "failed" is a crash its pod tries again)."""
    record = ProgressRecord.of(progress)
    return record.state in DONE_STATES or (record.state == "failed" and record.job_uid == job_uid)


def read_shares(
    names: list[str],
    pods: int,
    read: Callable[[list[str]], dict[str, ProgressRecord]],
    job_uid: str | None = None,
    *,
    claiming: bool = False,
) -> dict[str, ProgressRecord]:
    """The progress.json of the trials a warm sweep's pods have reached, in a number of reads that grows with
    the trials finished and the pods, not with the trials still queued.

    Pod ``i`` of ``pods`` runs ``names[i], names[i + pods], ...`` in order, so past its first trial that has
    not finished (the one it runs) nothing has started yet. ``read``: reads a batch of trials' progress (in
    parallel), called once per round with at most one trial per pod. A failure record of another Job (not
    ``job_uid``) is not final: the pod runs that trial again when it gets there (:func:`warm_final`).

    ``claiming`` (a Job whose pods claim trials, :func:`claiming`): the pods take the lowest-numbered free trial,
    so the trials started are the first ones; they are read in order, ``pods`` at a time, up to ``pods`` trials
    in a row without any record (none of the trials after those has started: at most ``pods`` claimed trials
    are still without a record, being prepared; a trial left by a dead pod before its first record reads as
    queued until it is taken over).
    """
    if claiming:
        return _read_claimed(names, pods, read)
    out: dict[str, ProgressRecord] = {}
    shares = [iter(names[i::pods]) for i in range(pods)]
    current = [next(share, None) for share in shares]
    while any(name is not None for name in current):
        batch = [name for name in current if name is not None]
        got = read(batch)
        for pod, name in enumerate(current):
            if name is None:
                continue
            progress = got.get(name) or ProgressRecord()
            out[name] = progress
            current[pod] = next(shares[pod], None) if warm_final(progress, job_uid) else None
    return out


def _read_claimed(
    names: list[str], pods: int, read: Callable[[list[str]], dict[str, ProgressRecord]]
) -> dict[str, ProgressRecord]:
    """:func:`read_shares` for pods that claim trials: in order, until ``pods`` trials in a row have no record."""
    out: dict[str, ProgressRecord] = {}
    empty, start = 0, 0
    while start < len(names) and empty < pods:
        batch = names[start : start + max(1, pods)]
        got = read(batch)
        for name in batch:
            progress = got.get(name) or ProgressRecord()
            out[name] = progress
            empty = 0 if progress else empty + 1
        start += len(batch)
    return out
