"""The Cluster facade: where experiments run, as one of three typed targets.

    Cluster.local()                                   # processes on this machine (the default)
    Cluster.kubernetes(kubeconfig=None, context=None) # any cluster from a kubeconfig (kind, minikube, EKS, GKE)
    Cluster.gke(ClusterSpec.from_file("configs/clusters/t4.yaml"), project="my-project")

Each constructor returns a subclass of :class:`Cluster` (:class:`LocalTarget`, :class:`KubernetesTarget`,
:class:`GkeTarget`) that owns its backend, its description and its release rules; GKE-only verbs
(create, delete, info, write_kubeconfig) exist on :class:`GkeTarget` alone. A GKE cluster is created on
first use (``create()`` or ``Experiment.start(cluster=...)``); a *dedicated* one (an experiment spec's own
``cluster``) is deleted when its experiment ends, fails to start or is stopped.
"""

from __future__ import annotations

import builtins
import html
import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from rlcloud.errors import SpecError, SpecProblem

if TYPE_CHECKING:
    from rlcloud.backend import ExperimentBackend
    from rlcloud.config import ProjectConfig
    from rlcloud.gke.cluster import GkeCluster
    from rlcloud.gke.info import ClusterInfo
    from rlcloud.gke.operations import ProgressCallback
    from rlcloud.specs import ClusterSpec

__all__ = ["Cluster", "GkeTarget", "KubernetesTarget", "LocalTarget"]

log = logging.getLogger(__name__)

ClusterKind = Literal["local", "kubernetes", "gke"]
DEFAULT_NAMESPACE = "rlcloud"


