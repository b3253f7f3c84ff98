"""Installing the in-cluster reaper on a GKE cluster with a ttl or autodown (:mod:`rlcloud.gke.reaper` is
the program; :mod:`rlcloud.k8s.reaper_install` the Kubernetes objects; this decides what to install, with
which identity and image, and says in one line what it did)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rlcloud.errors import RLCloudError

if TYPE_CHECKING:
    from rlcloud.gke.cluster import GkeCluster

__all__ = ["install_reaper"]

log = logging.getLogger("rlcloud.gke")


def install_reaper(cluster: GkeCluster) -> str:
    """Install (or update) the in-cluster reaper that deletes this cluster when its ttl or autodown is due.

    Never raises: a cluster without the reaper's identity or image set up, or one whose API refuses,
    keeps today's behaviour (``rlcloud cluster reap`` acts on the expiry label) and the returned line,
    also logged as a warning, says what is missing and how to fix it.
    """
    from rlcloud.config import load_project_config

    try:
        config = load_project_config()
        account = cluster.reaper_service_account or config.reaper_service_account
        image = cluster.reaper_image or config.image
    except RLCloudError as exc:
        account = image = None
        log.debug("rlcloud.yaml unreadable for the reaper: %s", exc)
    fallback = "its ttl is enforced only by `rlcloud cluster reap`, autodown not at all"
    if not account:
        note = (
            f"cluster {cluster.name}: no in-cluster reaper ({fallback}): create the reaper's service account "
            "(docs/gke-setup.md#7-teardown-inside-the-cluster) and add `reaper_service_account: "
            f"rlcloud-reaper@{cluster.project}.iam.gserviceaccount.com` to rlcloud.yaml"
        )
    elif not image:
        note = (
            f"cluster {cluster.name}: no in-cluster reaper ({fallback}): no runner image to run it in: add "
            "`image: <your cpu runner image>` to rlcloud.yaml (docs/images.md)"
        )
    else:
        from rlcloud.k8s.reaper_install import install_reaper

        try:
            api = cluster.kube_client()
            install_reaper(api, image=image, gcp_service_account=account)
        except Exception as exc:  # the create succeeded: a reaper problem must never undo or fail it
            note = f"cluster {cluster.name}: the in-cluster reaper could not be installed ({fallback}): {exc}"
        else:
            return f"cluster {cluster.name}: in-cluster reaper installed (namespace rlcloud-system, every 5 minutes)"
    log.warning("%s", note)
    return note
