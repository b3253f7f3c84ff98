"""Pure builders of a sweep's Kubernetes objects: a SweepSpec becomes a ConfigMap and ONE Indexed Job. No API call.

:func:`build_sweep_workloads` for a sweep of any number of trials: ConfigMap ``<sweep>-sweep`` (the sweep spec)
and Indexed Job ``<sweep>-sweep`` (pod ``i`` runs trial ``i``); :func:`build_sweep_growth_job` for the trials a
grown sweep adds. The pod template, failure policy and probes are an experiment's learner's
(rlcloud.k8s.builders, whose module docstring describes them); a warm sweep pod's heartbeat lives as long as
the pod (see :func:`_warm_sweep_job`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubernetes import client as k8s

from rlcloud import runenv
from rlcloud.config import DEFAULT_IMAGE
from rlcloud.errors import SpecError, SpecProblem
from rlcloud.k8s.builders import (
    _INDEX_ARG,
    ANNOTATION_CONFIG_HASH,
    ANNOTATION_TRIAL_INDICES,
    ANNOTATION_TRIALS,
    CONFIG_KEY_GROWN,
    CONFIG_KEY_RESULTS,
    CONFIG_KEY_SWEEP,
    CONFIG_ROLE,
    CONTAINER,
    DEFAULT_SWEEP_PARALLELISM,
    KUEUE_QUEUE_LABEL,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    LABEL_SWEEP,
    LEARNER_BACKOFF_LIMIT,
    LEARNER_GRACE_SECONDS,
    MANAGED_BY,
    MAX_INT32,
    SPEC_ERROR_EXIT_CODES,
    TRIAL_ROLE,
    TTL_SECONDS_AFTER_FINISHED,
    _check_config_map_size,
    _check_inputs,
    _code_store,
    _config_map,
    _env_vars,
    _failure_policy,
    _index_env,
    _k8s_version,
    _learner_gpus,
    _liveness_probe,
    _pod_spec,
    _resources,
    _stamp,
    _startup_probe,
    budget_annotations,
)
from rlcloud.results import results_location
from rlcloud.roles import learner_role
from rlcloud.runenv import GPU_MEMORY_MB, RunnerEnv
from rlcloud.runner.watchdog import EXIT_STALLED, EXIT_STALLED_AGAIN, LIVENESS_MARGIN_S
from rlcloud.specs.experiment import DEFAULT_LEARNER_REQUESTS

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "JOB_CONTROLLER_UID_LABEL",
    "JOB_UID_ENV",
    "SWEEP_HALTED_EXIT_CODE",
    "build_sweep_growth_job",
    "build_sweep_workloads",
    "sweep_labels",
    "sweep_object_name",
    "sweep_selector",
    "sweep_yaml",
]


def sweep_object_name(sweep: str) -> str:
    """Name of a sweep's ConfigMap and of its Indexed Job (``<sweep>-sweep``: never an experiment's name)."""
    return f"{sweep}-sweep"


def sweep_labels(sweep: str, role: str) -> dict[str, str]:
    """The labels of a sweep's objects: distinct from an experiment's, so experiments' verbs never match them."""
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_SWEEP: sweep, LABEL_ROLE: role}


def sweep_selector(sweep: str | None = None) -> str:
    """Label selector for one sweep's objects (or every sweep's when ``sweep`` is None)."""
    selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
    return f"{selector},{LABEL_SWEEP}={sweep}" if sweep else f"{selector},{LABEL_SWEEP}"


def sweep_yaml(sweep: SweepSpec) -> str:
    """The sweep as the YAML its pods read back (``SweepSpec.to_yaml``): loading it gives an equal SweepSpec, so
    every pod computes exactly the trials the facade validated."""
    return sweep.to_yaml()


def _sweep_role(sweep: SweepSpec) -> str:
    """The learner role every trial runs as; one pod template serves all trials, so they must agree."""
    base = sweep.experiment.run_mode
    modes = {str(base)}
    values = sweep.parameters.get("run_mode")
    if isinstance(values, list):
        modes |= {str(v) for v in values}
    elif values is not None:  # a distribution: its choices
        modes |= {str(v) for v in (values.choice or [])}
    if sweep.experiment.max_runtime is not None:
        raise SpecError(
            [
                SpecProblem(
                    "experiment.max_runtime",
                    "max_runtime bounds an experiment's Jobs; the trials of a sweep on Kubernetes share one Job, "
                    "so it cannot bound a trial: leave it empty (stop a sweep with `rlcloud sweep stop`)",
                    str(sweep.experiment.max_runtime),
                )
            ]
        )
    if "distributed" in modes:
        raise SpecError(
            [
                SpecProblem(
                    "experiment.run_mode",
                    "a trial of a sweep on Kubernetes runs in one pod of an Indexed Job, which cannot hold "
                    "distributed env-server pods: use single or multi-threaded, or run each configuration "
                    "as its own experiment",
                    "distributed",
                )
            ]
        )
    roles = {learner_role(mode).value for mode in modes}
    if len(roles) > 1:
        raise SpecError(
            [
                SpecProblem(
                    "parameters.run_mode",
                    "the trials of one sweep on Kubernetes share one pod template: sweep single and "
                    "multi-threaded runs as two sweeps",
                    sorted(modes),
                )
            ]
        )
    return roles.pop()


