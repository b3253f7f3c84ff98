"""The doctor's ``images`` check (:meth:`rlcloud.gke.doctor.Doctor.check_images`): the runner images exist in
Artifact Registry and the cluster's nodes may pull them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlcloud.gke.checks import (
    _AR_IMAGE_RE,
    _TIMEOUT,
    PULL_ROLES,
    SEE_IMAGES,
    SEE_POLICIES,
    Check,
    _CheckFailedError,
    _grants,
)

if TYPE_CHECKING:
    from rlcloud.gke.doctor import Doctor

__all__ = ["check_images"]


def check_images(doctor: Doctor) -> Check:
    """The runner images exist (Artifact Registry images are looked up by tag, or by digest when they name
    one: ``...@sha256:...`` is a version, never ``:latest``) and the cluster's nodes may
    pull them (the repositories' and their projects' IAM policies; folder and organisation policies are
    not read)."""
    images = doctor._images()
    if not images:
        if doctor.images is not None:
            return Check("images", "SKIP", "no runner image named (each experiment names its own)")
        return Check(
            "images",
            "FAIL",
            "no image in rlcloud.yaml: a cluster run has no image to pull",
            "build and push one (docs/images.md), then set image: and gpu_image: in rlcloud.yaml",
        )
    from google.cloud import artifactregistry_v1

    found: list[str] = []
    outside: list[str] = []
    unseen: list[Check] = []  # images these credentials may not look up: cannot tell
    repositories: dict[tuple[str, str, str], None] = {}  # (project, location, repository), in order
    for image in images:
        match = _AR_IMAGE_RE.match(image)
        if not match:
            outside.append(image)
            continue
        location, project, repository, package, tag, digest = match.groups()
        variant = "gpu" if image == doctor.config.gpu_image else "cpu"
        try:
            with (
                doctor._calling(
                    "images",
                    f"look up {image}",
                    api="artifactregistry.googleapis.com",
                    denied=doctor._grant_fix(SEE_IMAGES),
                    not_found=(
                        f"{image} does not exist",
                        f"gcloud builds submit --config images/cloudbuild.yaml --substitutions=_VARIANT={variant} .",
                    ),
                    observe=SEE_IMAGES,
                ),
                doctor._client(artifactregistry_v1.ArtifactRegistryClient) as client,
            ):
                # a package name with slashes is one path segment in the resource name: %2F
                package_name = (
                    f"projects/{project}/locations/{location}/repositories/{repository}/packages/"
                    f"{package.replace('/', '%2F')}"
                )
                if digest:  # what the nodes pull (a tag beside it is ignored): the version, never :latest
                    client.get_version(name=f"{package_name}/versions/{digest}", timeout=_TIMEOUT)
                else:
                    client.get_tag(name=f"{package_name}/tags/{tag or 'latest'}", timeout=_TIMEOUT)
        except _CheckFailedError as failed:
            if failed.check.status != "WARN":
                return failed.check
            unseen.append(failed.check)
        else:
            found.append(image)
        # whether or not the tag could be seen, the nodes' access to its repository still can be
        repositories[(project, location, repository)] = None
    try:
        pull = _node_pull(doctor, list(repositories))
    except _CheckFailedError as failed:
        pull = failed.check
    if pull is not None and pull.status == "FAIL":  # the repository it names says which images
        return pull
    notes = [f"{i} (not in Artifact Registry: not checked)" for i in outside]
    detail = ", ".join(found + notes)
    warnings = [*unseen, *([pull] if pull is not None and pull.status == "WARN" else [])]
    if warnings:
        seen = f"{detail}; " if detail else ""
        return Check("images", "WARN", seen + "; ".join(w.detail for w in warnings), warnings[0].fix)
    if pull is None:
        return Check("images", "OK", detail)
    return Check("images", "OK", f"{detail}; {pull.detail}")


def _node_pull(doctor: Doctor, repositories: list[tuple[str, str, str]]) -> Check | None:
    """Whether the nodes may pull from each of ``repositories``: a binding of their service account (or of
    everyone) to a role in :data:`PULL_ROLES`, on the repository or on its project. None: nothing to pull
    from Artifact Registry."""
    if not repositories:
        return None
    from google.api_core import exceptions as gexc
    from google.cloud import artifactregistry_v1, resourcemanager_v3

    account = doctor._node_account()
    member = f"serviceAccount:{account}"
    unknown: list[str] = []
    for project, location, repository in repositories:
        path = f"projects/{project}/locations/{location}/repositories/{repository}"
        readers = [
            (artifactregistry_v1.ArtifactRegistryClient, path, "artifactregistry.googleapis.com"),
            (resourcemanager_v3.ProjectsClient, f"projects/{project}", "cloudresourcemanager.googleapis.com"),
        ]
        granted, unreadable = False, []
        for client_class, resource, api in readers:
            what = f"read the IAM policy of {resource}"
            try:
                with doctor._client(client_class) as client:
                    policy = client.get_iam_policy(request={"resource": resource}, timeout=_TIMEOUT)
            except (gexc.PermissionDenied, gexc.Forbidden) as exc:
                if getattr(exc, "reason", None) == "SERVICE_DISABLED":
                    failure = doctor._failure("images", exc, what, api=api, denied="", observe=SEE_POLICIES)
                    raise _CheckFailedError(failure) from exc
                # reading a policy takes more than pulling does: say so, and refuse nothing
                unreadable.append(resource)
                continue
            except Exception as exc:  # auth, transport, other API errors: the check's FAIL
                raise _CheckFailedError(doctor._failure("images", exc, what, api=api, denied="")) from exc
            if _grants(policy.bindings, member, PULL_ROLES):
                granted = True
                break
        if granted:
            continue
        if unreadable:
            where = f"{location}-docker.pkg.dev/{project}/{repository}"
            unknown.append(f"{where} (the IAM policy of {' and '.join(unreadable)} is not readable here)")
            continue
        return Check(
            "images",
            "FAIL",
            f"the nodes run as {account}, which may not pull from {location}-docker.pkg.dev/{project}/"
            f"{repository} (no roles/artifactregistry.reader or a role including it, on it or its project)",
            f"gcloud artifacts repositories add-iam-policy-binding {repository} --location={location} "
            f"--member={member} --role=roles/artifactregistry.reader --project={project}",
        )
    if unknown:
        return Check(
            "images",
            "WARN",
            f"cannot tell whether the nodes ({account}) may pull from {'; '.join(unknown)}; grant "
            f"{SEE_POLICIES} to see",
            doctor._grant_fix(SEE_POLICIES),
        )
    return Check("images", "OK", f"the nodes ({account}) may pull them")
