"""Reading an experiment's state from its Jobs and Pods: pure functions over the API's JSON.

Nothing here calls the API. :class:`KubernetesBackend <rlcloud.k8s.backend.KubernetesBackend>` reads
the objects (:class:`Observed`) and hands them here; :func:`role_statuses` and :func:`overall` turn them
into the ``RoleStatus``/``ExperimentState`` of ``rlcloud.backend``, :func:`why_pending` says in one line
why a pod is not running yet.

Observed state is read raw, not through the client's pydantic models: deserialising 1000 pods into
V1Pod objects costs ~2 s of CPU on every status() poll, json.loads a tenth of that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from rlcloud.backend import ExperimentState, RoleState, RoleStatus
from rlcloud.k8s.builders import JOB_COMPLETION_INDEX_ANNOTATION
from rlcloud.layout import ProgressRecord
from rlcloud.roles import LEARNER_ROLES, Role
from rlcloud.runner.watchdog import EXIT_STALLED, EXIT_STALLED_AGAIN

__all__ = [
    "JSON",
    "Observed",
    "TrialObserved",
    "anything_pending",
    "budget_stop",
    "classify_unschedulable",
    "condition",
    "exit_code",
    "get",
    "is_live",
    "is_started",
    "is_suspended",
    "job_finished",
    "labels",
    "learner",
    "measured_cost",
    "name",
    "one_line",
    "overall",
    "parse_indexes",
    "phase",
    "pod_index",
    "pod_sort_key",
    "restarting_reason",
    "role_rank",
    "role_statuses",
    "trial_states",
    "why_pending",
]

#: The longest reason shown in a status: one line of a terminal.
MAX_REASON = 240

JSON = dict[str, Any]


@dataclass
class Observed:
    """One read of an experiment's Jobs and Pods, as plain JSON (the API's own field names)."""

    jobs: dict[str, JSON]  # role -> Job
    pods: list[JSON]


def get(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None as soon as a level is missing."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def name(obj: JSON) -> str:
    """The object's ``metadata.name`` ("" when missing)."""
    return str(get(obj, "metadata", "name") or "")


def labels(obj: JSON) -> dict[str, str]:
    """The object's labels ({} when none)."""
    return get(obj, "metadata", "labels") or {}


def phase(pod: JSON) -> str:
    """The pod's phase; a pod without status yet counts as Pending."""
    return str(get(pod, "status", "phase") or "Pending")