class Cluster(ABC):
    """A place to run experiments. Build one with :meth:`local`, :meth:`kubernetes` or :meth:`gke`."""

    #: "local", "kubernetes" or "gke"
    kind: ClassVar[ClusterKind]
    #: made for one experiment: deleted when it ends (GKE only)
    dedicated: bool = False

    def __init__(self) -> None:
        self._backend: ExperimentBackend | None = None
        self._config: ProjectConfig | None = None

    def _settings(self) -> ProjectConfig:
        """The project config (rlcloud.yaml), read once for this target and handed down to what it builds: no
        provider (rlcloud.gke, rlcloud.k8s, rlcloud.local) reads it itself."""
        if self._config is None:
            from rlcloud.config import load_project_config

            self._config = load_project_config()
        return self._config

    # ------------------------------------------------------------------------------------ constructors

    @staticmethod
    def local(results: str | None = None) -> LocalTarget:
        """This machine: each role runs as a background process (the default for experiments).

        ``results``: the results root where experiments are looked up by name (status, list, attach).
        """
        return LocalTarget(results)

    @staticmethod
    def kubernetes(
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        api_client: Any = None,
        image: str | None = None,
        gpu_type: str | None = None,
        queue: str | None = None,
    ) -> KubernetesTarget:
        """Any Kubernetes cluster: from ``kubeconfig`` (default ~/.kube/config or $KUBECONFIG) and ``context``,
        or an already built ``kubernetes.client.ApiClient``. Experiments go into ``namespace``.

        ``queue``: a Kueue LocalQueue in that namespace; sweeps are submitted to it (their Job is created
        suspended and Kueue admits it when the queue has quota).
        """
        return KubernetesTarget(
            kubeconfig=kubeconfig,
            context=context,
            namespace=namespace,
            api_client=api_client,
            image=image,
            gpu_type=gpu_type,
            queue=queue,
        )

    @staticmethod
    def gke(
        spec: ClusterSpec | str,
        project: str | None = None,
        credentials: Any = None,
        container_client: Any = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        image: str | None = None,
        dedicated: bool = False,
        doctor: bool = True,
    ) -> GkeTarget:
        """A GKE cluster described by ``spec`` (a ClusterSpec or a cluster file), created on first use.

        ``project`` defaults to the spec's, then the project config's, then Application Default
        Credentials'. ``credentials`` (google.auth) and ``container_client`` (ClusterManagerClient) are
        built from the environment when not given. ``doctor``: before the cluster is created, run the cheap
        checks of ``rlcloud doctor`` (APIs, permissions, GPU quota, the run's image and whether the nodes may
        pull it) and refuse with :class:`~rlcloud.errors.PreflightError` when one fails; False skips them.
        """
        from rlcloud.specs import ClusterSpec

        if isinstance(spec, str):
            spec = ClusterSpec.from_file(spec)
        return GkeTarget(
            spec,
            project=project,
            credentials=credentials,
            container_client=container_client,
            namespace=namespace,
            image=image,
            dedicated=dedicated,
            doctor=doctor,
        )

    @staticmethod
    def from_spec_reference(ref: str | ClusterSpec, *, experiment: str) -> GkeTarget:
        """The cluster an ExperimentSpec's ``cluster`` names: an inline spec is a dedicated GKE cluster
        (created for the experiment, deleted after it); a name is an existing GKE cluster of the project."""
        from rlcloud.specs import ClusterSpec

        if isinstance(ref, ClusterSpec):
            # the experiment becomes the cluster's experiment label
            return GkeTarget(ref, dedicated=True, experiment=experiment)
        return Cluster.get(ref)

    @staticmethod
    def get(
        name: str,
        project: str | None = None,
        location: str | None = None,
        *,
        credentials: Any = None,
        container_client: Any = None,
        namespace: str = DEFAULT_NAMESPACE,
        image: str | None = None,
    ) -> GkeTarget:
        """An existing GKE cluster by name (location: searched in every location of the project).

        ``credentials`` and ``container_client`` as for :meth:`gke`; ``namespace`` and ``image`` as for
        :meth:`kubernetes`.
        """
        from rlcloud.config import load_project_config
        from rlcloud.gke.cluster import find

        config = load_project_config()
        gke_project = _gke_project(project, config, credentials=credentials, container_client=container_client)
        handle = find(gke_project, name, location, config=config)
        # a cluster made for one experiment (its label says which) stays dedicated to it when found again,
        # so that stopping the experiment from another machine still deletes the cluster
        return GkeTarget(
            handle.spec,
            project=handle.project,
            handle=handle,
            dedicated=handle.experiment is not None,
            namespace=namespace,
            image=image,
            config=config,
        )

    #: An existing GKE cluster by name, e.g. from another machine: :meth:`get`, named as ``Experiment.attach`` and
    #: ``Sweep.attach`` are.
    attach = get

    @staticmethod
    def named(ref: str, project: str | None = None, location: str | None = None) -> GkeTarget:
        """The GKE cluster a command line names: a cluster spec file (``.yaml``/``.yml``/``.json``, or any
        existing file) is :meth:`gke` of it, anything else the name of an existing cluster (:meth:`get`)."""
        from pathlib import Path

        if Path(ref).suffix in (".yaml", ".yml", ".json") or Path(ref).is_file():
            return Cluster.gke(ref, project=project)
        return Cluster.get(ref, project=project, location=location)

    @staticmethod
    def reap(
        project: str | None = None,
        *,
        dry_run: bool = False,
        progress: ProgressCallback | None = None,
        credentials: Any = None,
        container_client: Any = None,
    ) -> builtins.list[ClusterInfo]:
        """Delete every rlcloud-managed GKE cluster of ``project`` whose expiry label has passed; return them
        (``dry_run``: only return them). ``credentials``, ``container_client``: as for :meth:`gke`."""
        from rlcloud.gke.cluster import reap

        gke_project = _gke_project(project, credentials=credentials, container_client=container_client)
        reaped: builtins.list[ClusterInfo] = reap(gke_project=gke_project, dry_run=dry_run, progress=progress)
        return reaped

    @staticmethod
    def list(
        project: str | None = None,
        *,
        all_clusters: bool = False,
        credentials: Any = None,
        container_client: Any = None,
    ) -> builtins.list[ClusterInfo]:
        """The GKE clusters of ``project`` (ClusterInfo each: name, location, machine type, nodes, GPUs,
        status, age, expiry); ``all_clusters``: those rlcloud did not make too. ``credentials``,
        ``container_client``: as for :meth:`gke`."""
        gke_project = _gke_project(project, credentials=credentials, container_client=container_client)
        infos: builtins.list[ClusterInfo] = gke_project.list(all_clusters=all_clusters)
        return infos

    # --------------------------------------------------------------------------------------- accessors

    @property
    def spec(self) -> ClusterSpec | None:
        """The ClusterSpec of a GKE cluster, else None."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """A short human description, e.g. "gke:rl-t4" or "kubernetes:ctx"."""

    def __repr__(self) -> str:
        return f"Cluster({self.describe()}{', dedicated' if self.dedicated else ''})"

    @abstractmethod
    def _rows(self) -> builtins.list[tuple[str, str]]:
        """The rows of the notebook table after "kind" (no API call)."""

    def _repr_html_(self) -> str:
        """A compact table for notebooks: kind, name, machines, GPUs and, once seen, the cluster's state.

        Makes no API call: a GKE cluster's state is the one the latest create() or info() saw.
        """
        rows = [("kind", self.kind), *self._rows()]
        body = "".join(
            f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(key)}</th>"
            f"<td style='text-align:left'>{html.escape(str(value))}</td></tr>"
            for key, value in rows
        )
        return f"<table class='rlcloud-cluster'>{body}</table>"

    # ------------------------------------------------------------------------------ experiment plumbing

    def backend(self) -> ExperimentBackend:
        """The ExperimentBackend that runs experiments here (built once, shared)."""
        if self._backend is None:
            self._backend = self._make_backend()
        return self._backend

    @abstractmethod
    def _make_backend(self) -> ExperimentBackend:
        """Build this target's backend (called once)."""

    def kube_client(self) -> Any:
        """A kubernetes ApiClient for this cluster (never the global default configuration)."""
        raise SpecError([SpecProblem("cluster", f"{self.describe()} has no Kubernetes API")])

    def check_image(self, spec_image: str | None) -> None:
        """Refuse (SpecError) a run that would have no image its pods can pull. Local runs need none."""
        return None

    def prepare_for(self, experiment: str) -> None:
        """Make sure the cluster can run ``experiment`` (by name) before it starts. Nothing to do here."""
        return None

    def check_trials_per_gpu(self, trials_per_gpu: int) -> None:
        """Refuse (SpecError) a sweep whose ``trials_per_gpu`` this cluster cannot share a GPU among. Here (local
        processes, a Kubernetes cluster whose GPU sharing rlcloud cannot see) nothing is refused."""
        return None

    def release_after_failure(self, experiment: str) -> None:
        """``experiment`` failed to start: give back what was made for it. Nothing to do here."""
        return None

    def check_budget(self, what: str, spec_image: str | None) -> None:
        """Refuse (SpecError on ``budget``: exit 2 in the CLI) the budget of ``what`` (an experiment or a sweep)
        when nothing would enforce it here; called before anything is created or billed.

        Locally its supervisor does (at rlcloud.yaml's ``cpu_hour_usd``). A Kubernetes cluster rlcloud did not
        create has no in-cluster reaper (it prices pods from GKE's node labels): a budget there is refused.
        """
        if self.kind != "local":
            raise SpecError(
                [
                    SpecProblem(
                        "budget",
                        f"{what}: a budget is enforced on this machine and on GKE clusters (rlcloud's in-cluster "
                        f"reaper stops a run at its budget), not on {self.describe()}: run it with Cluster.gke(...) "
                        "(`--cluster` a GKE cluster spec) or remove `budget:`",
                    )
                ]
            )

    def enforce_budget(self, what: str) -> None:
        """Make sure something enforces the budget of ``what`` (an experiment or a sweep) while it runs here (after
        :meth:`check_budget`). Locally its supervisor does: nothing to do."""
        return None

    def release_after_experiment(self, experiment: str) -> None:
        """``experiment`` ended or was stopped: give back what was made for it. Nothing to do here."""
        return None


