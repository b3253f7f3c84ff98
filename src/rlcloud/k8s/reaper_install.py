"""Sends the reaper's objects (:mod:`rlcloud.k8s.reaper_builders`) to a cluster: create, or replace what
exists, so installing again (every ``create()`` of the cluster) updates the image or the identity."""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client as k8s

from rlcloud.k8s.applier import Applier, path_for, translate
from rlcloud.k8s.reaper_builders import REAPER_NAMESPACE, build_reaper_objects

__all__ = ["install_reaper"]

log = logging.getLogger(__name__)


def install_reaper(
    api_client: Any,
    *,
    image: str,
    gcp_service_account: str | None,
    namespace: str = REAPER_NAMESPACE,
    runs_only: bool = False,
) -> list[str]:
    """Create (or replace) the reaper's objects in the cluster ``api_client`` reaches; returns
    ``Kind/name`` of each. Raises an :class:`~rlcloud.errors.RLCloudError` when the API refuses. ``runs_only``:
    a reaper without a Google identity, for runs' and sweeps' budgets only."""
    applier = Applier(api_client)
    done: list[str] = []
    for obj in build_reaper_objects(image, gcp_service_account, namespace, runs_only=runs_only):
        kind, name = obj.kind, obj.metadata.name
        ns = obj.metadata.namespace
        what = f"install the reaper's {kind} {name}"
        try:
            applier.request_json(what, "POST", path_for(kind, ns), body=obj)
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise translate(exc, what) from exc
            if kind != "Namespace":  # a namespace has nothing of ours to update
                # no resourceVersion in the body: an unconditional replace, last writer wins
                applier.checked_json(what, "PUT", path_for(kind, ns, name), body=obj)
        except Exception as exc:
            raise translate(exc, what) from exc
        done.append(f"{kind}/{name}")
    log.info("reaper installed in namespace %s (%s)", namespace, image)
    return done
