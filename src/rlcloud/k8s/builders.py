"""Pure builders: an ExperimentSpec becomes the Kubernetes objects that run it. No API call here.

What :func:`build_workloads` returns, per run mode (the same number of objects for 1 or 1000 workers)::

    single          ConfigMap <name>-spec, Job <name>-single
    multi-threaded  ConfigMap <name>-spec, Job <name>-multi            (one pod steps num_workers envs)
    distributed     ConfigMap <name>-spec, headless Service <name>-env,
                    Indexed Job <name>-env (num_workers env-server pods <name>-env-<i>.<name>-env),
                    Job <name>-agent (the learner, dialling every env server)

and :func:`build_sweep_workloads` for a sweep of any number of trials: ConfigMap ``<sweep>-sweep`` (the
sweep spec) and Indexed Job ``<sweep>-sweep`` (pod ``i`` runs trial ``i``).

With ``gpu_type`` the learner requests GPUs on nodes of that type (toleration + node selector); pods
that use no GPU (env servers, a learner given ``gpus: 0``) do not tolerate the GPU nodes' taint and
prefer the CPU pool (node label ``rlcloud-pool=system``), and env servers run ``env_server_image`` (the
CPU image) when one is given. Every container requests CPU and memory: the spec's ``resources`` (request
= limit) or rlcloud's default request (:data:`~rlcloud.specs.experiment.DEFAULT_LEARNER_REQUESTS`,
:data:`~rlcloud.specs.experiment.DEFAULT_ENV_SERVER_REQUESTS`), so that a pod that does not fit goes
Pending and the cluster autoscaler adds a node for it.

Every pod runs ``python -m rlcloud.runner --role R --index I --spec /etc/rlcloud/spec.yaml --workdir
/var/lib/rlcloud/work`` as an argv list: no shell, and nothing user-controlled in the arguments. The
env-server index comes from the Job's completion-index annotation through the downward API and
Kubernetes' own ``$(VAR)`` expansion. User-controlled environment values (the results location) have
``$`` doubled so that expansion leaves them as they were.

Failure policy (every Job, ``restartPolicy: Never``): a pod lost to preemption or eviction (the
``DisruptionTarget`` condition) is ignored and replaced without spending the backoff budget; exit
code 2 (spec error) or 3 (environment/agent construction error) fails the whole Job at once, and so
does 89 (the learner stalled again after a restart for a stall, rlcloud.runner.watchdog); a first
stall (88) and other crashes are retried (the learner ``backoffLimit`` times, each env server
``backoffLimitPerIndex`` times). Env servers exit 0 when the agent says the run is finished or has
been gone for 15 minutes, so their Job completes; from Kubernetes 1.31 a ``successPolicy`` also ends
it when any env server has finished. Finished Jobs are deleted after ``ttlSecondsAfterFinished``.

Stalls: an experiment's containers have an exec ``livenessProbe`` over their heartbeat file (the env
server's request loop; the learner's watchdog): an env server that stopped answering is killed and
its pod replaced after ``stall_timeout`` (the agent reconnects to it), a learner whose watchdog
cannot run either (a hang that holds the GIL) a little later. A sweep's pods have the learner's probe;
a warm sweep pod's heartbeat lives as long as the pod (see :func:`_warm_sweep_job`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, TypeVar

from kubernetes import client as k8s

from rlcloud import runenv
from rlcloud.budget import ANNOTATION_BUDGET
from rlcloud.config import DEFAULT_IMAGE  # one default image for the whole package (docs/images.md)
from rlcloud.errors import SpecError, SpecProblem
from rlcloud.results import results_location
from rlcloud.roles import Role, learner_role
from rlcloud.runenv import GPU_MEMORY_MB, RunnerEnv
from rlcloud.runner.watchdog import (
    EXIT_STALLED,
    EXIT_STALLED_AGAIN,
    LIVENESS_MARGIN_S,
    liveness_command,
    startup_command,
)
from rlcloud.specs.experiment import DEFAULT_ENV_SERVER_REQUESTS, DEFAULT_LEARNER_REQUESTS

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec, Resources
    from rlcloud.specs._base import Usd
    from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "ANNOTATION_CONFIG_HASH",
    "ANNOTATION_GROWTH",
    "ANNOTATION_TRIAL_INDICES",
    "CONFIG_KEY_GROWN",
    "CONFIG_KEY_RESULTS",
    "CONFIG_KEY_SPEC",
    "CONFIG_KEY_SWEEP",
    "DEFAULT_IMAGE",
    "ENV_SERVER_PORT",
    "LABEL_EXPERIMENT",
    "LABEL_MANAGED_BY",
    "LABEL_ROLE",
    "LABEL_SWEEP",
    "MANAGED_BY",
    "RUNNER_SERVICE_ACCOUNT",
    "SWEEP_HALTED_EXIT_CODE",
    "SWEEP_RESULTS_ENV",
    "WORKDIR",
    "budget_annotations",
    "build_credentials_secret",
    "build_namespace",
    "build_namespace_objects",
    "build_role",
    "build_role_binding",
    "build_service_account",
    "build_sweep_growth_job",
    "build_sweep_workloads",
    "build_workloads",
    "config_hash",
    "config_map_name",
    "env_server_hosts",
    "experiment_selector",
    "job_names",
    "labels_for",
    "sweep_labels",
    "sweep_object_name",
    "sweep_selector",
    "sweep_yaml",
    "to_dict",
]

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "rlcloud"
LABEL_EXPERIMENT = "rlcloud.io/experiment"
LABEL_ROLE = "rlcloud.io/role"
#: a sweep's objects carry this label (and never LABEL_EXPERIMENT)
LABEL_SWEEP = "rlcloud.io/sweep"
#: the Kueue LocalQueue a Job is submitted to
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ANNOTATION_TRIALS = "rlcloud.io/num-trials"
#: the role label of a sweep's Job and pods
TRIAL_ROLE = "trial"
#: the environment variable that tells a sweep's pod where the sweep's results go (``<root>/<sweep>``)
SWEEP_RESULTS_ENV = runenv.SWEEP_RESULTS
#: trials run at once when the sweep does not say (the Job controller creates pods in batches anyway)
DEFAULT_SWEEP_PARALLELISM = 100
MAX_INT32 = 2**31 - 1
#: hash of what rlcloud asked for (without server defaults): start() compares it on 409
ANNOTATION_CONFIG_HASH = "rlcloud.io/config-hash"
ANNOTATION_WORKERS = "rlcloud.io/num-workers"

CONFIG_KEY_SPEC = "spec.yaml"
CONFIG_KEY_SWEEP = "sweep.yaml"
#: the sweep's ConfigMap key holding the sweep as it grew (rlcloud sweep extend): what its growth Jobs' pods read;
#: the first Job's pods read CONFIG_KEY_SWEEP, never changed once created
CONFIG_KEY_GROWN = "grown.yaml"
#: on a Job that grows a sweep: the trial indices its completion indices run ("6-11,14", in order)
ANNOTATION_TRIAL_INDICES = "rlcloud.io/trial-indices"
#: on a sweep's ConfigMap: growth steps in CONFIG_KEY_GROWN, trials that have a Job, Jobs that ran trials again
ANNOTATION_GROWTH = "rlcloud.io/growth-steps"
ANNOTATION_COVERED = "rlcloud.io/trials-with-jobs"
ANNOTATION_RERUNS = "rlcloud.io/reruns"
CONFIG_KEY_RESULTS = "results"
CONTAINER = "runner"
SPEC_DIR = "/etc/rlcloud"
WORKDIR_MOUNT = "/var/lib/rlcloud"
WORKDIR = f"{WORKDIR_MOUNT}/work"
CREDENTIALS_DIR = "/var/run/secrets/rlcloud/gcp"
CREDENTIALS_KEY = "key.json"
ENV_SERVER_PORT = 5000
#: the runner images' numeric user (images/*/Dockerfile: USER 10001:10001)
RUNNER_UID = 10001
RUNNER_SERVICE_ACCOUNT = "rlcloud-runner"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
#: the node label of rlcloud's GKE pools and the value of the CPU pool of a GPU cluster (rlcloud.gke.plan's
#: POOL_LABEL and "system" role; the k8s layer does not import gke)
POOL_LABEL = "rlcloud-pool"
CPU_POOL = "system"
GPU_RESOURCE = "nvidia.com/gpu"
WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"

TTL_SECONDS_AFTER_FINISHED = 3 * 24 * 3600  # status stays readable for a long weekend
LEARNER_BACKOFF_LIMIT = 4
ENV_SERVER_BACKOFF_PER_INDEX = 3
# SIGTERM -> the runner writes a checkpoint, uploads it, then exits 143. Honoured on stop/pause, node
# upgrades and scale-down; a Spot preemption cuts it to 15 s, which the DQN example's learner fits (its
# checkpoint is in the store ~7 s after SIGTERM: docs/troubleshooting.md); a larger replay memory may not.
LEARNER_GRACE_SECONDS = 120
ENV_SERVER_GRACE_SECONDS = 10
SPEC_ERROR_EXIT_CODES = [2, 3]
# On a cluster the agent and the env servers may start many minutes apart: a GPU node is created and
# gets its driver (up to ~15 min), CPU nodes are added by the autoscaler. The runner's defaults (agent
# waits 300 s for its env servers; they wait 900 s for an agent) suit processes on one machine.
CONNECT_TIMEOUT_SECONDS = 1800
IDLE_TIMEOUT_SECONDS = 3600

_Model = TypeVar("_Model")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CONFIG_ROLE = "config"


# ---------------------------------------------------------------------------------------------------
# names and labels


def config_map_name(experiment: str) -> str:
    """Name of the ConfigMap that holds an experiment's resolved spec."""
    return f"{experiment}-spec"


