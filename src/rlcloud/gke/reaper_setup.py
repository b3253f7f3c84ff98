"""Installing the in-cluster reaper on a GKE cluster with a ttl, an autodown or a budget (:mod:`rlcloud.gke.reaper` is
the program; :mod:`rlcloud.k8s.reaper_install` the Kubernetes objects; this decides what to install, with
which identity and image, and says in one line what it did).

What each job of the reaper needs:

* stopping a run or a sweep over its money budget (:mod:`rlcloud.gke.budgets`): Kubernetes permissions only
  (its ServiceAccount's RBAC: read Jobs, pods and nodes, patch Jobs, create Events) and an image to run in;
  without a Google identity the reaper is installed for that alone (``--runs-only``);
* deleting the cluster (its ttl, autodown or the cluster's own budget): also a Google identity that may get and
  delete it (``reaper_service_account``, docs/gke-setup.md#7-teardown-inside-the-cluster).

A budget is enforced in the cluster or refused before anything is created (:func:`require_budget_enforcer`);
a ttl or an autodown without the Google identity keeps its fallback (``rlcloud cluster reap``) and a warning.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

from rlcloud.errors import BackendError, SpecError, SpecProblem

if TYPE_CHECKING:
    from rlcloud.gke.cluster import GkeCluster

__all__ = ["BudgetScope", "install_reaper", "require_budget_enforcer"]

log = logging.getLogger("rlcloud.gke")

#: What a budget needs the reaper for: stopping runs (Kubernetes permissions) or deleting the cluster (Google too).
BudgetScope = Literal["runs", "cluster"]


def _setup(cluster: GkeCluster, run_image: str | None) -> tuple[str | None, str | None]:
    """The reaper's Google service account and image (the cluster's, which default to rlcloud.yaml's as the facade
    handed it down, else the run's)."""
    return cluster.reaper_service_account, cluster.reaper_image or run_image


def _missing(cluster: GkeCluster, scope: BudgetScope, account: str | None, image: str | None) -> str | None:
    """What the reaper lacks to enforce a budget of ``scope`` on ``cluster`` (one line), None when nothing."""
    if not image:
        return (
            "the in-cluster reaper that enforces it needs a runner image to run in: add `image: <your cpu runner "
            "image>` to rlcloud.yaml (docs/images.md)"
        )
    if scope == "cluster" and not account:
        return (
            "deleting the cluster at its budget needs the in-cluster reaper's Google identity: create the reaper's "
            "service account (docs/gke-setup.md#7-teardown-inside-the-cluster) and add `reaper_service_account: "
            f"rlcloud-reaper@{cluster.project}.iam.gserviceaccount.com` to rlcloud.yaml, or remove the cluster's "
            "`budget:` (a run's or a sweep's budget needs no Google identity)"
        )
    return None


def require_budget_enforcer(
    cluster: GkeCluster, what: str, scope: BudgetScope, *, run_image: str | None = None
) -> None:
    """Refuse (SpecError on ``budget``, exit 2 in the CLI) a budget the in-cluster reaper could not enforce on
    ``cluster``, saying what to set up; called before anything is created. ``what``: whose budget (``experiment
    x``, ``cluster y``); ``scope``: ``runs`` (stopping runs: an image) or ``cluster`` (deleting it: an image and the
    reaper's Google service account); ``run_image``: the run's image (the reaper runs in it when nothing else is
    set)."""
    account, image = _setup(cluster, run_image)
    missing = _missing(cluster, scope, account, image)
    if missing:
        raise SpecError([SpecProblem("budget", f"{what}: its budget would not be enforced: {missing}")])


def install_reaper(cluster: GkeCluster, *, run_image: str | None = None, required: BudgetScope | None = None) -> str:
    """Install (or update) the in-cluster reaper: the whole of it (ttl, autodown, budgets) with the Google identity,
    else for runs' and sweeps' budgets only (Kubernetes permissions). Returns one line saying what it did.

    ``required``: a budget depends on it. None (a ttl or an autodown alone): never raises; a cluster without the
    reaper's identity or image set up, or one whose API refuses, keeps the fallback (``rlcloud cluster reap`` acts
    on the expiry label) and the line, also logged as a warning, says what is missing and how to fix it.
    ``runs`` or ``cluster``: what the budget needs is installed or :class:`~rlcloud.errors.BackendError` says why
    not (:func:`require_budget_enforcer` refused what was not set up before anything was created).
    """
    account, image = _setup(cluster, run_image)
    fallback = "its ttl is enforced only by `rlcloud cluster reap`, autodown and a cluster budget not at all"
    missing = _missing(cluster, required, account, image) if required is not None else None
    if missing:
        raise BackendError(f"cluster {cluster.name}: a budget would not be enforced: {missing}")
    if not account and required is None:  # a ttl or autodown alone: the reaper would have nothing to do
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
        from rlcloud.k8s.reaper_install import install_reaper as install

        try:
            api = cluster.kube_client()
            install(api, image=image, gcp_service_account=account, runs_only=not account)
        except Exception as exc:  # the create succeeded: a reaper problem must never undo or fail it
            note = f"cluster {cluster.name}: the in-cluster reaper could not be installed ({fallback}): {exc}"
            if required is not None:
                raise BackendError(f"{note}: a budget would not be enforced") from exc
        else:
            if account:
                return f"cluster {cluster.name}: in-cluster reaper installed (namespace rlcloud-system, every 5 min)"
            note = (
                f"cluster {cluster.name}: in-cluster reaper installed for runs' and sweeps' budgets only (no "
                f"reaper_service_account: {fallback}): create the reaper's service account "
                "(docs/gke-setup.md#7-teardown-inside-the-cluster) and add `reaper_service_account: "
                f"rlcloud-reaper@{cluster.project}.iam.gserviceaccount.com` to rlcloud.yaml"
            )
            log.warning("%s", note)
            return note
    log.warning("%s", note)
    return note
