"""``rlcloud doctor --smoke``: one tiny run on a real cluster, the last step before trusting a new project.

The doctor's checks (:mod:`rlcloud.gke.doctor`) read settings; this runs something. On an existing cluster it
submits one pod, built exactly as an experiment's learner is (:func:`rlcloud.k8s.builders.build_workloads`:
the runner image, the runner's ServiceAccount and so its Workload Identity, the GPU request, node selector
and toleration of the cluster's GPU pool), whose command is the doctor's probe (``python -m rlcloud.gke.doctor
probe``) instead of the runner. Steps, each with its time and estimated cost:

1. ``cluster``: the cluster is RUNNING and its Kubernetes API answers;
2. ``pod started``: the pod was scheduled (a GPU node may have to be added first) and its image pulled, within
   the scheduling limit (``schedule_timeout``, default 20 minutes: a Spot GPU node from zero, its driver and a
   several-GB image pull take ~10 minutes on real GKE);
3. ``probe ran``: the pod ran to its end within the running limit (``run_timeout``, counted from its start);
4. ``results-store``: in the pod, an object written to the results store and read back (the pod's identity);
5. ``gpu``: in the pod, TensorFlow sees the GPU and computes on it (SKIP on a pool without GPUs);
6. ``read back``: this machine reads the object the pod wrote (both sides see the same store);
7. ``clean up``: the Job, its pod, the ConfigMap and the objects written are deleted, and seen gone;
8. ``total``: the whole run's time and estimated cost.

The two limits are apart because they fail for different reasons (no capacity or no quota for the node; a probe
that hangs), and each step's detail names its limit.

Cost: the elapsed time at the estimated hourly price of one node of the pool the pod ran on
(:func:`rlcloud.gke.prices.node_hourly_cost`; only for GKE clusters): what the run adds to the bill if that
node was added for it. An estimate, at the dated list prices.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlcloud.cluster import GkeTarget, KubernetesTarget
from rlcloud.errors import RLCloudError, SpecError, SpecProblem
from rlcloud.waiting import sleep_until

__all__ = ["RUN_TIMEOUT_S", "SCHEDULE_TIMEOUT_S", "SmokeStep", "smoke"]

#: Seconds the smoke test's pod may take to start (Pending: scheduled, a node added, its image pulled). A Spot T4
#: node from zero, the GPU driver and a several-GB image pull take ~10 minutes on real GKE: twice that.
SCHEDULE_TIMEOUT_S = 1200.0
#: Seconds the pod may run, from its start (the probe writes one object and runs one matmul).
RUN_TIMEOUT_S = 600.0
#: The most either limit may be (a day): beyond it a typo, not a wait.
MAX_LIMIT_S = 86400.0

#: container waiting reasons that mean the image will not start without a change
_IMAGE_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
_CONFIG_FAILURES = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})


@dataclass(frozen=True)
class SmokeStep:
    """One step of the smoke test: ``status`` OK, FAIL or SKIP; ``seconds`` it took; ``cost_usd`` its estimated
    cost (None: unknown, e.g. not a GKE cluster)."""

    name: str
    status: str
    detail: str
    seconds: float
    cost_usd: float | None = None

    @property
    def ok(self) -> bool:
        """True unless the step failed."""
        return self.status != "FAIL"

    def __str__(self) -> str:
        cost = "cost unknown" if self.cost_usd is None else f"~${self.cost_usd:.4f}"
        return f"{self.status:<4} {self.name} ({self.seconds:.1f} s, {cost}): {self.detail}"


def _waiting_reason(pod: dict[str, Any]) -> tuple[str, str]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"]), str(waiting.get("message") or "")
    return "", ""


def _started(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Running", "Succeeded", "Failed"):
        return True
    return any(
        (s.get("state") or {}).get("running") or (s.get("state") or {}).get("terminated")
        for s in status.get("containerStatuses") or []
    )


def _unscheduled(pod: dict[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled")
    return ""


class _Run:
    """One smoke test's state: the clock, the price of the node it uses and the steps so far."""

    def __init__(self, hourly: float | None, on_step: Callable[[SmokeStep], None] | None) -> None:
        self.hourly = hourly
        self.on_step = on_step
        self.steps: list[SmokeStep] = []

    def add(self, name: str, status: str, detail: str, seconds: float) -> SmokeStep:
        cost = None if self.hourly is None else self.hourly * seconds / 3600.0
        step = SmokeStep(name, status, detail, round(seconds, 3), cost)
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        return step