def env_server_name(experiment: str) -> str:
    """Name of the env-server Indexed Job and of its headless Service."""
    return f"{experiment}-env"


def job_names(spec: ExperimentSpec) -> dict[str, str]:
    """Job name per role, e.g. ``{"agent": "x-agent", "env-server": "x-env"}``."""
    role = learner_role(spec.run_mode).value
    names = {role: f"{spec.name}-{role}"}
    if spec.run_mode == "distributed":
        names[Role.ENV_SERVER.value] = env_server_name(spec.name)
    return names


def env_server_hosts(experiment: str, num_workers: int, port: int = ENV_SERVER_PORT) -> list[str]:
    """``host:port`` of each env server: ``<job>-<index>.<service>`` resolves through the headless Service."""
    base = env_server_name(experiment)
    return [f"{base}-{i}.{base}:{port}" for i in range(num_workers)]


def labels_for(experiment: str, role: str) -> dict[str, str]:
    """The labels every rlcloud object carries: state can be read back from the cluster alone."""
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_EXPERIMENT: experiment, LABEL_ROLE: role}


def experiment_selector(experiment: str | None = None) -> str:
    """Label selector for one experiment's objects (or all rlcloud objects when ``experiment`` is None)."""
    selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
    return f"{selector},{LABEL_EXPERIMENT}={experiment}" if experiment else selector