def _shared_gpu_env(trials_per_gpu: int, gpu_type: str | None, gpus: int) -> k8s.V1EnvVar:
    """``RLCLOUD_GPU_MEMORY_MB`` of a trial that shares its GPU with ``trials_per_gpu - 1`` others.

    On a GKE GPU-sharing pool each container asks for exactly one (shared) ``nvidia.com/gpu``: GKE's time-sharing
    page shows a pod asking for more failing with "at most 1 nvidia.com/gpu can be requested on GPU nodes".
    """
    from rlcloud.specs.cluster import shared_gpu_memory_mb

    if not gpu_type or gpus != 1:
        why = "the sweep runs on no GPU cluster" if not gpu_type else f"the trials ask for {gpus} GPUs each"
        raise SpecError(
            [
                SpecProblem(
                    "trials_per_gpu",
                    f"trials sharing a GPU need one shared GPU per trial on a GPU cluster with gpu_sharing, but {why}: "
                    "set trials_per_gpu: 1, or experiment.resources.learner.gpus: 1 on a GPU cluster",
                    trials_per_gpu,
                )
            ]
        )
    return k8s.V1EnvVar(name=GPU_MEMORY_MB, value=str(shared_gpu_memory_mb(gpu_type, trials_per_gpu)))


def _sweep_config_map(sweep: SweepSpec, namespace: str, results: str | None) -> k8s.V1ConfigMap:
    """The ConfigMap that carries the sweep spec (the grid, not its expansion) and its results root to the pods."""
    object_name = sweep_object_name(sweep.name)
    data = {CONFIG_KEY_SWEEP: sweep_yaml(sweep)}
    if results:
        data[CONFIG_KEY_RESULTS] = results
    dumped = sweep.model_dump(mode="json")
    experiment = dumped.pop("experiment", {})
    parts = {**{f"experiment.{k}": v for k, v in experiment.items()}, **dumped}
    _check_config_map_size(object_name, data, parts)
    labels = sweep_labels(sweep.name, CONFIG_ROLE)
    return _config_map(object_name, namespace, labels, {ANNOTATION_TRIALS: str(sweep.num_trials)}, data)


def _sweep_pod(sweep: SweepSpec, role: str, results: str | None, **pod_options: Any) -> k8s.V1PodSpec:
    """The pod template of every trial: the base experiment's learner (``pod_options``: the :func:`_pod_spec`
    keywords of the image, ConfigMap, identity and GPU type), with its index and the sweep's results."""
    base = sweep.experiment
    env = [k8s.V1EnvVar(name="PYTHONUNBUFFERED", value="1"), _index_env()]
    if results:
        # not resolved: a local path is the pod's (or the fake kubelet's), not this machine's
        location = results_location(results, sweep.name, resolve=False)
        env += _env_vars(RunnerEnv(sweep_results=location, code_store=_code_store(base, results)))
    gpus = _learner_gpus(base.resources.learner.gpus, pod_options["gpu_type"])
    if sweep.trials_per_gpu > 1:
        env.append(_shared_gpu_env(sweep.trials_per_gpu, pod_options["gpu_type"], gpus))
    pod = _pod_spec(
        role=role,
        index_arg=_INDEX_ARG,
        env=env,
        resources=_resources(base.resources.learner, gpus, DEFAULT_LEARNER_REQUESTS),
        grace=LEARNER_GRACE_SECONDS,
        gpus=gpus,
        config_key=CONFIG_KEY_SWEEP,
        **pod_options,
    )
    # a trial's learner is probed as an experiment's is; the file's own limit (its watchdog's stall_timeout
    # + margin) wins over this one, the base experiment's, for trials that sweep stall_timeout
    pod.containers[0].liveness_probe = _liveness_probe(base.stall_timeout.seconds, LIVENESS_MARGIN_S)
    return pod


