"""GkeProject: one Google Cloud project's GKE side: its credentials, its Container API client and the
clusters it holds (list, look one up by name, the expired ones).

One client serves every cluster handle made from it (:class:`rlcloud.gke.cluster.GkeCluster`); the verbs
that make handles (find, reap) live with the handle in :mod:`rlcloud.gke.cluster`.
"""

from __future__ import annotations

import builtins
import logging
import os
from typing import Any

from google.cloud import container_v1

from rlcloud.errors import NotFoundError
from rlcloud.gke.builders import cluster_path, location_path
from rlcloud.gke.errors import api_errors
from rlcloud.gke.info import ClusterInfo

__all__ = ["CLOUD_PLATFORM_SCOPE", "EMULATOR_ENV", "GkeProject"]

log = logging.getLogger("rlcloud.gke")

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
EMULATOR_ENV = "RLCLOUD_GKE_EMULATOR_HOST"


class GkeProject:
    """The GKE side of one Google Cloud project: its credentials, its Container API client, and what it
    holds (list, look one up by name, the expired).

    ``project``: the project id (default: Application Default Credentials'); ``credentials``:
    google-auth credentials (default: ``google.auth.default``, looked up lazily); ``container_client``: a
    ``container_v1.ClusterManagerClient`` (default: built from the credentials on first use). One client
    serves every cluster handle made from it (``GkeCluster(spec, gke_project=...)``).
    """

    def __init__(self, project: str | None = None, *, credentials: Any = None, container_client: Any = None) -> None:
        self._project = project
        self._credentials = credentials
        self._client = container_client

    def __repr__(self) -> str:
        return f"GkeProject({self._project or '(default)'})"

    def _default_credentials(self) -> tuple[Any, str | None]:
        import google.auth

        with api_errors(action="find Google credentials"):
            credentials, project = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        return credentials, project

    @property
    def credentials(self) -> Any:
        """The google-auth credentials in use (Application Default Credentials unless given)."""
        if self._credentials is None:
            self._credentials, found = self._default_credentials()
            self._project = self._project or found
        return self._credentials

    @property
    def known_credentials(self) -> Any:
        """The credentials given or already found; None before Application Default Credentials are looked up."""
        return self._credentials

    @property
    def project(self) -> str:
        """The Google Cloud project id (resolved from Application Default Credentials if not given)."""
        if not self._project:
            if self._credentials is None:
                _ = self.credentials
            if not self._project:
                from rlcloud.errors import AuthError

                raise AuthError(
                    "no Google Cloud project given and none found in Application Default Credentials: pass "
                    "project=..., set it in the cluster spec, or run `gcloud config set project PROJECT`"
                )
        assert self._project is not None
        return self._project

    @property
    def client(self) -> Any:
        """The ClusterManagerClient in use (built on first use when none was given).

        With ``RLCLOUD_GKE_EMULATOR_HOST=host:port`` set (like ``STORAGE_EMULATOR_HOST`` for Cloud Storage)
        it talks plain gRPC to a local ClusterManager fake instead of Google, and needs no credentials.
        """
        if self._client is None:
            emulator = os.environ.get(EMULATOR_ENV)
            if emulator:
                import grpc
                from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

                transport = ClusterManagerGrpcTransport(channel=grpc.insecure_channel(emulator))
                self._client = container_v1.ClusterManagerClient(transport=transport)
            else:
                self._client = container_v1.ClusterManagerClient(credentials=self.credentials)
        return self._client

    def _clusters(self) -> builtins.list[Any]:
        with api_errors(project=self.project, action="list clusters"):
            response = self.client.list_clusters(parent=location_path(self.project, "-"))
        return builtins.list(response.clusters)

    def list(self, *, all_clusters: bool = False) -> builtins.list[ClusterInfo]:
        """The clusters of the project in every location: rlcloud's (label managed-by=rlcloud), or all."""
        infos = [ClusterInfo.from_cluster(c, self.project) for c in self._clusters()]
        infos = [i for i in infos if all_clusters or i.managed]
        for info in infos:
            for problem in info.problems:
                log.warning("cluster %s in %s: %s", info.name, info.location, problem)
        return infos

    def lookup(self, name: str, location: str | None = None) -> ClusterInfo:
        """An existing cluster's observed state by name (``location`` None: searched in every location of
        the project). NotFoundError when there is none."""
        from google.api_core import exceptions as gexc

        found = None
        if location is not None:
            try:
                with api_errors(project=self.project, action=f"get cluster {name}"):
                    try:
                        found = self.client.get_cluster(name=cluster_path(self.project, location, name))
                    except gexc.NotFound:
                        found = None
            except NotFoundError:
                found = None
        else:
            found = next((c for c in self._clusters() if c.name == name), None)
        if found is None:
            where = f" in {location}" if location else ""
            raise NotFoundError(f"no GKE cluster named {name!r}{where} in project {self.project}")
        return ClusterInfo.from_cluster(found, self.project)

    def expired(self, now: float | None = None) -> builtins.list[ClusterInfo]:
        """The rlcloud-managed clusters whose expiry label lies before ``now`` (what reap deletes). A cluster
        whose expiry label cannot be read (milliseconds, words...) is never among them: the listing warns
        about it."""
        return [i for i in self.list() if i.managed and i.expired(now)]