_SERIALIZER: k8s.ApiClient | None = None


def to_dict(obj: Any) -> Any:
    """A kubernetes model object as the JSON the API server receives (camelCase keys, no None values)."""
    global _SERIALIZER
    if _SERIALIZER is None:  # one, reused: an ApiClient builds a connection pool
        _SERIALIZER = k8s.ApiClient()
    return _SERIALIZER.sanitize_for_serialization(obj)


def config_hash(obj: Any) -> str:
    """A short, stable hash of what rlcloud asks for (the object without the hash annotation itself).

    Server-side defaults never enter it, so it tells "the same experiment" from "a different one" when a
    create answers 409. Jobs' ``suspend`` is left out: a paused experiment is still the same one; so is the
    budget annotation (a run stopped by its budget is resumed with a larger one: the backend updates it).
    """
    data = to_dict(obj)
    meta = data.get("metadata", {})
    left_out = (ANNOTATION_CONFIG_HASH, ANNOTATION_BUDGET)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in left_out}
    data = {**data, "metadata": {**meta, "annotations": annotations}}
    if data.get("kind") == "Job":
        data["spec"] = {k: v for k, v in data["spec"].items() if k != "suspend"}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:20]


def _stamp(obj: _Model) -> _Model:
    """Set the config-hash annotation on a freshly built object and return it."""
    model: Any = obj  # every kubernetes model with metadata; they share no base class to name
    model.metadata.annotations = {**(model.metadata.annotations or {}), ANNOTATION_CONFIG_HASH: config_hash(obj)}
    return obj


def _k8s_version(value: str) -> tuple[int, int]:
    try:
        major, minor = value.lstrip("v").split(".")[:2]
        return int(major), int("".join(ch for ch in minor if ch.isdigit()))
    except ValueError as exc:
        raise SpecError([SpecProblem("kubernetes_version", "expected MAJOR.MINOR such as '1.30'", value)]) from exc


def _escape(value: str) -> str:
    """Kubernetes expands ``$(VAR)`` in env values and args; ``$$`` keeps a user's ``$`` literal."""
    return value.replace("$", "$$")


# ---------------------------------------------------------------------------------------------------
# namespace, identity, RBAC


def build_namespace(namespace: str) -> k8s.V1Namespace:
    """The namespace rlcloud runs experiments in (created when missing)."""
    return k8s.V1Namespace(
        api_version="v1",
        kind="Namespace",
        metadata=k8s.V1ObjectMeta(name=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
    )


def build_service_account(
    namespace: str,
    *,
    name: str = RUNNER_SERVICE_ACCOUNT,
    gcp_service_account: str | None = None,
) -> k8s.V1ServiceAccount:
    """The ServiceAccount the pods run as; with ``gcp_service_account`` (an email) it is annotated for
    GKE Workload Identity, so pods reach GCS as that Google service account without any key."""
    annotations = {WORKLOAD_IDENTITY_ANNOTATION: gcp_service_account} if gcp_service_account else None
    return k8s.V1ServiceAccount(
        api_version="v1",
        kind="ServiceAccount",
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels={LABEL_MANAGED_BY: MANAGED_BY},
            annotations=annotations,
        ),
        # pods never call the Kubernetes API; Workload Identity does not need the token either
        automount_service_account_token=False,
    )


def build_role(namespace: str, *, name: str = RUNNER_SERVICE_ACCOUNT) -> k8s.V1Role:
    """A Role limited to the namespace: read-only access to the experiment's own kinds of objects."""
    return k8s.V1Role(
        api_version="rbac.authorization.k8s.io/v1",
        kind="Role",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
        rules=[
            k8s.V1PolicyRule(api_groups=[""], resources=["pods", "configmaps"], verbs=["get", "list", "watch"]),
            k8s.V1PolicyRule(api_groups=["batch"], resources=["jobs"], verbs=["get", "list", "watch"]),
        ],
    )


def build_role_binding(
    namespace: str, *, name: str = RUNNER_SERVICE_ACCOUNT, service_account: str = RUNNER_SERVICE_ACCOUNT
) -> k8s.V1RoleBinding:
    """Binds :func:`build_role` to the runner's ServiceAccount, in the namespace only."""
    return k8s.V1RoleBinding(
        api_version="rbac.authorization.k8s.io/v1",
        kind="RoleBinding",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
        role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=name),
        subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name=service_account, namespace=namespace)],
    )