class LocalTarget(Cluster):
    """This machine: experiments run as background processes (:mod:`rlcloud.local`)."""

    kind = "local"

    def __init__(self, results: str | None = None) -> None:
        """``results``: the results root where experiments are looked up by name (default: the project's)."""
        super().__init__()
        self.results = results

    def describe(self) -> str:
        """``local``."""
        return "local"

    def _rows(self) -> list[tuple[str, str]]:
        return [("runs", "background processes on this machine")]

    def _make_backend(self) -> ExperimentBackend:
        from rlcloud.errors import RLCloudError
        from rlcloud.local import LocalBackend

        try:  # rlcloud.yaml's rate, read once and handed down; an unreadable config prices nothing (free)
            rate = self._settings().cpu_hour_usd
        except RLCloudError:
            rate = 0.0
        return LocalBackend(results_root=self.results, cpu_hour_usd=rate)


class KubernetesTarget(Cluster):
    """Any Kubernetes cluster: experiments run as Jobs (:mod:`rlcloud.k8s`)."""

    kind: ClassVar[ClusterKind] = "kubernetes"

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        api_client: Any = None,
        image: str | None = None,
        gpu_type: str | None = None,
        queue: str | None = None,
    ) -> None:
        """Prefer :meth:`Cluster.kubernetes`. ``gpu_type`` may be a short name (``t4``, ``a100-80gb``)."""
        super().__init__()
        self.kubeconfig = kubeconfig
        self.context = context
        self.namespace = namespace
        self.image = image
        self.gpu_type = _gpu_type(gpu_type)
        #: the Kueue LocalQueue sweeps are submitted to (None: no Kueue)
        self.queue = queue
        self._api_client = api_client
        self._run_image: str | None = None  # what the latest check_image() found the run will pull

    def describe(self) -> str:
        """``kubernetes:<context>``."""
        return f"kubernetes:{self.context or 'default'}"

    def _rows(self) -> list[tuple[str, str]]:
        rows = [("context", self.context or "(current)"), ("namespace", self.namespace)]
        if self.gpu_type:
            rows.append(("GPUs", self.gpu_type))
        if self.queue:
            rows.append(("Kueue queue", self.queue))
        return rows

    def kube_client(self) -> Any:
        """The ApiClient given, else one built from the kubeconfig and context (once)."""
        if self._api_client is None:
            from rlcloud.k8s import api_client_from_kubeconfig

            self._api_client = api_client_from_kubeconfig(self.kubeconfig, self.context)
        return self._api_client

    def check_image(self, spec_image: str | None) -> None:
        """Refuse (SpecError naming docs/images.md) when neither the experiment, this cluster nor rlcloud.yaml
        names an image: rlcloud has no public image every cluster can pull."""
        from rlcloud.config import check_cluster_image

        self._run_image = check_cluster_image(
            spec_image, self.image, gpu=bool(self.gpu_type), where=self.describe(), config=self._settings()
        )

    def _make_backend(self) -> ExperimentBackend:
        from rlcloud.k8s import KubernetesBackend
        from rlcloud.local.worker import warm_enabled

        config = self._settings()
        gpu_type = self.gpu_type
        # no built-in fallback here: check_image() refused the run before anything was made
        default_image = config.gpu_image if gpu_type else config.image
        return KubernetesBackend(
            self.kube_client(),
            namespace=self.namespace,
            image=self.image or default_image,
            # env servers never use a GPU: the CPU image, not the several-GB GPU one (an image given to
            # this cluster is the user's choice for every pod)
            env_server_image=config.image if gpu_type and not self.image else None,
            gpu_type=gpu_type,
            gcp_service_account=config.gcp_service_account,
            credentials_secret=config.credentials_secret,
            queue=self.queue,
            # a sweep's pods each run several trials in turn (RLCLOUD_WARM_TRIALS=0: one pod per trial)
            warm_trials=warm_enabled(),
        )


