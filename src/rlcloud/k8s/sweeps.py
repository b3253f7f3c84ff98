"""The sweep capability of :class:`~rlcloud.k8s.backend.KubernetesBackend` (:class:`~rlcloud.backend.SweepCapable`).

A sweep is a ConfigMap and ONE Indexed Job (:func:`rlcloud.k8s.sweep_builders.build_sweep_workloads`), constant in
the number of trials (see benchmarks/sweep_objects.py): ``start_sweep`` reads the Job and creates the two
objects; ``sweep_status`` reads the Job and the ConfigMap and lists the pods once (trial states from
``completedIndexes``/``failedIndexes`` and the pods: :func:`rlcloud.k8s.status.trial_states`); ``stop_sweep``
deletes the Job (foreground) and the ConfigMap, then lists pods until they are gone. A sweep that grew
(``grow_sweep``: ``rlcloud sweep extend``/``rerun``) has more Jobs beside its first, one per growth or rerun,
each over some trial indices; its status lists them once more.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from kubernetes import client as k8s

from rlcloud.backend import ExperimentState, SweepCapable, SweepStatus, TrialState, TrialStatus, trial_state
from rlcloud.errors import ConflictError, NotFoundError, RLCloudError, SpecError, SpecProblem, WaitTimeoutError
from rlcloud.k8s.applier import KUEUE_API, path_for, translate
from rlcloud.k8s.builders import (
    ANNOTATION_CONFIG_HASH,
    ANNOTATION_COVERED,
    ANNOTATION_GROWTH,
    ANNOTATION_RERUNS,
    ANNOTATION_TRIAL_INDICES,
    ANNOTATION_TRIALS,
    CONFIG_KEY_GROWN,
    CONFIG_KEY_RESULTS,
    CONFIG_KEY_SWEEP,
    CONFIG_ROLE,
    KUEUE_QUEUE_LABEL,
    LABEL_ROLE,
    LABEL_SWEEP,
)
from rlcloud.k8s.namespace import KubernetesNamespace
from rlcloud.k8s.status import (
    JSON,
    budget_stop,
    get,
    is_live,
    is_suspended,
    job_finished,
    labels,
    measured_cost,
    trial_states,
)
from rlcloud.k8s.status import name as object_name
from rlcloud.k8s.sweep_builders import build_sweep_growth_job, build_sweep_workloads, sweep_object_name, sweep_selector
from rlcloud.k8s.warm import claiming, read_shares, warm_final, warm_pods, warm_sweep_status
from rlcloud.layout import FINAL_STATES, ProgressRecord
from rlcloud.waiting import poll_until

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage import Store

__all__ = ["KubernetesSweeps"]

logger = logging.getLogger(__name__)

#: The label the Job controller puts on its pods with their Job's name (Kubernetes 1.27+).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


class KubernetesSweeps(KubernetesNamespace, SweepCapable):
    """Sweeps as one ConfigMap and ONE Indexed Job each, in the namespace (see the module docstring)."""

    def start_sweep(self, sweep: SweepSpec, results: str) -> bool:
        """Create the sweep's ConfigMap and its ONE Indexed Job (:func:`build_sweep_workloads`) and return.

        The Job controller runs ``max_parallel`` trials at a time and retries each on its own; nothing on
        this machine needs to keep running. With a Kueue ``queue`` the Job is created suspended and Kueue
        admits it. Idempotent: a sweep whose Job exists already is left alone (False; one that has
        finished is kept as it is: stop it first to run it again, which keeps the trials that finished). A
        different sweep of the same name raises ConflictError. Three requests for a new sweep (read the
        Job, create two objects) whatever its number of trials.
        """
        self._check_results(results, "a sweep")
        # built and checked before anything is created: a refused sweep leaves no trace in the cluster
        objs = build_sweep_workloads(
            sweep,
            image=sweep.experiment.image or self.image,
            namespace=self.namespace,
            results=results,
            gpu_type=self.gpu_type,
            service_account=self.service_account,
            credentials_secret=self.credentials_secret,
            queue=self.queue,
            kubernetes_version=self.kubernetes_version(),
            warm=self.warm_trials,
        )
        if self.queue:
            self._check_queue(self.queue)
        self.ensure_namespace()
        name = sweep.name
        job_name = sweep_object_name(name)
        self._forget_sweep(name)
        existing = self.applier.read("Job", job_name, self.namespace)
        if existing is not None and not get(existing, "metadata", "deletionTimestamp") and sweep.growth:
            # a sweep that grew, started again while its first Job is there: the Job is the ungrown sweep's, and
            # the facade checked the sweep's identity against its record; what the growth needs, it gets
            self.grow_sweep(sweep, results)
            return False
        if existing is not None and not get(existing, "metadata", "deletionTimestamp"):
            wanted = objs[-1].metadata.annotations[ANNOTATION_CONFIG_HASH]
            if (get(existing, "metadata", "annotations") or {}).get(ANNOTATION_CONFIG_HASH) != wanted:
                raise ConflictError(self._sweep_conflict(name))
            self._create_sweep_object(objs[0], name)  # a ConfigMap deleted by hand comes back
            finished = job_finished(existing)
            if finished:
                logger.warning("sweep %s has already %s; stop it first to run it again", name, finished)
                return False
            if is_suspended(existing) and not self.queue:
                self._set_suspend(job_name, False)  # suspended by hand: go on (under Kueue, Kueue decides)
                return True
            logger.info("sweep %s is already running", name)
            return False
        with self.applier.undo_on_failure():  # a Job refused or lost: its ConfigMap is not left behind
            for obj in objs:  # the ConfigMap first: the pods mount it
                self._create_sweep_object(obj, name)
        logger.info(
            "started sweep %s in namespace %s: %d trials, %d at a time%s",
            name,
            self.namespace,
            sweep.num_trials,
            objs[-1].spec.parallelism,
            f", queued in Kueue queue {self.queue}" if self.queue else "",
        )
        return True

    def grow_sweep(self, sweep: SweepSpec, results: str, *, run: Sequence[str] = ()) -> bool:
        """Run a grown sweep's new trials, and the trials in ``run`` (or given a larger budget) again, each set
        in an Indexed Job of its own beside the sweep's first (:func:`build_sweep_growth_job`): running pods are
        never touched, and each trial keeps its index and name.

        The grown sweep goes to the ConfigMap (:data:`CONFIG_KEY_GROWN`, read by those Jobs' pods only), and the
        ConfigMap counts the trials that have a Job (:data:`ANNOTATION_COVERED`): the new trials' Job is named
        after its first index, so a call that crashed and is made again finds its Job and creates no second
        one. A sweep whose objects are gone (stopped) is started again whole (:meth:`start_sweep`: its
        finished trials exit at once). Returns whether a Job was created.
        """
        self._check_results(results, "a sweep")
        name = sweep.name
        cm_name = sweep_object_name(name)
        cm = self.applier.read("ConfigMap", cm_name, self.namespace)
        if cm is None:
            return self.start_sweep(sweep, results)
        notes = get(cm, "metadata", "annotations") or {}
        if sweep.growth and int(notes.get(ANNOTATION_GROWTH) or 0) <= len(sweep.growth):
            # never back to fewer steps (a racing call with an older sweep of record)
            self.applier.patch(
                "ConfigMap",
                cm_name,
                self.namespace,
                {"metadata": {"annotations": {ANNOTATION_GROWTH: str(len(sweep.growth))}},
                 "data": {CONFIG_KEY_GROWN: sweep.to_yaml()}},
            )  # fmt: skip
        options = dict(
            image=sweep.experiment.image or self.image,
            results=results,
            gpu_type=self.gpu_type,
            service_account=self.service_account,
            credentials_secret=self.credentials_secret,
            queue=self.queue,
            kubernetes_version=self.kubernetes_version(),
        )
        created = False
        covered = max(int(notes.get(ANNOTATION_TRIALS) or 0), int(notes.get(ANNOTATION_COVERED) or 0))
        new = list(range(covered, sweep.num_trials))
        if new:
            job = build_sweep_growth_job(sweep, new, f"g{new[0]}", namespace=self.namespace, **options)
            have = self.applier.create(job, compare=False)  # made by a call that crashed: its indices count
            from rlcloud.specs.sweep import parse_trial_indices

            ran = parse_trial_indices(str((get(have, "metadata", "annotations") or {}).get(ANNOTATION_TRIAL_INDICES)))
            covered = max(covered, max(ran) + 1)
            self.applier.patch("ConfigMap", cm_name, self.namespace,
                               {"metadata": {"annotations": {ANNOTATION_COVERED: str(covered)}}})  # fmt: skip
            logger.info("sweep %s grew: Job %s runs trials %s", name, object_name(have), new[0])
            created = True
        again = self._trials_to_run_again(sweep, run)
        if again:
            self._run_again(sweep, again, cm_name, int(notes.get(ANNOTATION_RERUNS) or 0), options)
            created = True
        self._forget_sweep(name)  # what it said of the trials run again is no longer so
        return created

    def _trials_to_run_again(self, sweep: SweepSpec, run: Sequence[str]) -> builtins.list[int]:
        """Indices of the trials named in ``run``, and of those that succeeded short of a budget a growth gave."""
        table = sweep.trials()
        wanted = set(run)
        longer = {t.name for step in sweep.growth for t in table if t.name in step.trials}
        store = self._sweep_store(sweep.name) if longer else None
        if store is not None:
            from rlcloud.storage import read_progress

            for trial in table:
                if trial.name in longer:
                    try:
                        progress = read_progress(store.child(trial.name))
                    except RLCloudError:
                        continue
                    if progress is not None and progress.done and not progress.done_at(trial.spec.total_timesteps):
                        wanted.add(trial.name)
        return [t.index for t in table if t.name in wanted]

    def _run_again(
        self, sweep: SweepSpec, indices: builtins.list[int], cm_name: str, reruns: int, options: dict[str, Any]
    ) -> None:
        """A Job ``<sweep>-sweep-r<N>`` that runs trials ``indices`` again (each resumes from its checkpoint).
        N counts the sweep's reruns (on its ConfigMap); a Job of that number for the same trials (a call that
        crashed) is taken as it is."""
        from rlcloud.specs.sweep import trial_indices_text

        text = trial_indices_text(indices)
        for number in range(reruns + 1, reruns + 100):
            job = build_sweep_growth_job(sweep, indices, f"r{number}", namespace=self.namespace, **options)
            have = self.applier.create(job, compare=False)
            if (get(have, "metadata", "annotations") or {}).get(ANNOTATION_TRIAL_INDICES) == text:
                break
        else:
            raise ConflictError(f"sweep {sweep.name}: too many Jobs that run trials again; stop the sweep first")
        self.applier.patch("ConfigMap", cm_name, self.namespace,
                           {"metadata": {"annotations": {ANNOTATION_RERUNS: str(number)}}})  # fmt: skip
        logger.info("sweep %s: Job %s runs %d trial(s) again", sweep.name, object_name(have), len(indices))

    def sweep_status(self, name: str) -> SweepStatus:
        """Each trial's state and progress, in three Kubernetes requests whatever the number of trials: the
        Job (``completedIndexes``/``failedIndexes``, conditions), the ConfigMap (the sweep spec) and one list
        of the sweep's pods. Progress comes from the results store: every call for running trials, once for
        finished ones (kept in this object)."""
        job = self.applier.read("Job", sweep_object_name(name), self.namespace)
        config = self._sweep_config(name)
        if config is None:
            if job is None:
                raise NotFoundError(self._unknown_sweep(name))
            raise NotFoundError(f"sweep {name}: its ConfigMap {sweep_object_name(name)} is gone; stop the sweep")
        sweep, _root = config
        pods = (
            self.applier.list_items(
                "Pod", self.namespace, label_selector=sweep_selector(name), what=f"list Pods of {name}"
            )
            if job is not None
            else []
        )
        table = sweep.trial_table()
        first, others = self._sweep_jobs(name, len(table))
        if others:
            # the sweep grew or ran trials again: Jobs beside its first, each over some trials (none on an
            # ungrown sweep: then this costs no request)
            return self._grown_status(name, sweep, table, job, first, others, pods)
        sharing = warm_pods(job, len(table))
        if job is not None and sharing is not None:
            return self._warm_status(name, sweep, table, job, sharing)
        observed = trial_states(job, pods, len(table))
        progress = self._trial_progress(
            name, [(trial_name, seen.state) for (trial_name, _p, _s), seen in zip(table, observed, strict=True)]
        )
        trials: list[TrialStatus] = []
        for index, ((trial_name, params, seed), seen) in enumerate(zip(table, observed, strict=True)):
            got = progress.get(trial_name, ProgressRecord())
            state: TrialState
            reason = seen.reason
            if job is None:  # stopped, or deleted after ttlSecondsAfterFinished: the store knows the rest
                state = _state_on_record(got)
                reason = got.stop_reason or (None if state != "stopped" else "the sweep's Job is gone")
            elif seen.state in ("succeeded", "failed", "stopped"):
                state = trial_state(seen.state, got)
                reason = got.stop_reason or reason
            else:
                state = seen.state  # type: ignore[assignment]  # queued/pending/running: TrialState values
            trials.append(TrialStatus(index, trial_name, params, seed, state, got, reason, restarts=seen.restarts))
        overall_state, message = _sweep_overall(job, trials)
        return SweepStatus(
            name=name,
            state=overall_state,
            trials=trials,
            message=message,
            backend=self.kind,
            cost_usd=measured_cost(job) if job is not None else None,
        )

    def _warm_status(
        self,
        name: str,
        sweep: SweepSpec,
        table: builtins.list[tuple[str, dict[str, Any], int]],
        job: JSON,
        sharing: int,
    ) -> SweepStatus:
        """The status of trials ``table`` run by a warm Job (pods run several trials each): the store says what
        became of each, read as far as each pod got (rlcloud.k8s.warm)."""
        uid = get(job, "metadata", "uid")

        def read(batch: list[str]) -> dict[str, ProgressRecord]:
            # read as running trials' are (never kept), then kept once final for this Job: a runner's
            # "failed" may be a crash its pod tries again
            got = self._trial_progress(name, [(trial_name, "running") for trial_name in batch])
            for trial_name, progress in got.items():
                if warm_final(progress, uid):
                    self._finished_progress[(name, trial_name)] = progress
            return got

        names = [trial_name for trial_name, _p, _s in table]
        shared = read_shares(names, sharing, read, job_uid=uid, claiming=claiming(job))
        return warm_sweep_status(
            name,
            job,
            table,
            shared,
            max_failures=sweep.max_failures,
            smoke_timesteps=sweep.smoke_timesteps,
            backend=self.kind,
        )

    def _sweep_jobs(self, name: str, trials: int) -> tuple[int, builtins.list[tuple[JSON, builtins.list[int]]]]:
        """How many trials the sweep's first Job runs, and its other Jobs (oldest first) with the trials each
        runs. Lists Jobs only when the ConfigMap says there are others (it counts them: cached by version)."""
        from rlcloud.specs.sweep import parse_trial_indices

        notes = self._sweep_notes.get(name) or {}
        first = int(notes.get(ANNOTATION_TRIALS) or trials)
        if not (notes.get(ANNOTATION_COVERED) or notes.get(ANNOTATION_RERUNS)):
            return first, []
        jobs = self.applier.list_items("Job", self.namespace, label_selector=sweep_selector(name),
                                       what=f"list Jobs of {name}")  # fmt: skip
        others = []
        for job in jobs:
            text = (get(job, "metadata", "annotations") or {}).get(ANNOTATION_TRIAL_INDICES)
            if text and not get(job, "metadata", "deletionTimestamp"):
                indices = [i for i in parse_trial_indices(str(text)) if i < trials]
                others.append((job, indices))
        others.sort(key=lambda pair: (str(get(pair[0], "metadata", "creationTimestamp") or ""), object_name(pair[0])))
        return min(first, trials), others

    def _grown_status(
        self,
        name: str,
        sweep: SweepSpec,
        table: builtins.list[tuple[str, dict[str, Any], int]],
        job: JSON | None,
        first: int,
        others: builtins.list[tuple[JSON, builtins.list[int]]],
        pods: builtins.list[JSON],
    ) -> SweepStatus:
        """The status of a sweep with Jobs beside its first: each trial as the latest Job that runs it sees it
        (a trial run again is its rerun Job's), its first Job's own trials as :meth:`sweep_status` reads them."""
        from rlcloud.k8s.status import TrialObserved

        def pods_of(job_name: str) -> builtins.list[JSON]:
            return [
                p for p in pods if labels(p).get("batch.kubernetes.io/job-name", labels(p).get("job-name")) == job_name
            ]

        first_name = sweep_object_name(name)
        observed: dict[int, tuple[TrialObserved, JSON | None]] = {}  # index -> what its latest Job says, that Job
        warm: dict[int, TrialStatus] = {}
        sharing = warm_pods(job, first) if job is not None else None
        if job is not None and sharing is not None:  # the first Job's pods run several trials each
            warm = {t.index: t for t in self._warm_status(name, sweep, table[:first], job, sharing).trials}
        else:
            observed = {i: (seen, job) for i, seen in enumerate(trial_states(job, pods_of(first_name), first))}
        for other, indices in others:
            seen_here = trial_states(other, pods_of(object_name(other)), len(indices))
            for index, seen in zip(indices, seen_here, strict=True):
                observed[index] = (seen, other)
                warm.pop(index, None)
        queued = (TrialObserved("queued"), None)  # no Job runs it yet
        cold = [i for i in range(len(table)) if i not in warm]
        progress = self._trial_progress(name, [(table[i][0], observed.get(i, queued)[0].state) for i in cold])
        trials: builtins.list[TrialStatus] = []
        for index, (trial_name, params, seed) in enumerate(table):
            if index in warm:
                trials.append(warm[index])
                continue
            seen, by = observed.get(index, queued)
            got = progress.get(trial_name, ProgressRecord())
            state: TrialState
            reason = seen.reason
            if by is None:
                state = _state_on_record(got) if got.state else "queued"
                reason = got.stop_reason
            elif seen.state in ("succeeded", "failed", "stopped"):
                state = trial_state(seen.state, got)
                reason = got.stop_reason or reason
            else:
                state = seen.state  # type: ignore[assignment]  # queued/pending/running: TrialState values
            trials.append(TrialStatus(index, trial_name, params, seed, state, got, reason, restarts=seen.restarts))
        live = [j for j in [job, *(o for o, _i in others)] if j is not None and not job_finished(j)]
        overall_state: ExperimentState
        if live:  # the newest Job still at work says how the sweep goes
            overall_state, message = _sweep_overall(live[-1], trials)
        elif all(t.finished for t in trials):  # every Job has ended: the trials say how the sweep ended
            failed = sum(1 for t in trials if t.state == "failed")
            overall_state = "failed" if failed else "succeeded"
            message = f"{failed} of {len(trials)} trials failed" if failed else None
        else:
            overall_state, message = _sweep_overall(None, trials)
        return SweepStatus(name=name, state=overall_state, trials=trials, message=message, backend=self.kind,
                           cost_usd=measured_cost(job) if job is not None else None)  # fmt: skip

    def stop_sweep(self, name: str) -> None:
        """Delete the sweep's Job in the foreground (running trials get SIGTERM and checkpoint; no new trial
        starts) and its ConfigMap, then wait until its pods are gone. Idempotent. Starting the sweep again
        later keeps the trials that finished and resumes the others from their checkpoints."""
        selector = sweep_selector(name)
        self.applier.delete_collection("Job", self.namespace, label_selector=selector, propagation="Foreground")
        self.applier.delete_collection("ConfigMap", self.namespace, label_selector=selector)
        self._forget_sweep(name)
        self._sweep_configs.pop(name, None)
        deadline = time.monotonic() + self.stop_timeout
        live: builtins.list[JSON] = []

        def gone() -> bool | None:
            pods = self.applier.list_items("Pod", self.namespace, label_selector=selector, what=f"list Pods of {name}")
            live[:] = [p for p in pods if is_live(p)]
            return True if not live else None

        if poll_until(gone, deadline, interval=self.poll_interval) is None:
            raise WaitTimeoutError(
                f"{len(live)} pod(s) of sweep {name} still running after the wait: "
                + ", ".join(object_name(p) for p in live[:5])
            )

    def list_sweeps(self) -> builtins.list[str]:
        """Names of the sweeps in the namespace (from their ConfigMaps)."""
        cms = self.applier.list_items(
            "ConfigMap",
            self.namespace,
            label_selector=f"{sweep_selector()},{LABEL_ROLE}={CONFIG_ROLE}",
            what="list sweeps",
        )
        return sorted({labels(cm).get(LABEL_SWEEP, "") for cm in cms} - {""})

    def attach_sweep(self, name: str) -> tuple[SweepSpec, str]:
        """The spec and results root of a sweep, rebuilt from its ConfigMap (from any machine)."""
        config = self._sweep_config(name)
        if config is None:
            raise NotFoundError(self._unknown_sweep(name))
        sweep, root = config
        return sweep, root or sweep.results or sweep.experiment.results or ""

    def _create_sweep_object(self, obj: Any, name: str) -> None:
        try:
            self.applier.create(obj)
        except ConflictError as exc:
            raise ConflictError(self._sweep_conflict(name)) from exc

    def _sweep_conflict(self, name: str) -> str:
        return (
            f"a sweep {name!r} with a different spec is in namespace {self.namespace}: stop it first "
            f"(Sweep.attach({name!r}, cluster=...).stop() or `rlcloud sweep stop {name}`; finished trials are "
            "kept), or give the new sweep another name"
        )

    def _unknown_sweep(self, name: str) -> str:
        try:
            known = self.list_sweeps()
        except RLCloudError:
            known = []
        hint = f"; sweeps there: {', '.join(known)}" if known else ""
        return f"no sweep {name!r} in namespace {self.namespace}{hint}"

    def _sweep_config(self, name: str) -> tuple[SweepSpec, str] | None:
        """The sweep spec and results root from its ConfigMap (read every time: one request; parsed once
        per version of it)."""
        cm = self.applier.read("ConfigMap", sweep_object_name(name), self.namespace)
        if cm is None:
            self._sweep_configs.pop(name, None)
            return None
        notes = get(cm, "metadata", "annotations") or {}
        self._sweep_notes[name] = dict(notes)
        key = notes.get(ANNOTATION_CONFIG_HASH) or get(cm, "metadata", "resourceVersion")
        if notes.get(ANNOTATION_GROWTH) or notes.get(ANNOTATION_RERUNS):
            # grown or run again: each change is a new version (and what was final may run again)
            key = f"{key}@{get(cm, 'metadata', 'resourceVersion')}"
        cached = self._sweep_configs.get(name)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        data = cm.get("data") or {}
        if CONFIG_KEY_GROWN in data:  # the sweep as it grew (its first Job's pods read the key below, unchanged)
            data = {**data, CONFIG_KEY_SWEEP: data[CONFIG_KEY_GROWN]}
        if CONFIG_KEY_SWEEP not in data:
            raise NotFoundError(
                f"ConfigMap {sweep_object_name(name)} holds no {CONFIG_KEY_SWEEP}: not an rlcloud sweep"
            )
        from rlcloud.specs.sweep import SweepSpec

        sweep = SweepSpec.from_yaml_text(data[CONFIG_KEY_SWEEP])
        root = str(data.get(CONFIG_KEY_RESULTS) or "")
        if cached is not None:
            self._forget_sweep(name)  # another sweep of that name: its trials' progress is not this one's
        self._sweep_configs[name] = (key, sweep, root)
        return sweep, root

    def _forget_sweep(self, name: str) -> None:
        self._sweep_stores.pop(name, None)
        self._finished_progress = {k: v for k, v in self._finished_progress.items() if k[0] != name}

    def _trial_progress(self, name: str, trials: builtins.list[tuple[str, str]]) -> dict[str, ProgressRecord]:
        """progress.json of the trials that have one to read: running ones (fresh), finished ones (once).

        ``trials``: (trial name, observed state). One listing of the sweep's progress records, then small
        reads in parallel, or none for a finished trial whose record is in the object cache
        (:func:`rlcloud.storage.runs.read_trials_progress`); none goes to the Kubernetes API.
        """
        out: dict[str, ProgressRecord] = {}
        todo: builtins.list[tuple[str, bool]] = []
        for trial_name, state in trials:
            cached = self._finished_progress.get((name, trial_name))
            if cached is not None:
                out[trial_name] = cached
            elif state in ("running", "succeeded", "failed", "stopped"):
                todo.append((trial_name, state != "running"))
        if not todo:
            return out
        store = self._sweep_store(name)
        if store is None:
            return out

        from rlcloud.storage.runs import read_trials_progress

        try:  # one listing of the sweep's progress records, then reads (a finished trial's from the cache)
            found = read_trials_progress(store, [t for t, _ in todo])
        except RLCloudError as exc:
            logger.debug("progress of sweep %s unreadable: %s", name, exc)
            found = {}
        results = [found.get(t, ProgressRecord()) for t, _ in todo]
        for (trial_name, finished), got in zip(todo, results, strict=True):
            out[trial_name] = got
            # a finished trial's progress no longer changes, but one that has none yet (its last sync still
            # on the way) is asked again next time
            if finished and got.state in FINAL_STATES:
                self._finished_progress[(name, trial_name)] = got
        return out

    def _sweep_store(self, name: str) -> Store | None:
        if name not in self._sweep_stores:
            config = self._sweep_configs.get(name)
            store = self._open_store(config[2] if config is not None else None, name)
            if store is None:
                return None
            self._sweep_stores[name] = store
        return self._sweep_stores[name]

    def _check_queue(self, queue: str) -> None:
        """Refuse (SpecError on ``queue``) a Kueue LocalQueue that does not exist in the namespace, or a
        cluster without Kueue: the sweep's Job would stay suspended forever. A 403 (the identity may not
        read LocalQueues) only warns: the queue may well exist."""
        what = f"read Kueue LocalQueue {queue}"
        try:
            self.applier.request_json(what, "GET", path_for("LocalQueue", self.namespace, queue))
            return
        except k8s.ApiException as exc:
            if exc.status == 403:
                logger.warning(
                    "cannot check that Kueue LocalQueue %s exists (%s); submitting anyway", queue, exc.reason
                )
                return
            if exc.status != 404:
                raise translate(exc, what) from exc
            details = _status_details(exc)
        if details.get("name") == queue:  # the API exists, the object does not
            message = (
                f"no Kueue LocalQueue {queue!r} in namespace {self.namespace}: a sweep submitted to it would wait "
                f"suspended forever. See `kubectl -n {self.namespace} get localqueues`, create it, or leave queue "
                "empty to run without Kueue"
            )
        else:
            message = (
                f"this cluster does not serve Kueue's LocalQueues ({KUEUE_API}): install Kueue "
                "(kueue.sigs.k8s.io/docs/installation/) or leave queue empty to run without it"
            )
        raise SpecError([SpecProblem("queue", message, queue)])


def _status_details(exc: k8s.ApiException) -> dict[str, Any]:
    """The ``details`` of an error's Status body ({} when it has none: e.g. an API group not served)."""
    import json

    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return {}
    details = body.get("details") if isinstance(body, dict) else None
    return details if isinstance(details, dict) else {}