def _sweep_job_spec(sweep: SweepSpec, pod: k8s.V1PodSpec, per_index: bool, *, queued: bool) -> k8s.V1JobSpec:
    """The Indexed Job spec of one pod per trial (``per_index``: Kubernetes 1.29+, each trial retried alone)."""
    trials = sweep.num_trials
    spec = k8s.V1JobSpec(
        completion_mode="Indexed",
        completions=trials,
        parallelism=min(sweep.max_parallel or DEFAULT_SWEEP_PARALLELISM, trials),
        template=k8s.V1PodTemplateSpec(
            metadata=k8s.V1ObjectMeta(labels=sweep_labels(sweep.name, TRIAL_ROLE)), spec=pod
        ),
        # FailIndex: a trial whose spec or environment is wrong fails alone, the others go on
        pod_failure_policy=_failure_policy("FailIndex" if per_index else None),
        ttl_seconds_after_finished=TTL_SECONDS_AFTER_FINISHED,
        # Kueue admits a queued Job by un-suspending it
        suspend=queued,
    )
    if per_index:
        spec.backoff_limit_per_index = LEARNER_BACKOFF_LIMIT
        if sweep.max_failures:
            # a broken sweep stops after max_failures failed trials instead of failing all of them: the
            # Job fails once failed indexes *exceed* maxFailedIndexes (at most completions; Kubernetes
            # "Jobs: maximum number of failed indexes", 1.29+ with backoffLimitPerIndex)
            spec.max_failed_indexes = min(sweep.max_failures - 1, trials)
    else:
        spec.backoff_limit = min(LEARNER_BACKOFF_LIMIT * trials, MAX_INT32)
    return spec


def build_sweep_workloads(
    sweep: SweepSpec,
    *,
    image: str | None = None,
    namespace: str,
    results: str | None = None,
    gpu_type: str | None = None,
    service_account: str | None = None,
    credentials_secret: str | None = None,
    queue: str | None = None,
    kubernetes_version: str = "1.29",
    warm: bool = False,
) -> list[Any]:
    """The Kubernetes objects that run every trial of ``sweep``: a ConfigMap and ONE Indexed Job.

    Whatever the number of trials, that is two objects, and the ConfigMap holds the sweep spec (the grid,
    not its expansion) and the results root: a 1,000-trial sweep costs the API server what a 10-trial one
    does. Pod ``i`` runs ``python -m rlcloud.runner --role single|multi --index i --sweep
    /etc/rlcloud/sweep.yaml``: it computes trial ``i`` itself (:meth:`SweepSpec.trial`) and writes to
    ``<results>/<sweep>/<trial>/`` (``RLCLOUD_SWEEP_RESULTS`` is ``<results>/<sweep>``).

    The Job: ``completions`` = trials, ``parallelism`` = ``max_parallel`` (default: trials, at most
    :data:`DEFAULT_SWEEP_PARALLELISM`); from Kubernetes 1.29 each trial is retried on its own
    (``backoffLimitPerIndex``), a spec error (exit 2/3) fails that trial alone (``FailIndex``) and the Job
    stops once ``max_failures`` trials have failed (``maxFailedIndexes``: a broken sweep fails a few
    trials, not all of them; running trials are stopped with it); on older
    versions the trials share one budget (``backoffLimit`` = retries x trials) and spec errors are ordinary
    failures, because ``FailJob`` would end every other trial too. Preemption is ignored as for
    experiments. With ``queue`` (a Kueue LocalQueue) the Job carries ``kueue.x-k8s.io/queue-name`` and is
    created suspended: Kueue un-suspends it when it admits the sweep.

    The pod template is the base experiment's: its learner resources, GPUs (``gpu_type`` as for
    :func:`build_workloads`) and image apply to every trial. Distributed trials are refused (an Indexed
    Job's pod cannot hold env servers), so is a ``run_mode`` parameter that mixes single and
    multi-threaded trials.
    Every pod has the learner's exec livenessProbe over its heartbeat (stall_timeout + 30 s, or the limit the
    trial's watchdog wrote into the file: rlcloud.runner.watchdog).

    ``warm`` (with more trials than ``max_parallel``): trials start warm, :func:`_warm_sweep_job`.
    """
    from rlcloud.specs.sweep import SweepSpec as _SweepSpec

    if not isinstance(sweep, _SweepSpec):
        raise TypeError(f"build_sweep_workloads needs a SweepSpec, not {type(sweep).__name__}")
    base = sweep.experiment
    image = image or base.image or DEFAULT_IMAGE
    _check_inputs(base, namespace, image)
    version = _k8s_version(kubernetes_version)
    role = _sweep_role(sweep)
    results = results if results is not None else (sweep.results or base.results)
    object_name = sweep_object_name(sweep.name)
    config_map = _sweep_config_map(sweep, namespace, results)
    pod = _sweep_pod(
        sweep,
        role,
        results,
        image=image,
        config_map=object_name,
        service_account=service_account,
        credentials_secret=credentials_secret,
        gpu_type=str(gpu_type) if gpu_type else None,
    )
    per_index = version >= (1, 29)
    job_labels = sweep_labels(sweep.name, TRIAL_ROLE)
    if queue:
        job_labels[KUEUE_QUEUE_LABEL] = queue
    spec = _sweep_job_spec(sweep, pod, per_index, queued=bool(queue))
    if warm and min(sweep.max_parallel or DEFAULT_SWEEP_PARALLELISM, sweep.num_trials) < sweep.num_trials:
        _warm_sweep_job(spec, per_index)
    job = _stamp(
        k8s.V1Job(
            api_version="batch/v1",
            kind="Job",
            metadata=k8s.V1ObjectMeta(
                name=object_name, namespace=namespace, labels=job_labels, annotations=budget_annotations(sweep.budget)
            ),
            spec=spec,
        )
    )
    return [config_map, job]


