"""What every check of ``rlcloud doctor`` (:mod:`rlcloud.gke.doctor`) shares: :class:`Check`, its outcome; the
failure a check's call raises; the roles that let a caller see what a check reads; the image name pattern."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rlcloud.logsafety import redact

__all__ = ["PULL_ROLES", "Check"]

#: Roles that let a principal pull from an Artifact Registry repository (reader, and the roles that include it).
PULL_ROLES = frozenset(
    {
        "roles/artifactregistry.reader",
        "roles/artifactregistry.writer",
        "roles/artifactregistry.repoAdmin",
        "roles/artifactregistry.admin",
        "roles/editor",
        "roles/owner",
    }
)
_TIMEOUT = 30.0
#: The roles that let a caller see what each observing call reads (Google's IAM roles reference,
#: cloud.google.com/iam/docs/roles-permissions/<service>); docs/gke-setup.md step 8 lists them per check.
SEE_APIS = "roles/serviceusage.serviceUsageConsumer"  # serviceusage.services.get
SEE_QUOTAS = "roles/compute.viewer"  # compute.regions.get, compute.projects.get
SEE_IMAGES = "roles/artifactregistry.reader"  # artifactregistry.tags.get
SEE_PROJECT = "roles/browser"  # resourcemanager.projects.get
SEE_POLICIES = "roles/iam.securityReviewer"  # *.getIamPolicy, iam.roles.get
SEE_BUCKET = "roles/storage.legacyBucketReader"  # storage.buckets.get (roles/storage.objectAdmin lacks it)
_AR_IMAGE_RE = re.compile(
    r"^([a-z0-9-]+)-docker\.pkg\.dev/([^/]+)/([^/]+)/(.+?)(?::([\w.-]+))?(?:@(sha256:[0-9a-f]{64}))?$"
)


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``status`` is OK, FAIL, SKIP or WARN; ``fix`` the one command that fixes a FAIL."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        """True unless the check failed (a WARN could not tell, and refuses nothing)."""
        return self.status != "FAIL"

    def __str__(self) -> str:
        line = f"{self.status:<4} {self.name}: {self.detail}"
        return line + (f"\n     fix: {self.fix}" if self.fix else "")


class _CheckFailedError(Exception):
    """A check's API call failed: carries the FAIL (or WARN) the check reports instead."""

    def __init__(self, check: Check) -> None:
        super().__init__(check.detail)
        self.check = check


def _describe(exc: BaseException) -> str:
    """A short, secret-free account of a failed call: the error's class and Google's message, without the URL
    the REST transports put in front of it."""
    message = str(getattr(exc, "message", None) or exc)
    message = re.sub(r"^[A-Z]+ \S+: ", "", message).splitlines()[0] if message else ""
    return redact(f"{type(exc).__name__}: {message}"[:240])


def _grants(bindings: Any, member: str, roles: frozenset[str]) -> bool:
    """True when a policy's ``bindings`` give ``member`` (or everyone) one of ``roles``."""
    who = {member, "allUsers", "allAuthenticatedUsers"}
    return any(b.role in roles and who & set(b.members) for b in bindings)