def smoke(
    cluster: KubernetesTarget,
    results: str,
    *,
    image: str | None = None,
    schedule_timeout: float = SCHEDULE_TIMEOUT_S,
    run_timeout: float = RUN_TIMEOUT_S,
    poll_interval: float = 2.0,
    on_step: Callable[[SmokeStep], None] | None = None,
) -> list[SmokeStep]:
    """Run the smoke test on ``cluster`` (it must exist: nothing is created but the pod and its objects) with
    ``results`` (``gs://BUCKET[/PREFIX]``: pods cannot write this machine's directories) as the results root.

    ``image``: the pod's image (default: the cluster's, else rlcloud.yaml's ``gpu_image``/``image``);
    ``schedule_timeout``: seconds for the pod to start (scheduled, a GPU node added from zero, a several-GB image
    pulled: Pending); ``run_timeout``: seconds for it to run, from its start; ``on_step``: called with each step
    as it ends. Returns the steps; never raises for what it finds
    (a step FAILs), only for bad input (SpecError). Everything it made is deleted before it returns, also
    after an error or Ctrl-C.
    """
    from rlcloud.results import is_gcs

    if not is_gcs(results):
        problem = "the smoke test's pod writes its results store: give a gs://BUCKET[/PREFIX] results root"
        raise SpecError([SpecProblem("results", problem, value=results)])
    for field, limit in (("schedule_timeout", schedule_timeout), ("run_timeout", run_timeout)):
        if not (isinstance(limit, int | float) and math.isfinite(limit) and 0 < limit <= MAX_LIMIT_S):
            problem = f"seconds, more than 0 and at most {MAX_LIMIT_S:g} (a day)"
            raise SpecError([SpecProblem(field, problem, value=limit)])
    cluster.check_image(image)  # SpecError naming docs/images.md when there is no image at all
    gpu = bool(cluster.gpu_type)
    hourly: float | None = None
    node = "a node"
    if isinstance(cluster, GkeTarget):
        from rlcloud.gke.prices import node_hourly_cost

        hourly, node = node_hourly_cost(cluster.spec, gpu=gpu)
    run = _Run(hourly, on_step)

    started = time.monotonic()
    try:
        detail = "Kubernetes API answers"
        if isinstance(cluster, GkeTarget):
            info = cluster.info()
            if info.status != "RUNNING":
                run.add("cluster", "FAIL", f"{cluster.describe()} is {info.status}, not RUNNING", 0.0)
                run.add("total", "FAIL", "failed: cluster (nothing was made)", time.monotonic() - started)
                return run.steps
            detail = f"{cluster.describe()} RUNNING; " + detail
        backend: Any = cluster.backend()
        version = backend.kubernetes_version()
    except RLCloudError as exc:
        run.add("cluster", "FAIL", str(exc).splitlines()[0], time.monotonic() - started)
        run.add("total", "FAIL", "failed: cluster (nothing was made)", time.monotonic() - started)
        return run.steps
    run.add("cluster", "OK", f"{detail} (Kubernetes {version})", time.monotonic() - started)

    name = f"rlcloud-smoke-{secrets.token_hex(3)}"
    token = secrets.token_hex(8)
    try:
        limits = (schedule_timeout, run_timeout)
        _submit_and_watch(run, backend, name, token, results, image, node, limits, poll_interval)
    finally:
        _clean_up(run, backend, name, results)
    failed = [s.name for s in run.steps if not s.ok]
    summary = f"failed: {', '.join(failed)}" if failed else f"every step passed (cost: {node}, list prices)"
    run.add("total", "FAIL" if failed else "OK", summary, time.monotonic() - started)
    return run.steps