def build_sweep_growth_job(
    sweep: SweepSpec, indices: list[int], suffix: str, *, namespace: str, **options: Any
) -> k8s.V1Job:
    """A Job that runs trials ``indices`` of a sweep that grew (``sweep``: with its growth), beside its first Job.

    Kubernetes does not let a running Indexed Job grow: ``spec.completions`` is immutable unless it changes
    together with ``spec.parallelism`` and stays equal to it (Kubernetes "Jobs", Elastic Indexed Jobs, 1.27+),
    and a sweep runs ``max_parallel`` < trials at a time; replacing the Job would restart its running pods. So
    the new trials (or the ones run again) get a second Indexed Job of the same sweep (its labels, pod template
    and failure policy: :func:`build_sweep_workloads` with ``options``), named ``<sweep>-sweep-<suffix>``:
    ``completions`` = ``len(indices)``, and its pod ``i`` runs trial ``indices[i]`` (``--trials``), reading the
    grown sweep from the ConfigMap's :data:`CONFIG_KEY_GROWN` (the first Job's pods never see it change).
    """
    if not indices:
        raise ValueError("a growth Job needs at least one trial")
    from rlcloud.specs.sweep import trial_indices_text

    options = {**options, "warm": False}  # one trial per pod: its index is the trial's
    config_map, job = build_sweep_workloads(sweep, namespace=namespace, **options)
    del config_map
    count = len(indices)
    job.metadata.name = f"{sweep_object_name(sweep.name)}-{suffix}"
    text = trial_indices_text(indices)
    annotations = {k: v for k, v in (job.metadata.annotations or {}).items() if k != ANNOTATION_CONFIG_HASH}
    job.metadata.annotations = {**annotations, ANNOTATION_TRIAL_INDICES: text}
    spec = job.spec
    spec.completions = count
    spec.parallelism = min(sweep.max_parallel or DEFAULT_SWEEP_PARALLELISM, count)
    if spec.max_failed_indexes is not None:
        spec.max_failed_indexes = min(spec.max_failed_indexes, count)
    if spec.backoff_limit is not None:
        spec.backoff_limit = min(LEARNER_BACKOFF_LIMIT * count, MAX_INT32)
    pod = spec.template.spec
    for volume in pod.volumes:
        if volume.config_map is not None:
            volume.config_map.items = [k8s.V1KeyToPath(key=CONFIG_KEY_GROWN, path=CONFIG_KEY_SWEEP)]
    pod.containers[0].args = [*pod.containers[0].args, "--trials", text]
    stamped: k8s.V1Job = _stamp(job)
    return stamped


#: A warm sweep pod's exit code when it stops launching trials (max_failures trials failed the same way):
#: the Job fails on it (rlcloud.runner.warm.EXIT_HALTED).
SWEEP_HALTED_EXIT_CODE = 4

#: A warm sweep pod's environment variable holding its Job's uid (rlcloud.runner.warm.JOB_UID_ENV).
JOB_UID_ENV = runenv.JOB_UID

#: The label the Job controller puts on its pods with the Job's uid ("Well-Known Labels, Annotations and
#: Taints": batch.kubernetes.io/controller-uid, Kubernetes 1.27+).
JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"