def _state_on_record(progress: ProgressRecord) -> TrialState:
    """A trial's state when its sweep's Job is gone: what its progress.json says it came to."""
    recorded = progress.state
    if progress.stopped_early:
        return "stopped early"
    if recorded in ("succeeded", "failed"):
        return cast(TrialState, recorded)
    return "stopped"


def _sweep_overall(job: JSON | None, trials: builtins.list[TrialStatus]) -> tuple[ExperimentState, str | None]:
    """The sweep's state and a one-line message, from its Job (None: gone) and its trials."""
    failed = sum(1 for t in trials if t.state == "failed")
    if job is None:
        if trials and all(t.state in ("succeeded", "stopped early", "failed") for t in trials):
            return (
                "failed" if failed else "succeeded"
            ), "the sweep's Job has been cleaned up; results are in the store"
        return "stopped", "the sweep's Job is gone: start the sweep again to run the trials that did not finish"
    finished = job_finished(job)
    if finished == "succeeded":
        return "succeeded", None
    if finished == "failed":
        reason = next(
            (c.get("reason") for c in job.get("status", {}).get("conditions") or [] if c.get("type") == "Failed"), None
        )
        if reason == "MaxFailedIndexesExceeded":
            limit = int(job.get("spec", {}).get("maxFailedIndexes") or 0) + 1
            left = sum(1 for t in trials if t.state in ("queued", "stopped"))
            return "failed", (
                f"stopped after {failed} failed trials (max_failures {limit}): fix what they failed of "
                f"(`rlcloud sweep status` names each reason); {left} trials did not run"
            )
        return "failed", f"{failed} of {len(trials)} trials failed" if failed else None
    if is_suspended(job):
        stopped = budget_stop(job)  # the in-cluster reaper stopped it: its budget is spent
        if stopped:
            return "stopped", stopped
        queue = labels(job).get(KUEUE_QUEUE_LABEL)
        if queue:
            return "pending", f"waiting for Kueue to admit the sweep (queue {queue})"
        return "pending", "the sweep's Job is suspended"
    if any(t.state == "running" for t in trials):
        return "running", (f"{failed} trial(s) failed" if failed else None)
    pending = next((t for t in trials if t.state == "pending" and t.reason), None)
    return "pending", (f"{pending.name}: {pending.reason}" if pending else None)