def build_namespace_objects(
    namespace: str, *, service_account: str = RUNNER_SERVICE_ACCOUNT, gcp_service_account: str | None = None
) -> list[Any]:
    """Namespace, ServiceAccount, Role and RoleBinding, in creation order."""
    return [
        build_namespace(namespace),
        build_service_account(namespace, name=service_account, gcp_service_account=gcp_service_account),
        build_role(namespace, name=service_account),
        build_role_binding(namespace, name=service_account, service_account=service_account),
    ]


def build_credentials_secret(namespace: str, key_json: bytes | str, *, name: str = "rlcloud-gcp-key") -> k8s.V1Secret:
    """A Secret holding a Google service-account key file, for clusters without Workload Identity.

    The key only ever lives in this Secret; pods mount it read-only and get the file's *path* in
    ``GOOGLE_APPLICATION_CREDENTIALS``. Never log or print the returned object.
    """
    text = key_json.decode() if isinstance(key_json, bytes) else key_json
    return k8s.V1Secret(
        api_version="v1",
        kind="Secret",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels={LABEL_MANAGED_BY: MANAGED_BY}),
        type="Opaque",
        string_data={CREDENTIALS_KEY: text},
    )


# ---------------------------------------------------------------------------------------------------
# workloads


def _resources(res: Resources, gpus: int, defaults: dict[str, str]) -> k8s.V1ResourceRequirements:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    for key in ("cpu", "memory"):
        given = getattr(res, key)
        if given:
            # requests = limits: a learner sharing a node with noisy neighbours makes runs irreproducibly slow
            requests[key] = limits[key] = given
        else:
            # a request only: the scheduler and the autoscaler count it, and no default throttles or kills
            requests[key] = defaults[key]
    if gpus:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(gpus)  # extended resources: request = limit
    return k8s.V1ResourceRequirements(requests=requests, limits=limits or None)


def _cpu_pool_affinity() -> k8s.V1Affinity:
    """A preference (not a requirement) for the CPU pool's nodes: kept off the GPU nodes while it has room,
    and the autoscaler grows that pool for what does not fit."""
    term = k8s.V1NodeSelectorTerm(
        match_expressions=[k8s.V1NodeSelectorRequirement(key=POOL_LABEL, operator="In", values=[CPU_POOL])]
    )
    return k8s.V1Affinity(
        node_affinity=k8s.V1NodeAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                k8s.V1PreferredSchedulingTerm(weight=100, preference=term)
            ]
        )
    )


def _failure_policy(spec_error_action: str | None = "FailJob") -> k8s.V1PodFailurePolicy:
    rules = [
        # preemption, eviction, node drain: not the experiment's fault, do not spend the budget
        k8s.V1PodFailurePolicyRule(
            action="Ignore",
            on_pod_conditions=[k8s.V1PodFailurePolicyOnPodConditionsPattern(type="DisruptionTarget", status="True")],
        ),
    ]
    if spec_error_action is not None:
        # the spec or the environment is wrong: every retry would fail the same way
        rules.append(
            k8s.V1PodFailurePolicyRule(
                action=spec_error_action,
                on_exit_codes=k8s.V1PodFailurePolicyOnExitCodesRequirement(
                    container_name=CONTAINER, operator="In", values=list(SPEC_ERROR_EXIT_CODES)
                ),
            )
        )
        # the learner stalled again after its restart for a stall (rlcloud.runner.watchdog): a third start
        # would hang the same way. Its first stall (EXIT_STALLED) matches no rule: Count, a retry that
        # resumes from the checkpoint, like a crash.
        rules.append(
            k8s.V1PodFailurePolicyRule(
                action=spec_error_action,
                on_exit_codes=k8s.V1PodFailurePolicyOnExitCodesRequirement(
                    container_name=CONTAINER, operator="In", values=[EXIT_STALLED_AGAIN]
                ),
            )
        )
    return k8s.V1PodFailurePolicy(rules=rules)