def condition(job: JSON, kind: str) -> JSON | None:
    """The Job's condition of type ``kind`` when it is ``True``, else None."""
    for cond in get(job, "status", "conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def job_finished(job: JSON) -> str | None:
    """``"succeeded"``/``"failed"`` once the Job controller has decided, else None."""
    if condition(job, "Complete") or condition(job, "SuccessCriteriaMet"):
        return "succeeded"
    if condition(job, "Failed") or condition(job, "FailureTarget"):
        return "failed"
    return None


def is_suspended(job: JSON) -> bool:
    """Whether the Job is suspended (``spec.suspend``)."""
    return bool(get(job, "spec", "suspend"))


def pod_index(pod: JSON) -> int:
    """The pod's completion index within its Job (0 for a non-indexed Job's pod)."""
    value = (get(pod, "metadata", "annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION) or labels(pod).get(
        JOB_COMPLETION_INDEX_ANNOTATION
    )
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def pod_sort_key(pod: JSON) -> tuple[bool, bool, str, str]:
    """Sorts the pods of one index so that the one that speaks for it comes last."""
    # the live pod of an index wins over its failed predecessors, a succeeded one (the last there will
    # be) too; then the newest (timestamps have one-second resolution, so this alone cannot decide)
    pod_phase = phase(pod)
    created = str(get(pod, "metadata", "creationTimestamp") or "")
    return pod_phase not in ("Succeeded", "Failed"), pod_phase == "Succeeded", created, name(pod)


def is_live(pod: JSON) -> bool:
    """Still running or about to: not finished (a pod being deleted counts until it is gone)."""
    return phase(pod) in ("Pending", "Running")


def is_started(pod: JSON) -> bool:
    """Whether the pod's container has started, so that it has a log to read."""
    if phase(pod) != "Pending":
        return True
    return any(
        get(cs, "state", "running") or get(cs, "state", "terminated")
        for cs in get(pod, "status", "containerStatuses") or []
    )


def exit_code(pod: JSON) -> int | None:
    """The exit code of the pod's container (current or last run), None while it has none."""
    for cs in get(pod, "status", "containerStatuses") or []:
        for state in ("state", "lastState"):
            terminated = get(cs, state, "terminated")
            if terminated and terminated.get("exitCode") is not None:
                return int(terminated["exitCode"])
    return None


def role_rank(role: str) -> int:
    """Sort key of a role name: the learner first, then the env servers, then anything else."""
    try:
        known = Role(role)
    except ValueError:
        return 2
    return 0 if known.is_learner else 1


def learner(jobs: dict[str, JSON]) -> tuple[str, JSON] | None:
    """The learner's role and Job among an experiment's Jobs (by role), None when it has none."""
    for role in LEARNER_ROLES:
        if role in jobs:
            return str(role), jobs[role]
    return None


def one_line(text: str) -> str:
    """``text`` on one line, shortened to :data:`MAX_REASON` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 3] + "..."


def classify_unschedulable(message: str) -> str:
    """The scheduler's message for an unschedulable pod, prefixed with what it means in plain words."""
    if "Insufficient nvidia.com/gpu" in message:
        return f"waiting for a GPU: no node has a free nvidia.com/gpu ({message})"
    # before the taint: on a GPU cluster every CPU pod is kept off the tainted GPU nodes on purpose, so
    # "0/2 nodes: 1 Insufficient cpu, 1 untolerated taint" means the CPU pool is full
    if "Insufficient cpu" in message or "Insufficient memory" in message:
        return f"not enough CPU or memory on any node ({message})"
    if "untolerated taint" in message or "had taint" in message:
        return f"no node tolerates the pod: untolerated taint ({message})"
    if "node affinity/selector" in message or "didn't match Pod's node affinity" in message:
        return f"no node matches the pod's node selector, e.g. the GPU type ({message})"
    return f"unschedulable: {message}"


def why_pending(pod: JSON | None, events: list[JSON]) -> str:
    """One line saying why a pod (or, with ``pod=None``, a Job's missing pod) is still Pending.

    ``pod`` and ``events`` are API JSON objects. Reads the container's waiting state (image pull
    errors, config errors), the PodScheduled condition (insufficient GPU/CPU, untolerated taints,
    node selectors) and Events (the cluster autoscaler scaling up, quota refusing pod creation).
    """
    for event in events:  # Job-level: the controller could not even create the pod
        if event.get("reason") == "FailedCreate" and "exceeded quota" in (event.get("message") or ""):
            return one_line(f"quota exceeded: {event.get('message')}")
    if pod is None:
        for event in events:
            if event.get("reason") == "FailedCreate":
                return one_line(f"cannot create the pod: {event.get('message')}")
        return "waiting for the Job controller to create the pod"
    containers = get(pod, "spec", "containers") or [{}]
    image = containers[0].get("image", "?")
    for cs in get(pod, "status", "containerStatuses") or []:
        waiting = get(cs, "state", "waiting") or {}
        reason = waiting.get("reason")
        if reason in ("ImagePullBackOff", "ErrImagePull", "InvalidImageName"):
            return one_line(f"cannot pull image {image} ({reason}): {waiting.get('message') or ''}")
        if reason in ("CreateContainerConfigError", "CreateContainerError"):
            return one_line(f"cannot start the container ({reason}): {waiting.get('message') or ''}")
    scale_up = any(e.get("reason") == "TriggeredScaleUp" for e in events)
    no_scale_up = next((e for e in events if e.get("reason") == "NotTriggerScaleUp"), None)
    message = None
    for cond in get(pod, "status", "conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            message = cond.get("message") or cond.get("reason") or "not scheduled yet"
    if message is None:
        failed = [e for e in events if e.get("reason") == "FailedScheduling"]
        if failed:
            message = failed[-1].get("message") or "FailedScheduling"
    if message is not None:
        line = classify_unschedulable(message)
        if scale_up:
            line += "; the cluster autoscaler is adding a node"
        elif no_scale_up is not None:
            line += f"; the autoscaler cannot help: {no_scale_up.get('message')}"
        return one_line(line)
    for event in events:
        if event.get("reason") in ("FailedMount", "FailedAttachVolume"):
            return one_line(f"cannot mount a volume: {event.get('message')}")
    if get(pod, "spec", "nodeName"):
        return "starting: pulling the image or mounting volumes"
    return "waiting to be scheduled"


def anything_pending(observed: Observed) -> bool:
    """Whether a pod is Pending, or a Job wants pods but has none: then the Events say why."""
    if any(phase(p) == "Pending" for p in observed.pods):
        return True
    # a Job that wants pods but has none (quota, admission): its events say why
    return any(
        not job_finished(job) and not is_suspended(job) and not get(job, "status", "active")
        for job in observed.jobs.values()
    )


def parse_indexes(text: str | None) -> set[int]:
    """``"0-2,5"`` -> {0, 1, 2, 5} (Job status.completedIndexes)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return out


#: What a learner that exited with EXIT_STALLED_AGAIN did (rlcloud.runner.watchdog).
STALLED_AGAIN = (
    f"stalled again after a restart for a stall (no timestep for its stall_timeout; exit code {EXIT_STALLED_AGAIN})"
)


def restarting_reason(code: int | None) -> str:
    """Why a pod whose predecessor failed with exit ``code`` is pending: the Job controller replaces it."""
    if code == EXIT_STALLED:
        return (
            "restarting from the latest checkpoint: the previous pod stalled "
            f"(no timestep for its stall_timeout; exit code {EXIT_STALLED})"
        )
    return f"restarting: the previous pod exited with code {code}"


def role_statuses(role: str, job: JSON, pods: list[JSON], events: dict[str, list[JSON]]) -> list[RoleStatus]:
    """The status of each instance (completion index) of ``role``, run by ``job``.

    ``pods``: the experiment's pods (those of other Jobs are ignored); ``events``: Events by the name of
    the object they are about (read only while something is pending).
    """
    job_name = name(job)
    job_pods = [
        p for p in pods if job_name in (labels(p).get("batch.kubernetes.io/job-name"), labels(p).get("job-name"))
    ]
    count = int(get(job, "spec", "completions") or 1)
    by_index: dict[int, list[JSON]] = {}
    for pod in job_pods:
        by_index.setdefault(pod_index(pod), []).append(pod)
    finished = job_finished(job)
    failed_cond = condition(job, "Failed") or condition(job, "FailureTarget")
    completed = parse_indexes(get(job, "status", "completedIndexes"))
    failed_indexes = parse_indexes(get(job, "status", "failedIndexes"))
    job_events = events.get(job_name, [])
    out = []
    for index in range(count):
        candidates = sorted(by_index.get(index, []), key=pod_sort_key)
        current = candidates[-1] if candidates else None
        current_phase = phase(current) if current is not None else None
        restarts = sum(1 for p in candidates if p is not current and phase(p) == "Failed")
        for p in candidates:
            restarts += sum(int(cs.get("restartCount") or 0) for cs in get(p, "status", "containerStatuses") or [])
        code = exit_code(current) if current is not None else None
        reason: str | None = None
        state: RoleState
        if finished == "succeeded" or index in completed or current_phase == "Succeeded":
            state = "succeeded"
        elif finished == "failed":
            state = "failed"
            reason = (
                one_line(failed_cond.get("message") or failed_cond.get("reason") or "the Job failed")
                if failed_cond
                else None
            )
            if reason is not None and code == EXIT_STALLED_AGAIN:
                reason = one_line(f"{STALLED_AGAIN}: {reason}")
        elif index in failed_indexes:  # out of backoffLimitPerIndex: not replaced again
            state = "failed"
            reason = f"failed {restarts + 1} times (last exit code {code}); not retried again"
        elif is_suspended(job):
            state = "suspended"
        elif current is None:
            state = "pending"
            reason = why_pending(None, job_events)
        elif current_phase == "Pending":
            state = "pending"
            reason = why_pending(current, events.get(name(current), []) + job_events)
        elif current_phase == "Running":
            state = "running"
        elif current_phase == "Failed":
            state = "pending"  # the Job controller replaces it (within the backoff budget)
            reason = restarting_reason(code)
        else:
            state = "unknown"
        out.append(RoleStatus(role=role, index=index, state=state, restarts=restarts, exit_code=code, reason=reason))
    return out


def overall(
    jobs: dict[str, JSON], roles: list[RoleStatus], progress: ProgressRecord
) -> tuple[ExperimentState, str | None]:
    """The experiment's state and one-line message, decided by its learner's Job.

    ``roles``: what :func:`role_statuses` said of every Job; ``progress``: the learner's progress.json
    (asked when the Jobs are gone).
    """
    found = learner(jobs)
    if found is None:
        # the Jobs are gone (deleted after ttlSecondsAfterFinished, or by hand): ask the store
        recorded = progress.state
        if recorded in ("succeeded", "failed", "stopped"):
            return cast(ExperimentState, recorded), "the Jobs have been cleaned up; results are in the store"
        return "unknown", "no Jobs left for this experiment (finished long ago, or deleted)"
    role, job = found
    finished = job_finished(job)
    learner_status = next((r for r in roles if r.role == role), None)
    if finished == "succeeded":
        return "succeeded", None
    if finished == "failed":
        return "failed", learner_status.reason if learner_status else None
    if is_suspended(job):
        stopped = budget_stop(job)
        return ("stopped", stopped) if stopped else ("paused", None)
    if learner_status is not None and learner_status.state == "running":
        pending = next((r for r in roles if r.state == "pending" and r.reason), None)
        return "running", (f"{pending.label}: {pending.reason}" if pending else None)
    pending = next((r for r in roles if r.state == "pending" and r.reason), None)
    return "pending", (f"{pending.label}: {pending.reason}" if pending else None)


def budget_stop(job: JSON) -> str | None:
    """Why the in-cluster reaper stopped this suspended Job for its money budget (rlcloud.gke.budgets), else None.

    Such a run is "stopped" (not "paused"): it stays so until it is started again (with a larger budget)."""
    from rlcloud.budget import ANNOTATION_BUDGET_STATE, ANNOTATION_STOP_REASON

    found = get(job, "metadata", "annotations") or {}
    if found.get(ANNOTATION_BUDGET_STATE) != "stopped":
        return None
    return f"stopped by the in-cluster reaper: {found.get(ANNOTATION_STOP_REASON) or 'budget reached'}"


def measured_cost(job: JSON) -> float | None:
    """The run's cost so far as the in-cluster reaper last measured it (its Job's ``rlcloud.io/cost-usd``), else
    None (no reaper on the cluster, or it has not looked yet)."""
    from rlcloud.budget import ANNOTATION_COST, read_annotation_usd

    return read_annotation_usd((get(job, "metadata", "annotations") or {}).get(ANNOTATION_COST))


@dataclass(frozen=True)
class TrialObserved:
    """What a sweep's Job and pods say of one trial (completion index), before its progress is read."""

    state: str  # queued | pending | running | succeeded | failed | stopped
    reason: str | None = None
    exit_code: int | None = None
    restarts: int = 0


def trial_states(job: JSON | None, pods: list[JSON], num_trials: int) -> list[TrialObserved]:
    """Each trial's state from its sweep's Indexed Job (``status.completedIndexes``/``failedIndexes``,
    conditions, ``suspend``) and the Job's pods, in index order. Pure; O(trials + pods).

    ``job`` None (deleted after ``ttlSecondsAfterFinished``, or stopped) leaves every trial "stopped": the
    caller asks the results store what became of it.
    """
    if job is None:
        return [TrialObserved("stopped") for _ in range(num_trials)]
    by_index: dict[int, list[JSON]] = {}
    for pod in pods:
        by_index.setdefault(pod_index(pod), []).append(pod)
    completed = parse_indexes(get(job, "status", "completedIndexes"))
    failed = parse_indexes(get(job, "status", "failedIndexes"))
    finished = job_finished(job)
    failed_cond = condition(job, "Failed") or condition(job, "FailureTarget")
    job_reason = (
        one_line(failed_cond.get("message") or failed_cond.get("reason") or "the Job failed") if failed_cond else None
    )
    suspended = is_suspended(job)
    out: list[TrialObserved] = []
    for index in range(num_trials):
        candidates = sorted(by_index.get(index, []), key=pod_sort_key)
        current = candidates[-1] if candidates else None
        current_phase = phase(current) if current is not None else None
        restarts = sum(1 for p in candidates if p is not current and phase(p) == "Failed")
        code = exit_code(current) if current is not None else None
        if index in completed or current_phase == "Succeeded":
            out.append(TrialObserved("succeeded", exit_code=code, restarts=restarts))
        elif index in failed:  # out of backoffLimitPerIndex, or FailIndex on a spec error
            why = (
                "a spec or environment error"
                if code in (2, 3)
                else STALLED_AGAIN
                if code == EXIT_STALLED_AGAIN
                else f"exit code {code}"
            )
            out.append(TrialObserved("failed", f"failed ({why}) after {restarts + 1} attempt(s)", code, restarts))
        elif finished:
            # the Job ended without this trial (its backoff budget ran out, a deadline...): it will not run
            out.append(TrialObserved("failed" if current_phase == "Failed" else "stopped", job_reason, code, restarts))
        elif current_phase == "Running":
            out.append(TrialObserved("running", restarts=restarts))
        elif current_phase == "Pending" and current is not None:
            out.append(TrialObserved("pending", why_pending(current, []), restarts=restarts))
        elif current_phase == "Failed" and not suspended:
            reason = restarting_reason(code)
            out.append(TrialObserved("pending", reason, code, restarts + 1))
        elif suspended:
            out.append(TrialObserved("queued", "the sweep's Job is suspended", restarts=restarts))
        else:
            out.append(TrialObserved("queued", restarts=restarts))
    return out