def _submit_and_watch(
    run: _Run,
    backend: Any,
    name: str,
    token: str,
    results: str,
    image: str | None,
    node: str,
    time_limits: tuple[float, float],
    poll_interval: float,
) -> None:
    """Submit the probe's pod, time its start (within ``time_limits[0]``) and its run (``[1]``), read its steps
    from its log, read its object back."""
    from rlcloud.results import results_location

    submitted = time.monotonic()
    pod_image = image or backend.image
    _submit(backend, name, token, results, image, pod_image, time_limits)
    schedule_limit, run_limit = time_limits
    pod = _wait_started(run, backend, name, pod_image, submitted, schedule_limit, poll_interval)
    if pod is None:
        return
    node_name = (pod.get("spec") or {}).get("nodeName") or ""
    where = f" on {node_name}" if node_name else ""
    started = time.monotonic()
    run.add(
        "pod started",
        "OK",
        f"scheduled{where} and {pod_image} pulled in {started - submitted:.0f} s of the scheduling limit's "
        f"{schedule_limit:g} s (priced as {node}, the node the pod needs)",
        started - submitted,
    )

    pod_name = pod["metadata"]["name"]
    deadline = started + run_limit  # the running limit counts from the start: a slow scale-up takes none of it
    while True:
        current = backend.applier.read("Pod", pod_name, backend.namespace) or pod
        phase = (current.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            break
        if not sleep_until(deadline, poll_interval):
            detail = f"the probe did not finish in {run_limit:g} s of running (the running limit; phase {phase})"
            run.add("probe ran", "FAIL", detail, time.monotonic() - started)
            return
    ran = time.monotonic() - started
    run.add("probe ran", "OK", f"ended ({phase}) in {ran:.0f} s of the running limit's {run_limit:g} s", ran)
    _probe_steps(run, backend.applier.pod_log(pod_name, backend.namespace), phase)
    _read_back(run, results_location(results, name, resolve=False), token)


def _submit(
    backend: Any,
    name: str,
    token: str,
    results: str,
    image: str | None,
    pod_image: str,
    time_limits: tuple[float, float],
) -> None:
    """Create the probe's objects: an experiment's Job whose one try runs the probe instead of the runner."""
    from rlcloud.k8s.builders import build_workloads
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec(
        name=name,
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 1},
        total_timesteps=1,
        image=image,
    )
    backend.ensure_namespace()
    objects = build_workloads(
        spec,
        image=pod_image,
        namespace=backend.namespace,
        results=results,
        gpu_type=backend.gpu_type,
        service_account=backend.service_account,
        credentials_secret=backend.credentials_secret,
        kubernetes_version=backend.kubernetes_version(),
    )
    gpus = 0
    for obj in objects:
        if obj.kind == "Job":
            obj.spec.backoff_limit = 0  # one try: a failed probe says why, a retry would only cost
            # the pod never outlives the smoke test (Kubernetes counts from the Job's start: Pending included)
            obj.spec.active_deadline_seconds = math.ceil(sum(time_limits))
            container = obj.spec.template.spec.containers[0]
            limits = (container.resources.limits or {}) if container.resources else {}
            gpus = int(limits.get("nvidia.com/gpu", 0) or 0)
            container.command = ["python", "-m", "rlcloud.gke.doctor"]
            container.args = ["probe", "--token", token, "--gpus", str(gpus)]
        backend.applier.create(obj, compare=False)