def _liveness_probe(stall_timeout: float, margin: float = 0.0) -> k8s.V1Probe:
    """The exec livenessProbe over the pod's heartbeat file (rlcloud.runner.watchdog): the kubelet kills a
    container whose heartbeat is ``stall_timeout + margin`` seconds old, and the Job replaces its pod.

    Probe fields ("Configure Liveness, Readiness and Startup Probes", kubernetes.io/docs/tasks/
    configure-pod-container/configure-liveness-readiness-startup-probes/): the container is restarted after
    ``failureThreshold`` failures in a row, one every ``periodSeconds``; with ``restartPolicy: Never`` the pod
    fails instead, and the Job controller creates a new one. Two failures, so that one probe slowed by a busy
    node (a Python start) does not kill a healthy container.
    """
    period = max(1, min(10, int(stall_timeout // 4) or 1))
    return k8s.V1Probe(
        # the model's field is `var_exec`, but only its alias `_exec` reaches the manifest (kubernetes 37)
        _exec=k8s.V1ExecAction(command=liveness_command(WORKDIR, stall_timeout + margin)),  # type: ignore[call-arg]
        period_seconds=period,
        timeout_seconds=10,
        failure_threshold=2,
    )


#: Seconds a warm sweep pod's runner gets from its container's start to its first heartbeat (its startupProbe:
#: Python's start and rlcloud's light imports take a few seconds; the heavy ones come after the first beat).
STARTUP_PROBE_SECONDS = 300
#: Seconds between two runs of that startupProbe.
STARTUP_PROBE_PERIOD = 5


def _startup_probe() -> k8s.V1Probe:
    """A warm sweep pod's exec startupProbe: succeeds once the pod's heartbeat exists (rlcloud.runner.watchdog
    PodHeartbeat, beaten from the runner's first second); a runner that never gets there (a hang in Python's
    start or imports) is killed after :data:`STARTUP_PROBE_SECONDS`.

    "Protect slow starting containers with startup probes" (kubernetes.io/docs/tasks/configure-pod-container/
    configure-liveness-readiness-startup-probes/): "liveness and readiness probes do not start until it
    succeeds"; "failureThreshold * periodSeconds long enough to cover the worst case startup time"; "If the
    startup probe never succeeds, the container is killed after [that] and subject to the pod's
    restartPolicy" (Never: the pod fails, a counted retry of the Job).
    """
    return k8s.V1Probe(
        _exec=k8s.V1ExecAction(command=startup_command(WORKDIR)),  # type: ignore[call-arg]
        period_seconds=STARTUP_PROBE_PERIOD,
        timeout_seconds=10,
        failure_threshold=STARTUP_PROBE_SECONDS // STARTUP_PROBE_PERIOD,
    )


def _pod_spec(
    *,
    role: str,
    index_arg: str,
    image: str,
    env: list[k8s.V1EnvVar],
    resources: k8s.V1ResourceRequirements,
    config_map: str,
    grace: int,
    service_account: str | None,
    credentials_secret: str | None,
    gpu_type: str | None,
    gpus: int,
    ports: list[k8s.V1ContainerPort] | None = None,
    subdomain: str | None = None,
    config_key: str = CONFIG_KEY_SPEC,
) -> k8s.V1PodSpec:
    # the runner reads an experiment's spec (--spec) or a sweep's (--sweep), mounted from the ConfigMap
    spec_flag = "--sweep" if config_key == CONFIG_KEY_SWEEP else "--spec"
    mounts = [
        k8s.V1VolumeMount(name="spec", mount_path=SPEC_DIR, read_only=True),
        k8s.V1VolumeMount(name="work", mount_path=WORKDIR_MOUNT),
    ]
    volumes = [
        k8s.V1Volume(
            name="spec",
            config_map=k8s.V1ConfigMapVolumeSource(
                name=config_map, items=[k8s.V1KeyToPath(key=config_key, path=config_key)]
            ),
        ),
        k8s.V1Volume(name="work", empty_dir=k8s.V1EmptyDirVolumeSource()),
    ]
    env = list(env)
    if credentials_secret:
        mounts.append(k8s.V1VolumeMount(name="gcp-credentials", mount_path=CREDENTIALS_DIR, read_only=True))
        volumes.append(
            k8s.V1Volume(
                name="gcp-credentials",
                secret=k8s.V1SecretVolumeSource(secret_name=credentials_secret, default_mode=0o400),
            )
        )
        # the path only: the key itself never appears in the environment
        env.append(k8s.V1EnvVar(name="GOOGLE_APPLICATION_CREDENTIALS", value=f"{CREDENTIALS_DIR}/{CREDENTIALS_KEY}"))
    container = k8s.V1Container(
        name=CONTAINER,
        image=image,
        image_pull_policy="IfNotPresent",
        command=["python", "-m", "rlcloud.runner"],
        args=["--role", role, "--index", index_arg, spec_flag, f"{SPEC_DIR}/{config_key}", "--workdir", WORKDIR],
        env=env,
        ports=ports,
        resources=resources,
        volume_mounts=mounts,
        security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False, capabilities=k8s.V1Capabilities(drop=["ALL"])
        ),
    )
    tolerations = None
    node_selector = None
    affinity = None
    if gpus:
        # only what uses a GPU may go to the (tainted, often Spot) GPU nodes
        tolerations = [k8s.V1Toleration(key=GPU_RESOURCE, operator="Equal", value="present", effect="NoSchedule")]
    if gpus and gpu_type:
        node_selector = {GKE_ACCELERATOR_LABEL: gpu_type}
    elif gpu_type:
        # no GPU on a GPU cluster: the on-demand CPU pool, which survives the GPU nodes' preemptions
        affinity = _cpu_pool_affinity()
    return k8s.V1PodSpec(
        restart_policy="Never",
        containers=[container],
        volumes=volumes,
        service_account_name=service_account,
        automount_service_account_token=False,
        # one env var per Service in the namespace would be injected otherwise; none is needed
        enable_service_links=False,
        termination_grace_period_seconds=grace,
        # non-root, and fsGroup so that this user can read the mounted key file (0400 would otherwise
        # leave it readable by root only)
        # with the container's settings this meets the Pod Security Standard "restricted", so namespaces
        # that enforce it (pod-security.kubernetes.io/enforce=restricted) admit the pods
        security_context=k8s.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=RUNNER_UID,
            run_as_group=RUNNER_UID,
            fs_group=RUNNER_UID,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
        tolerations=tolerations,
        node_selector=node_selector,
        affinity=affinity,
        subdomain=subdomain,
    )


def _job(
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    pod_spec: k8s.V1PodSpec,
    suspend: bool,
    annotations: dict[str, str] | None = None,
    indexed_workers: int | None = None,
    success_policy: bool = False,
    deadline: int | None = None,
) -> k8s.V1Job:
    spec = k8s.V1JobSpec(
        template=k8s.V1PodTemplateSpec(metadata=k8s.V1ObjectMeta(labels=dict(labels)), spec=pod_spec),
        pod_failure_policy=_failure_policy(),
        ttl_seconds_after_finished=TTL_SECONDS_AFTER_FINISHED,
        suspend=suspend,
        # max_runtime: the Job controller stops the pods and fails the Job (DeadlineExceeded) past it
        active_deadline_seconds=deadline,
    )
    if indexed_workers is None:
        spec.completions = 1
        spec.parallelism = 1
        spec.backoff_limit = LEARNER_BACKOFF_LIMIT
    else:
        spec.completion_mode = "Indexed"
        spec.completions = indexed_workers
        spec.parallelism = indexed_workers
        # each env server may crash a few times without failing the others
        spec.backoff_limit_per_index = ENV_SERVER_BACKOFF_PER_INDEX
        if success_policy:
            # the agent tells every env server to exit 0 when training is over: the first one done ends
            # the Job, so a straggler that missed the message cannot keep it (and a node) alive
            spec.success_policy = k8s.V1SuccessPolicy(rules=[k8s.V1SuccessPolicyRule(succeeded_count=1)])
    return _stamp(
        k8s.V1Job(
            api_version="batch/v1",
            kind="Job",
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels=dict(labels), annotations=annotations),
            spec=spec,
        )
    )


#: The most a ConfigMap may hold: its keys and values together ("ConfigMaps", kubernetes.io/docs/concepts/
#: configuration/configmap/: "The data stored in a ConfigMap cannot exceed 1 MiB"); the API server refuses
#: a larger one with 422.
MAX_CONFIG_MAP_BYTES = 1024 * 1024


def _check_config_map_size(name: str, data: dict[str, str], parts: dict[str, Any], field_prefix: str = "") -> None:
    """Refuse (SpecError naming the spec's largest part) data the API server would refuse, before anything
    is created. ``parts``: the spec as data, whose largest top-level entry the error names."""
    size = sum(len(key.encode()) + len(value.encode()) for key, value in data.items())
    if size <= MAX_CONFIG_MAP_BYTES:
        return
    sizes = {key: len(json.dumps(value, separators=(",", ":"))) for key, value in parts.items()}
    biggest = max(sizes, key=lambda key: sizes[key])
    raise SpecError(
        [
            SpecProblem(
                field_prefix + biggest,
                f"the spec takes {size:,} bytes in ConfigMap {name}, which carries it to the pods, and Kubernetes "
                f"allows at most {MAX_CONFIG_MAP_BYTES:,} bytes (1 MiB) there; its largest part is {biggest} "
                f"(~{sizes[biggest]:,} bytes): keep large data out of the spec (in the image, or a file your "
                "environment reads from the results store)",
            )
        ]
    )


def _config_map(
    name: str, namespace: str, labels: dict[str, str], annotations: dict[str, str], data: dict[str, str]
) -> k8s.V1ConfigMap:
    """The ConfigMap an experiment's or a sweep's pods read their spec from (stamped with its config hash)."""
    return _stamp(
        k8s.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels=labels, annotations=annotations),
            data=data,
        )
    )


