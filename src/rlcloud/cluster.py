"""The Cluster facade: where experiments run.

    Cluster.local()                                   # processes on this machine (the default)
    Cluster.kubernetes(kubeconfig=None, context=None) # any cluster from a kubeconfig (kind, minikube, EKS, GKE)
    Cluster.gke(ClusterSpec.from_file("configs/clusters/t4.yaml"), project="my-project")

A GKE cluster is created on first use (``create()`` or ``Experiment.start(cluster=...)``); a *dedicated*
one (an experiment spec's own ``cluster``) is deleted when its experiment ends, fails to start or is stopped.
"""

from __future__ import annotations

import html
import logging
from typing import TYPE_CHECKING, Any, Literal

from rlcloud.errors import SpecError, SpecProblem

if TYPE_CHECKING:
    from rlcloud.backend import ExperimentBackend
    from rlcloud.experiment import Experiment
    from rlcloud.specs import ClusterSpec

__all__ = ["Cluster"]

log = logging.getLogger(__name__)

ClusterKind = Literal["local", "kubernetes", "gke"]
DEFAULT_NAMESPACE = "rlcloud"


class Cluster:
    """A place to run experiments. Build one with :meth:`local`, :meth:`kubernetes` or :meth:`gke`."""

    def __init__(self, kind: ClusterKind, **options: Any) -> None:
        """Prefer the constructors :meth:`local`, :meth:`kubernetes` and :meth:`gke`."""
        self.kind: ClusterKind = kind
        self._options = options
        self._backend: ExperimentBackend | None = None
        self._gke: Any = None  # rlcloud.gke.GkeCluster, for kind "gke"
        self.dedicated: bool = bool(options.get("dedicated", False))
        self._last_info: Any = None  # the latest ClusterInfo seen (create/info), shown by _repr_html_

    # ------------------------------------------------------------------------------------ constructors

    @classmethod
    def local(cls, results: str | None = None) -> Cluster:
        """This machine: each role runs as a background process (the default for experiments)."""
        return cls("local", results=results)

    @classmethod
    def kubernetes(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        api_client: Any = None,
        image: str | None = None,
        gpu_type: str | None = None,
    ) -> Cluster:
        """Any Kubernetes cluster: from ``kubeconfig`` (default ~/.kube/config or $KUBECONFIG) and ``context``,
        or an already built ``kubernetes.client.ApiClient``. Experiments go into ``namespace``."""
        return cls(
            "kubernetes",
            kubeconfig=kubeconfig,
            context=context,
            namespace=namespace,
            api_client=api_client,
            image=image,
            gpu_type=gpu_type,
        )

    @classmethod
    def gke(
        cls,
        spec: ClusterSpec | str,
        project: str | None = None,
        credentials: Any = None,
        container_client: Any = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        image: str | None = None,
        dedicated: bool = False,
    ) -> Cluster:
        """A GKE cluster described by ``spec`` (a ClusterSpec or a cluster file), created on first use.

        ``project`` defaults to the spec's, then the project config's, then Application Default
        Credentials'. ``credentials`` (google.auth) and ``container_client`` (ClusterManagerClient) are
        built from the environment when not given.
        """
        from rlcloud.specs import ClusterSpec

        if isinstance(spec, str):
            spec = ClusterSpec.from_file(spec)
        return cls(
            "gke",
            spec=spec,
            project=project,
            credentials=credentials,
            container_client=container_client,
            namespace=namespace,
            image=image,
            dedicated=dedicated,
        )

    @classmethod
    def from_spec_reference(cls, ref: str | ClusterSpec, *, experiment: str) -> Cluster:
        """The cluster an ExperimentSpec's ``cluster`` names: an inline spec is a dedicated GKE cluster
        (created for the experiment, deleted after it); a name is an existing GKE cluster of the project."""
        from rlcloud.specs import ClusterSpec

        if isinstance(ref, ClusterSpec):
            cluster = cls.gke(ref, dedicated=True)
            cluster._options["experiment"] = experiment  # becomes the cluster's experiment label
            return cluster
        return cls.get(ref)

    @classmethod
    def get(cls, name: str, project: str | None = None, location: str | None = None, **kwargs: Any) -> Cluster:
        """An existing GKE cluster by name (location: the project config's default, else searched)."""
        from rlcloud.gke import GkeCluster

        gke = GkeCluster.get(name, project=project, location=location, **kwargs)
        cluster = cls.gke(gke.spec, project=gke.project, **kwargs)
        cluster._gke = gke
        # a cluster made for one experiment (its label says which) stays dedicated to it when found again,
        # so that stopping the experiment from another machine still deletes the cluster
        cluster.dedicated = gke.experiment is not None
        cluster._options["experiment"] = gke.experiment
        return cluster

    @classmethod
    def list(cls, project: str | None = None, **kwargs: Any) -> list[Any]:
        """The GKE clusters of ``project`` (ClusterInfo each: name, location, machine type, nodes, GPUs,
        status, age, expiry)."""
        from rlcloud.gke import GkeCluster

        return list(GkeCluster.list(project=project, **kwargs))

    # --------------------------------------------------------------------------------------- accessors

    @property
    def spec(self) -> ClusterSpec | None:
        """The ClusterSpec of a GKE cluster, else None."""
        spec: ClusterSpec | None = self._options.get("spec")
        return spec

    def describe(self) -> str:
        """A short human description, e.g. "gke:rl-t4" or "kubernetes:ctx"."""
        if self.kind == "gke" and self.spec is not None:
            return f"gke:{self.spec.name}"
        if self.kind == "kubernetes":
            return f"kubernetes:{self._options.get('context') or 'default'}"
        return "local"

    def __repr__(self) -> str:
        return f"Cluster({self.describe()}{', dedicated' if self.dedicated else ''})"

    def _repr_html_(self) -> str:
        """A compact table for notebooks: kind, name, machines, GPUs and, once seen, the cluster's state.

        Makes no API call: the state is the one the latest create() or info() saw.
        """
        rows: list[tuple[str, str]] = [("kind", self.kind)]
        spec = self.spec
        if self.kind == "gke" and spec is not None:
            info = self._last_info
            machine = info.machine_type if info is not None else spec.effective_machine_type
            gpu_type = info.gpu_type if info is not None else (spec.gpu_type.value if spec.gpu_type else None)
            gpus = info.gpus_per_node if info is not None else spec.gpus_per_node
            nodes = f"{spec.autoscaling.min_nodes}-{spec.autoscaling.max_nodes}" if spec.autoscaling else spec.num_nodes
            rows += [
                ("name", spec.name),
                ("project", str(self._options.get("project") or spec.project or "(default)")),
                ("location", spec.location),
                ("machine type", f"{machine}{' (spot)' if spec.spot else ''}"),
                ("nodes", f"{info.num_nodes} now ({nodes})" if info is not None else str(nodes)),
                ("GPUs", f"{gpus} x {gpu_type} per node" if gpus and gpu_type else "none"),
                ("state", info.status if info is not None else "unknown (call create() or info())"),
            ]
            if spec.ttl is not None:
                rows.append(("ttl", str(spec.ttl)))
            if self.dedicated:
                rows.append(("dedicated", "yes: deleted when its experiment ends"))
        elif self.kind == "kubernetes":
            rows += [
                ("context", str(self._options.get("context") or "(current)")),
                ("namespace", str(self._options.get("namespace", DEFAULT_NAMESPACE))),
            ]
            if self._options.get("gpu_type"):
                rows.append(("GPUs", str(self._options["gpu_type"])))
        else:
            rows.append(("runs", "background processes on this machine"))
        body = "".join(
            f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(key)}</th>"
            f"<td style='text-align:left'>{html.escape(str(value))}</td></tr>"
            for key, value in rows
        )
        return f"<table class='rlcloud-cluster'>{body}</table>"

    def _gke_cluster(self) -> Any:
        if self.kind != "gke":
            raise SpecError([SpecProblem("cluster", f"{self.describe()} is not a GKE cluster")])
        if self._gke is None:
            from rlcloud.config import google_credentials, load_project_config
            from rlcloud.gke import GkeCluster

            config = load_project_config()
            project = self._options.get("project") or (self.spec.project if self.spec else None)
            project = project or config.project
            if self._options.get("credentials") is None:
                self._options["credentials"] = google_credentials(config)
            if self.spec is None:
                raise SpecError([SpecProblem("cluster", "a GKE cluster needs a ClusterSpec")])
            self._gke = GkeCluster(
                self.spec,
                project=project,
                credentials=self._options.get("credentials"),
                container_client=self._options.get("container_client"),
                experiment=self._options.get("experiment"),
            )
        return self._gke

    # ---------------------------------------------------------------------------------- cluster verbs

    def create(self, wait: bool = True, progress: Any = None) -> Any:
        """Create the GKE cluster (and its GPU node pool) if it does not exist; returns its ClusterInfo.

        Safe to run again after an interrupt: it attaches to the in-flight operation or the existing
        cluster instead of failing or duplicating.
        """
        info = self._gke_cluster().create(wait=wait, progress=progress, delete_on_failure=self.dedicated)
        self._last_info = info
        return info

    def delete(self, wait: bool = True, progress: Any = None) -> None:
        """Delete the GKE cluster. Idempotent: a cluster that is already gone is fine."""
        self._gke_cluster().delete(wait=wait, progress=progress)

    def info(self) -> Any:
        """The GKE cluster's observed state (ClusterInfo)."""
        self._last_info = self._gke_cluster().info()
        return self._last_info

    def kube_client(self) -> Any:
        """A kubernetes ApiClient for this cluster (never the global default configuration)."""
        if self.kind == "gke":
            return self._gke_cluster().kube_client()
        if self.kind == "kubernetes":
            client = self._options.get("api_client")
            if client is None:
                from rlcloud.k8s import api_client_from_kubeconfig

                client = api_client_from_kubeconfig(self._options.get("kubeconfig"), self._options.get("context"))
                self._options["api_client"] = client
            return client
        raise SpecError([SpecProblem("cluster", "the local cluster has no Kubernetes API")])

    def write_kubeconfig(self, path: str) -> None:
        """Write a kubeconfig for kubectl users (GKE: token through gke-gcloud-auth-plugin, no raw token)."""
        self._gke_cluster().write_kubeconfig(path)

    # ------------------------------------------------------------------------------ experiment plumbing

    def backend(self) -> ExperimentBackend:
        """The ExperimentBackend that runs experiments here (built once, shared)."""
        if self._backend is None:
            if self.kind == "local":
                from rlcloud.backends.local import LocalBackend

                self._backend = LocalBackend(results_root=self._options.get("results"))
            else:
                from rlcloud.config import DEFAULT_GPU_IMAGE, DEFAULT_IMAGE, load_project_config
                from rlcloud.k8s import KubernetesBackend

                config = load_project_config()
                gpu_type = self._options.get("gpu_type")
                if self.kind == "gke" and self.spec is not None and self.spec.gpus_per_node:
                    gpu_type = self.spec.gpu_type.value if self.spec.gpu_type else None
                default_image = (config.gpu_image or DEFAULT_GPU_IMAGE) if gpu_type else (config.image or DEFAULT_IMAGE)
                self._backend = KubernetesBackend(
                    self.kube_client(),
                    namespace=self._options.get("namespace", DEFAULT_NAMESPACE),
                    image=self._options.get("image") or default_image,
                    gpu_type=gpu_type,
                    gcp_service_account=config.gcp_service_account,
                    credentials_secret=config.credentials_secret,
                )
        return self._backend

    def prepare_for(self, experiment: Experiment) -> None:
        """Make sure the cluster exists before ``experiment`` starts (GKE: create it if needed).

        A dedicated cluster interrupted mid-create (Ctrl-C) is deleted again, so nothing is left running.
        """
        if self.kind != "gke":
            return
        if self.dedicated:
            # the experiment label marks the cluster as this experiment's (attach, stop and reap read it)
            self._options.setdefault("experiment", experiment.name)
            if self._gke is not None and self._gke.experiment is None:
                self._gke.experiment = experiment.name
        # a dedicated cluster is created with delete_on_failure: an error or Ctrl-C mid-create deletes it
        self.create(wait=True)

    def release_after_failure(self, experiment: Experiment) -> None:
        """The experiment failed to start: a dedicated cluster goes away."""
        if self.dedicated:
            self._delete_quietly()

    def release_after_experiment(self, experiment: Experiment) -> None:
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
