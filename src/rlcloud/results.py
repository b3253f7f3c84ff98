"""Where results live: the results root in effect, one run's location under it, and the local work
directory of a run whose root is in Cloud Storage. Every layer asks here; nothing else spells the rule.

A results root is ``gs://bucket/prefix`` or a directory; one experiment writes to ``<root>/<name>``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["DEFAULT_RESULTS", "is_gcs", "local_workdir", "results_location", "results_root"]

#: The results root when neither the call, the spec nor the project config names one.
DEFAULT_RESULTS = "./rlcloud-results"


def is_gcs(root: str) -> bool:
    """Whether ``root`` is a Cloud Storage URL (``gs://...``)."""
    return root.startswith("gs://")


def results_root(spec_results: str | None, results: str | None) -> str:
    """The results root in effect: the argument, else the spec's, else the project config's, else
    ./rlcloud-results."""
    if results:
        return results
    if spec_results:
        return spec_results
    from rlcloud.config import load_project_config

    return load_project_config().results or DEFAULT_RESULTS


def results_location(root: str, name: str, *, resolve: bool = True) -> str:
    """Where one experiment's results live: ``<root>/<name>``, a gs:// URL or a directory.

    A local directory is made absolute unless ``resolve`` is false: a pod's path (or a fake kubelet's)
    is not this machine's business.
    """
    if is_gcs(root) or not resolve:
        return root.rstrip("/") + "/" + name
    return str((Path(root).expanduser() / name).resolve())


def local_workdir(root: str, name: str) -> Path:
    """The directory on this machine where a local run of ``name`` works: its results location for a
    local root, a cache directory (``$XDG_CACHE_HOME/rlcloud/local/<hash of root>/<name>``) that the
    runner syncs to the bucket for a gs:// root."""
    if is_gcs(root):
        digest = hashlib.sha256(root.rstrip("/").encode()).hexdigest()[:12]
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return cache / "rlcloud" / "local" / digest / name
    return Path(results_location(root, name))