def _check_inputs(spec: ExperimentSpec, namespace: str, image: str) -> None:
    problems = []
    if not isinstance(namespace, str) or len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        problems.append(
            SpecProblem("namespace", "must be a DNS-1123 label (lowercase letters, digits, '-')", namespace)
        )
    if not image or any(ch.isspace() for ch in image):
        problems.append(SpecProblem("image", "must be a container image reference such as 'repo/name:tag'", image))
    if problems:
        raise SpecError(problems)


def build_workloads(
    spec: ExperimentSpec,
    *,
    image: str | None = None,
    namespace: str,
    results: str | None = None,
    gpu_type: str | None = None,
    service_account: str | None = None,
    credentials_secret: str | None = None,
    suspend: bool = False,
    kubernetes_version: str = "1.29",
    env_server_image: str | None = None,
) -> list[Any]:
    """The Kubernetes objects that run ``spec``, in creation order; no API call is made.

    ``image``: the container image (default: ``spec.image``, else :data:`DEFAULT_IMAGE`). ``results``:
    the results ROOT (default ``spec.results``); the runner gets ``<root>/<name>`` in ``RLCLOUD_RESULTS``
    and the ConfigMap keeps the root for ``attach``. ``gpu_type`` (e.g. ``nvidia-tesla-t4``): the
    learner requests ``spec.resources.learner.gpus`` GPUs (default 1) on nodes of that type; without
    it the learner only gets GPUs if the spec asks for them. ``service_account``: the Kubernetes
    ServiceAccount pods run as (Workload Identity). ``credentials_secret``: a Secret (see
    :func:`build_credentials_secret`) mounted read-only instead. ``kubernetes_version``: the
    cluster's MAJOR.MINOR; fields only honoured by newer versions are left out on older ones.
    ``env_server_image``: the image of the env servers, which never use a GPU (the CPU image where
    ``image`` is the GPU one; default: ``image``).
    """
    image = image or spec.image or DEFAULT_IMAGE
    _check_inputs(spec, namespace, image)
    env_image = env_server_image or image
    if env_image != image:
        _check_inputs(spec, namespace, env_image)
    version = _k8s_version(kubernetes_version)
    results = results if results is not None else spec.results
    name = spec.name
    # plain strings in the objects: they go into labels, argv and the config hash
    role = learner_role(spec.run_mode).value
    cm_name = config_map_name(name)

    data = {CONFIG_KEY_SPEC: spec.to_yaml()}
    if results:
        data[CONFIG_KEY_RESULTS] = results
    _check_config_map_size(cm_name, data, spec.model_dump(mode="json"))
    config_map = _config_map(
        cm_name, namespace, labels_for(name, CONFIG_ROLE), {ANNOTATION_WORKERS: str(spec.num_workers)}, data
    )

    base_env = [k8s.V1EnvVar(name="PYTHONUNBUFFERED", value="1")]
    if results:
        # not resolved: a local path is the pod's (or the fake kubelet's), not this machine's
        location = results_location(results, name, resolve=False)
        base_env += _env_vars(RunnerEnv(results=location, code_store=_code_store(spec, results)))
    learner_gpus = spec.resources.learner.gpus
    if learner_gpus is None:
        learner_gpus = 1 if gpu_type else 0
    deadline = spec.max_runtime.seconds if spec.max_runtime is not None else None
    common = {
        "image": image,
        "config_map": cm_name,
        "service_account": service_account,
        "credentials_secret": credentials_secret,
    }
    learner_env = list(base_env)
    if spec.run_mode == "distributed":
        base = env_server_name(name)
        servers = tuple((f"{base}-{i}.{base}", ENV_SERVER_PORT) for i in range(spec.num_workers))
        learner_env += _env_vars(RunnerEnv(env_servers=servers, connect_timeout=CONNECT_TIMEOUT_SECONDS))
    learner_pod = _pod_spec(
        role=role,
        index_arg="0",
        env=learner_env,
        resources=_resources(spec.resources.learner, learner_gpus, DEFAULT_LEARNER_REQUESTS),
        grace=LEARNER_GRACE_SECONDS,
        gpu_type=str(gpu_type) if gpu_type else None,
        gpus=learner_gpus,
        **common,  # type: ignore[arg-type]
    )
    # the backstop of the learner's stall watchdog: a learner whose watchdog thread cannot run either
    learner_pod.containers[0].liveness_probe = _liveness_probe(spec.stall_timeout.seconds, LIVENESS_MARGIN_S)
    learner_job = _job(
        name=job_names(spec)[role],
        namespace=namespace,
        labels=labels_for(name, role),
        pod_spec=learner_pod,
        suspend=suspend,
        deadline=deadline,
        annotations=budget_annotations(spec.budget),
    )
    if spec.run_mode != "distributed":
        return [config_map, learner_job]

    env_name = env_server_name(name)
    env_labels = labels_for(name, Role.ENV_SERVER.value)
    service = _stamp(
        k8s.V1Service(
            api_version="v1",
            kind="Service",
            metadata=k8s.V1ObjectMeta(name=env_name, namespace=namespace, labels=dict(env_labels)),
            spec=k8s.V1ServiceSpec(
                cluster_ip="None",  # headless: one DNS record per pod, no load balancing
                selector=dict(env_labels),
                # the agent dials env servers as soon as they are scheduled; no readiness gate
                publish_not_ready_addresses=True,
                ports=[k8s.V1ServicePort(name="env", port=ENV_SERVER_PORT, target_port=ENV_SERVER_PORT)],
            ),
        )
    )
    env_pod = _pod_spec(
        role=Role.ENV_SERVER.value,
        index_arg=_INDEX_ARG,
        env=[
            *base_env,
            _index_env(),
            *_env_vars(RunnerEnv(port=ENV_SERVER_PORT, idle_timeout=IDLE_TIMEOUT_SECONDS)),
        ],
        resources=_resources(spec.resources.env_server, 0, DEFAULT_ENV_SERVER_REQUESTS),
        grace=ENV_SERVER_GRACE_SECONDS,
        gpu_type=str(gpu_type) if gpu_type else None,
        gpus=0,
        ports=[k8s.V1ContainerPort(name="env", container_port=ENV_SERVER_PORT)],
        subdomain=env_name,
        **{**common, "image": env_image},  # type: ignore[arg-type]
    )
    # an env server that stopped answering is killed and replaced; the agent reconnects to the new pod
    env_pod.containers[0].liveness_probe = _liveness_probe(spec.stall_timeout.seconds)
    env_job = _job(
        name=env_name,
        namespace=namespace,
        labels=env_labels,
        pod_spec=env_pod,
        suspend=suspend,
        indexed_workers=spec.num_workers,
        success_policy=version >= (1, 31),
        deadline=deadline,
    )
    # env servers first: they listen and wait, the agent dials them as soon as it starts
    return [config_map, service, env_job, learner_job]