class GkeTarget(KubernetesTarget):
    """A GKE cluster described by a ClusterSpec: created on first use, its Kubernetes API reached through
    the Container API's endpoint (:class:`rlcloud.gke.GkeCluster` is the handle that does the work)."""

    kind: ClassVar[ClusterKind] = "gke"

    def __init__(
        self,
        spec: ClusterSpec,
        *,
        project: str | None = None,
        credentials: Any = None,
        container_client: Any = None,
        namespace: str = DEFAULT_NAMESPACE,
        image: str | None = None,
        dedicated: bool = False,
        handle: GkeCluster | None = None,
        doctor: bool = True,
        experiment: str | None = None,
        config: ProjectConfig | None = None,
    ) -> None:
        """Prefer :meth:`Cluster.gke` or :meth:`Cluster.get`. The cluster's own state (its experiment label,
        location, project client) lives in one place, the :attr:`handle`; this keeps only what builds it."""
        gpu_type = spec.gpu_type.value if spec.gpus_per_node and spec.gpu_type else None
        super().__init__(namespace=namespace, image=image, gpu_type=gpu_type, queue=spec.queue)
        self._config = config
        self._spec = spec
        self.project = project
        self._credentials = credentials
        self._container_client = container_client
        self.dedicated = dedicated
        self._experiment = experiment
        self._handle = handle
        self._last_info: ClusterInfo | None = None  # the latest seen (create/info), shown by _repr_html_
        #: run the doctor's cheap checks before creating the cluster (see :meth:`Cluster.gke`)
        self.doctor_first = doctor

    @property
    def spec(self) -> ClusterSpec:
        """The cluster's spec."""
        return self._spec

    @property
    def experiment(self) -> str | None:
        """The experiment a dedicated cluster is labelled with (the handle's, once it exists)."""
        return self._handle.experiment if self._handle is not None else self._experiment

    def describe(self) -> str:
        """``gke:<name>``."""
        return f"gke:{self._spec.name}"

    def _rows(self) -> list[tuple[str, str]]:
        spec, info = self._spec, self._last_info
        machine = info.machine_type if info is not None else spec.effective_machine_type
        gpu_type = info.gpu_type if info is not None else (spec.gpu_type.value if spec.gpu_type else None)
        gpus = info.gpus_per_node if info is not None else spec.gpus_per_node
        nodes = f"{spec.autoscaling.min_nodes}-{spec.autoscaling.max_nodes}" if spec.autoscaling else spec.num_nodes
        rows = [
            ("name", spec.name),
            ("project", str(self.project or spec.project or "(default)")),
            ("location", spec.location),
            ("machine type", f"{machine}{' (spot)' if spec.spot else ''}"),
            ("nodes", f"{info.num_nodes} now ({nodes})" if info is not None else str(nodes)),
            ("GPUs", f"{gpus} x {gpu_type} per node" if gpus and gpu_type else "none"),
            ("state", info.status if info is not None else "unknown (call create() or info())"),
        ]
        if spec.gpu_sharing is not None:
            rows.append(("GPU sharing", f"{spec.gpu_sharing.strategy}, {spec.gpu_sharing.clients_per_gpu} per GPU"))
        if spec.capacity:
            now = f"; now {info.capacity}" if info is not None and info.capacity else ""
            tried = f" (tried {info.capacity_tried})" if info is not None and info.capacity_tried else ""
            rows.append(("capacity", " > ".join(str(r) for r in spec.capacity) + now + tried))
        if spec.ttl is not None:
            rows.append(("ttl", str(spec.ttl)))
        if spec.queue:
            rows.append(("Kueue queue", spec.queue))
        if spec.autodown is not None:
            rows.append(("autodown", f"{spec.autodown} idle"))
        cost = info.cost_so_far() if info is not None else None
        if info is not None and cost is not None:
            rows.append(("teardown", info.teardown()))
            rows.append(("cost so far", str(cost)))
        if self.dedicated:
            rows.append(("dedicated", "yes: deleted when its experiment ends"))
        return rows

    def check_trials_per_gpu(self, trials_per_gpu: int) -> None:
        """A GKE cluster shares a GPU among at most its ``gpu_sharing.clients_per_gpu`` containers (GKE's
        max_shared_clients_per_gpu): more trials per GPU than that would wait for a share forever."""
        sharing = self._spec.gpu_sharing
        clients = sharing.clients_per_gpu if sharing is not None else 1
        if trials_per_gpu > 1 and sharing is not None and sharing.strategy == "mps":
            # GKE's MPS workloads set hostIPC: true to reach the node's MPS control daemon; rlcloud's pods keep
            # PodSecurity "restricted" (no host namespaces), so they could not use an MPS share
            raise SpecError(
                [
                    SpecProblem(
                        "trials_per_gpu",
                        f"cluster {self._spec.name} shares GPUs with MPS, whose pods need hostIPC (GKE's 'Share GPUs "
                        "with multiple workloads using NVIDIA MPS'), which rlcloud's pods never ask for: use "
                        "gpu_sharing: {strategy: time-sharing} for trials_per_gpu",
                        trials_per_gpu,
                    )
                ]
            )
        if trials_per_gpu > 1 and trials_per_gpu > clients:
            have = f"shares each GPU among {clients} containers" if sharing else "has no gpu_sharing"
            raise SpecError(
                [
                    SpecProblem(
                        "trials_per_gpu",
                        f"{trials_per_gpu} trials per GPU, but cluster {self._spec.name} {have}: set trials_per_gpu "
                        f"to at most {clients}, or give the cluster gpu_sharing: {{clients_per_gpu: {trials_per_gpu}}}",
                        trials_per_gpu,
                    )
                ]
            )

    @property
    def handle(self) -> GkeCluster:
        """The :class:`rlcloud.gke.GkeCluster` that creates, finds and deletes this cluster (built once)."""
        if self._handle is None:
            from rlcloud.gke.cluster import GkeCluster

            config = self._settings()
            gke_project = _gke_project(
                self.project or self._spec.project,
                config,
                credentials=self._credentials,
                container_client=self._container_client,
            )
            self._handle = GkeCluster(
                self._spec,
                gke_project=gke_project,
                experiment=self._experiment,
                doctor=self.doctor_first,
                config=config,
            )
        return self._handle

    # ---------------------------------------------------------------------------------- cluster verbs

    def create(self, wait: bool = True, progress: ProgressCallback | bool | None = None) -> ClusterInfo:
        """Create the GKE cluster (and its GPU node pool) if it does not exist; returns its ClusterInfo.

        Safe to run again after an interrupt: it attaches to the in-flight operation or the existing
        cluster instead of failing or duplicating. A cluster that does not exist yet is checked first (the
        cheap checks of ``rlcloud doctor``, unless ``doctor=False``): PreflightError, and nothing is created,
        when one fails. ``progress``: True draws a bar per GKE operation (tqdm, notebook-aware), a callable gets
        each update (:mod:`rlcloud.gke.operations`).
        """
        return self._create(wait, _progress(progress))

    def _create(self, wait: bool, progress: ProgressCallback | None, experiment: str | None = None) -> ClusterInfo:
        info: ClusterInfo = self.handle.create(
            wait=wait,
            progress=progress,
            delete_on_failure=self.dedicated,
            # an experiment is about to start: its image is the one the nodes must be able to pull
            run_images=[self._run_image] if self._run_image is not None else None,
            experiment=experiment,
        )
        self._last_info = info
        return info

    def exists(self) -> bool:
        """True when the GKE cluster exists (in any state)."""
        return self.handle.exists()

    def check_project(self) -> builtins.list[Any]:
        """The doctor's cheap checks for creating this cluster (:meth:`rlcloud.gke.GkeCluster.check_project`):
        PreflightError listing each failure, else the checks."""
        return self.handle.check_project()

    @property
    def reaper_note(self) -> str:
        """What the latest create() did about the in-cluster reaper (one line; "" when nothing to do)."""
        return self.handle.reaper_note

    def doctor(self, results: str | None = None) -> builtins.list[Any]:
        """Pre-flight checks of this cluster's project (:class:`rlcloud.gke.doctor.Doctor`): APIs, permissions, GPU
        quota for this spec, the results bucket (``results``, default rlcloud.yaml's), Workload Identity, the
        runner images and the reaper's identity. Returns one ``Check`` each (``.ok``, ``.fix``); raises nothing."""
        root = results or self._settings().results
        checks: builtins.list[Any] = self.handle.checkup(root, namespace=self.namespace).run()
        return checks

    def delete(self, wait: bool = True, progress: ProgressCallback | bool | None = None) -> None:
        """Delete the GKE cluster. Idempotent: a cluster that is already gone is fine. ``progress`` as for
        :meth:`create`."""
        self.handle.delete(wait=wait, progress=_progress(progress))

    def info(self) -> ClusterInfo:
        """The GKE cluster's observed state (ClusterInfo)."""
        self._last_info = self.handle.info()
        return self._last_info

    def status(self) -> ClusterInfo:
        """The GKE cluster's observed state (ClusterInfo), as ``Experiment.status()`` and ``Sweep.status()``
        give theirs; the same as :meth:`info`."""
        return self.info()

    def wait(self, timeout: float = 1800.0, progress: ProgressCallback | bool | None = None) -> ClusterInfo:
        """Wait until the cluster (e.g. after ``create(wait=False)``) runs with all its node pools; returns its
        ClusterInfo. It attaches to whatever operation is in flight and finishes it (WaitTimeoutError after
        ``timeout`` seconds)."""
        self._last_info = self.handle.wait(timeout=timeout, progress=_progress(progress))
        return self._last_info

    def kube_client(self) -> Any:
        """A kubernetes ApiClient for this cluster, its token refreshed from the Google credentials."""
        if self._api_client is None:
            self._api_client = self.handle.kube_client()
        return self._api_client

    def write_kubeconfig(self, path: str) -> None:
        """Write a kubeconfig for kubectl users (GKE: token through gke-gcloud-auth-plugin, no raw token)."""
        self.handle.write_kubeconfig(path)

    # ------------------------------------------------------------------------------ experiment plumbing

    def prepare_for(self, experiment: str) -> None:
        """Create the cluster if needed before ``experiment`` starts.

        A dedicated cluster is labelled with the experiment's name (attach, stop and reap read it) and is
        created with delete_on_failure: an error or Ctrl-C mid-create deletes it, so nothing is left running.
        """
        if self.dedicated:
            self._experiment = self.experiment or experiment
        self._create(wait=True, progress=None, experiment=self._experiment if self.dedicated else None)

    def check_budget(self, what: str, spec_image: str | None) -> None:
        """The in-cluster reaper enforces runs' and sweeps' budgets (rlcloud.gke.budgets) with Kubernetes
        permissions alone; it needs an image to run in (the reaper's, rlcloud.yaml's, else the run's): SpecError
        on ``budget`` without one, before anything is created."""
        from rlcloud.gke.reaper_setup import require_budget_enforcer

        require_budget_enforcer(self.handle, what, "runs", run_image=spec_image or self._run_image)

    def enforce_budget(self, what: str) -> None:
        """The in-cluster reaper enforces budgets (rlcloud.gke.budgets): install (or update) it on this cluster,
        which may have been created without one (no ttl, autodown or budget of its own); without the reaper's
        Google identity it is installed for runs' and sweeps' budgets only. BackendError when it cannot be (the
        API refused): the run does not start unenforced."""
        self.handle.install_reaper(run_image=self._run_image, required="runs")

    def release_after_failure(self, experiment: str) -> None:
        """The experiment failed to start: a dedicated cluster goes away."""
        if self.dedicated:
            self._delete_quietly()

    def release_after_experiment(self, experiment: str) -> None:
        """The experiment ended or was stopped: a dedicated cluster goes away."""
        if self.dedicated:
            self._delete_quietly()

    def _delete_quietly(self) -> None:
        try:
            self.delete(wait=True)
        except KeyboardInterrupt:
            # a second Ctrl-C must not leave a paid cluster: finish the delete request without waiting
            self.delete(wait=False)
            raise