def _warm_sweep_job(spec: k8s.V1JobSpec, per_index: bool) -> None:
    """Turn a sweep's Job ``spec`` (one pod per trial) into one whose ``parallelism`` pods each run several
    trials in one process (rlcloud.runner.warm), so only a pod's first trial pays the imports.

    ``completions`` = ``parallelism`` = P pods, each claiming the sweep's next free trial from the results
    store in turn (``--stride P --claim``: a dead pod's trial is taken over once its lease expires).
    Trials are accounted by the pods, in the store (rlcloud.runner.warm): a trial's failure is recorded and
    the pod goes on; the pod that sees ``max_failures`` trials failed the same way (or the smoke trial, the
    first, failed before ``smoke_timesteps``) exits :data:`SWEEP_HALTED_EXIT_CODE`, and ``FailJob`` on that
    code stops the others (Kubernetes "Jobs", pod failure policy: FailJob "indicate[s] that the Pod's job
    should be marked as Failed and all running Pods should be terminated"). An invalid sweep file (exit 2/3
    of a pod) fails the Job the same way. A pod that dies (a node
    lost, out of memory) is replaced within ``backoffLimitPerIndex`` (before 1.29: ``backoffLimit`` for all)
    and its replacement resumes its share, skipping finished trials.

    A stalled trial ends its pod (the watchdog: exit 88, or 89 when it stalled again after a restart for a
    stall), and ``Ignore`` on both replaces the pod without spending the index's backoff (pod failure
    policy: Ignore "indicate[s] that the counter towards the .spec.backoffLimit should not be incremented
    and a replacement Pod should be created"): stalls are counted per trial in the store, a trial stalls at
    most twice, and the replacement records the second as that trial's failure (counted toward
    max_failures) and goes on with the pod's next trials, instead of the index failing for one bad trial.

    The pod's exit codes: 0 its share done; 2/3 invalid sweep (FailJob); 4 halted (FailJob); 88/89 a
    trial stalled (Ignore); 143/130 stopped (Count, as for cold pods); other: a crash (Count).

    Liveness: the pod keeps one heartbeat for its whole life (rlcloud.runner.watchdog.PodHeartbeat: beaten
    through the imports, the smoke wait and each trial's preparation, held by each trial's watchdog while
    it trains), read by the learner's livenessProbe; a startupProbe gives the runner
    :data:`STARTUP_PROBE_SECONDS` to beat it a first time (:func:`_startup_probe`).
    """
    assert spec.parallelism is not None and spec.pod_failure_policy is not None and spec.template.spec is not None
    pods = int(spec.parallelism)
    spec.completions = pods
    spec.max_failed_indexes = None
    if per_index:
        spec.backoff_limit_per_index = LEARNER_BACKOFF_LIMIT
    else:
        spec.backoff_limit = min(LEARNER_BACKOFF_LIMIT * pods, MAX_INT32)
    spec.pod_failure_policy = k8s.V1PodFailurePolicy(
        rules=[
            *(r for r in spec.pod_failure_policy.rules if r.on_pod_conditions),  # disruptions: ignored
            k8s.V1PodFailurePolicyRule(
                action="FailJob",
                on_exit_codes=k8s.V1PodFailurePolicyOnExitCodesRequirement(
                    container_name=CONTAINER,
                    operator="In",
                    values=sorted({*SPEC_ERROR_EXIT_CODES, SWEEP_HALTED_EXIT_CODE}),
                ),
                # before 1.29 the schema requires the field (batch/v1 PodFailurePolicyRule); empty, it
                # matches on the exit codes alone
                on_pod_conditions=None if per_index else [],
            ),
            # a trial stalled: the pod's replacement accounts for it per trial (rlcloud.runner.warm)
            k8s.V1PodFailurePolicyRule(
                action="Ignore",
                on_exit_codes=k8s.V1PodFailurePolicyOnExitCodesRequirement(
                    container_name=CONTAINER, operator="In", values=[EXIT_STALLED, EXIT_STALLED_AGAIN]
                ),
                on_pod_conditions=None if per_index else [],
            ),
        ]
    )
    container = spec.template.spec.containers[0]
    container.startup_probe = _startup_probe()
    # --claim: the pods take the next free trial from the store, with leases (rlcloud.storage.claims); a Job
    # made before it (--stride alone) still runs trials i, i+P, ... (rlcloud.runner.warm)
    container.args = [*(container.args or []), "--stride", str(pods), "--claim"]
    container.env = [
        *(container.env or []),
        k8s.V1EnvVar(
            name=JOB_UID_ENV,
            value_from=k8s.V1EnvVarSource(
                field_ref=k8s.V1ObjectFieldSelector(field_path=f"metadata.labels['{JOB_CONTROLLER_UID_LABEL}']")
            ),
        ),
    ]