# ---------------------------------------------------------------------------------------------------
# sweeps


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


#: ``--index``'s value in an indexed pod: Kubernetes expands it from :func:`_index_env` (no shell).
_INDEX_ARG = f"$({runenv.INDEX})"


def _code_store(spec: ExperimentSpec, results: str) -> str | None:
    """``RLCLOUD_CODE_STORE`` of a run with ``code:``: its results root's code folder (rlcloud.codepack), where
    every pod fetches the archive its spec names; None without code."""
    from rlcloud.codepack import code_location

    return code_location(results) if spec.code is not None else None


def _env_vars(env: RunnerEnv) -> list[k8s.V1EnvVar]:
    """``env``'s variables as a container's env entries, ``$`` kept literal (see :func:`_escape`)."""
    return [k8s.V1EnvVar(name=name, value=_escape(value)) for name, value in env.to_env().items()]


def _index_env() -> k8s.V1EnvVar:
    """``RLCLOUD_INDEX``: the pod's completion index (downward API), for ``--index $(RLCLOUD_INDEX)``."""
    return k8s.V1EnvVar(
        name=runenv.INDEX,
        value_from=k8s.V1EnvVarSource(
            field_ref=k8s.V1ObjectFieldSelector(field_path=f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']")
        ),
    )


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
    name = sweep.name
    object_name = sweep_object_name(name)
    trials = sweep.num_trials

    data = {CONFIG_KEY_SWEEP: sweep_yaml(sweep)}
    if results:
        data[CONFIG_KEY_RESULTS] = results
    dumped = sweep.model_dump(mode="json")
    experiment = dumped.pop("experiment", {})
    parts = {**{f"experiment.{k}": v for k, v in experiment.items()}, **dumped}
    _check_config_map_size(object_name, data, parts)
    config_map = _config_map(
        object_name, namespace, sweep_labels(name, CONFIG_ROLE), {ANNOTATION_TRIALS: str(trials)}, data
    )

    env = [k8s.V1EnvVar(name="PYTHONUNBUFFERED", value="1"), _index_env()]
    if results:
        # not resolved: a local path is the pod's (or the fake kubelet's), not this machine's
        location = results_location(results, name, resolve=False)
        env += _env_vars(RunnerEnv(sweep_results=location, code_store=_code_store(base, results)))
    gpus = base.resources.learner.gpus
    if gpus is None:
        gpus = 1 if gpu_type else 0
    if sweep.trials_per_gpu > 1:
        env.append(_shared_gpu_env(sweep.trials_per_gpu, gpu_type, gpus))
    pod = _pod_spec(
        role=role,
        index_arg=_INDEX_ARG,
        image=image,
        env=env,
        resources=_resources(base.resources.learner, gpus, DEFAULT_LEARNER_REQUESTS),
        config_map=object_name,
        grace=LEARNER_GRACE_SECONDS,
        service_account=service_account,
        credentials_secret=credentials_secret,
        gpu_type=str(gpu_type) if gpu_type else None,
        gpus=gpus,
        config_key=CONFIG_KEY_SWEEP,
    )
    # a trial's learner is probed as an experiment's is; the file's own limit (its watchdog's stall_timeout
    # + margin) wins over this one, the base experiment's, for trials that sweep stall_timeout
    pod.containers[0].liveness_probe = _liveness_probe(base.stall_timeout.seconds, LIVENESS_MARGIN_S)
    per_index = version >= (1, 29)
    pod_labels = sweep_labels(name, TRIAL_ROLE)
    job_labels = dict(pod_labels)
    if queue:
        job_labels[KUEUE_QUEUE_LABEL] = queue
    spec = k8s.V1JobSpec(
        completion_mode="Indexed",
        completions=trials,
        parallelism=min(sweep.max_parallel or DEFAULT_SWEEP_PARALLELISM, trials),
        template=k8s.V1PodTemplateSpec(metadata=k8s.V1ObjectMeta(labels=pod_labels), spec=pod),
        # FailIndex: a trial whose spec or environment is wrong fails alone, the others go on
        pod_failure_policy=_failure_policy("FailIndex" if per_index else None),
        ttl_seconds_after_finished=TTL_SECONDS_AFTER_FINISHED,
        # Kueue admits a queued Job by un-suspending it
        suspend=bool(queue),
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
    if warm and min(sweep.max_parallel or DEFAULT_SWEEP_PARALLELISM, trials) < trials:
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


def budget_annotations(budget: Usd | None) -> dict[str, str] | None:
    """The annotation that carries a run's or a sweep's budget to the in-cluster reaper (on the learner's or the
    sweep's Job: :data:`rlcloud.budget.ANNOTATION_BUDGET`, USD); None without a budget."""
    return {ANNOTATION_BUDGET: f"{budget.amount:.2f}"} if budget is not None else None


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