def _wait_started(
    run: _Run,
    backend: Any,
    name: str,
    pod_image: str,
    submitted: float,
    schedule_limit: float,
    poll_interval: float,
) -> dict[str, Any] | None:
    """The probe's pod once it started; None (and the step's FAIL) when its image or container cannot be, or it
    did not start within ``schedule_limit`` seconds of ``submitted``."""
    from rlcloud.k8s.builders import experiment_selector

    selector = experiment_selector(name)
    deadline = submitted + schedule_limit
    waiting_for = "the pod to be created"
    while True:
        pods = backend.applier.list_items("Pod", backend.namespace, label_selector=selector, what="list smoke pods")
        pod: dict[str, Any] | None = pods[0] if pods else None
        if pod is not None:
            reason, message = _waiting_reason(pod)
            if reason in _IMAGE_FAILURES or reason in _CONFIG_FAILURES:
                what = f"image {pod_image} cannot be pulled" if reason in _IMAGE_FAILURES else "container not created"
                detail = f"{what}: {reason}" + (f" ({message})" if message else "")
                run.add("pod started", "FAIL", detail, time.monotonic() - submitted)
                return None
            if _started(pod):
                return pod
            waiting_for = _unscheduled(pod) or (f"container: {reason}" if reason else "the pod to start")
        if not sleep_until(deadline, poll_interval):
            detail = f"not started in {schedule_limit:g} s (the scheduling limit): {waiting_for}"
            run.add("pod started", "FAIL", detail, time.monotonic() - submitted)
            return None


def _read_back(run: _Run, location: str, token: str) -> None:
    """This machine reads the object the probe wrote in ``location``, with the token it was given."""
    import json

    from rlcloud.gke.probe import PROBE_OBJECT
    from rlcloud.storage import open_store

    read_started = time.monotonic()
    try:
        with open_store(location) as store:
            body = store.read_text(PROBE_OBJECT)
    except RLCloudError as exc:
        run.add("read back", "FAIL", f"{location}/{PROBE_OBJECT}: {exc}", time.monotonic() - read_started)
        return
    seen = json.loads(body).get("token")
    status, detail = (
        ("OK", f"this machine reads what the pod wrote ({location}/{PROBE_OBJECT})")
        if seen == token
        else ("FAIL", f"{location}/{PROBE_OBJECT} holds another run's token: not what the pod wrote")
    )
    run.add("read back", status, detail, time.monotonic() - read_started)


def _probe_steps(run: _Run, log: str, phase: str | None) -> None:
    """The probe's steps from its log (``rlcloud-smoke {json}`` lines); a FAIL when it reported none."""
    import json

    from rlcloud.gke.probe import PROBE_LINE

    reported = 0
    for line in log.splitlines():
        if not line.startswith(PROBE_LINE):
            continue
        try:
            step = json.loads(line[len(PROBE_LINE) :])
        except ValueError:
            continue
        run.add(str(step["step"]), str(step["status"]), str(step["detail"]), float(step.get("seconds") or 0.0))
        reported += 1
    if not reported:
        tail = " | ".join(log.strip().splitlines()[-3:]) or "no output"
        run.add("probe", "FAIL", f"the pod ended ({phase}) without the probe's report: {tail}", 0.0)


def _clean_up(run: _Run, backend: Any, name: str, results: str) -> None:
    """Delete what the smoke test made: its Job (and pod) and ConfigMap, and every object under its results
    location; then look that they are gone."""
    from rlcloud.k8s.builders import experiment_selector
    from rlcloud.results import results_location
    from rlcloud.storage import open_store

    started = time.monotonic()
    problems: list[str] = []
    deleted = 0
    try:
        backend.stop(name)  # Jobs (foreground), Services, ConfigMaps of the name; waits for the pods to go
        left = [
            f"{kind} {obj['metadata']['name']}"
            for kind in ("Job", "Pod", "ConfigMap")
            for obj in backend.applier.list_items(
                kind, backend.namespace, label_selector=experiment_selector(name), what=f"list smoke {kind}s"
            )
        ]
        if left:
            problems.append(f"still there: {', '.join(left)}")
    except RLCloudError as exc:
        problems.append(f"Kubernetes objects: {exc}")
    location = results_location(results, name, resolve=False)
    try:
        with open_store(location) as store:
            names = [info.name for info in store.list()]
            store.delete_many(names)
            deleted = len(names)
            if list(store.list()):
                problems.append(f"objects left under {location}")
    except RLCloudError as exc:
        problems.append(f"{location}: {exc}")
    if problems:
        run.add("clean up", "FAIL", "; ".join(problems), time.monotonic() - started)
    else:
        detail = f"deleted Job {name}, its pod and ConfigMap, and {deleted} object(s) under {location}"
        run.add("clean up", "OK", detail, time.monotonic() - started)