def _gke_project(
    project: str | None, config: ProjectConfig | None = None, *, credentials: Any = None, container_client: Any = None
) -> Any:
    """The project-scoped GKE client: the project given, else ``config``'s (the project config, read here when not
    given); credentials from the config (rlcloud init) when not given."""
    from rlcloud.config import google_credentials, load_project_config
    from rlcloud.gke.project import GkeProject

    config = config or load_project_config()
    if credentials is None:
        credentials = google_credentials(config)
    return GkeProject(project or config.project, credentials=credentials, container_client=container_client)


def _progress(progress: ProgressCallback | bool | None) -> ProgressCallback | None:
    """The progress callback a cluster verb was given: True is a tqdm bar per operation, False none."""
    if progress is True:
        from rlcloud.gke.operations import tqdm_progress

        return tqdm_progress()
    return progress or None


def _gpu_type(value: str | None) -> str | None:
    """GKE's accelerator name for ``value`` (``t4`` -> ``nvidia-tesla-t4``); SpecError naming gpu_type if unknown."""
    if value is None:
        return None
    from rlcloud.specs.cluster import gpu_type_value, valid_gpu_types

    known = gpu_type_value(value)
    if known is None:
        from rlcloud.errors import SpecError, SpecProblem

        raise SpecError([SpecProblem("gpu_type", f"unknown GPU type; valid: {valid_gpu_types()}", value)])
    return known
