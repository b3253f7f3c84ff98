"""Where results live: the results root in effect, one run's location under it, and the local work
directory of a run whose root is in Cloud Storage. Every layer asks here; nothing else spells the rule.

A results root is ``gs://bucket/prefix`` or a directory; one experiment writes to ``<root>/<name>``.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.layout import child

__all__ = [
    "DEFAULT_RESULTS",
    "GS_FORM",
    "check_results_root",
    "is_gcs",
    "local_workdir",
    "object_cache_dir",
    "parse_gs_url",
    "results_location",
    "results_root",
]

#: The results root when neither the call, the spec nor the project config names one.
DEFAULT_RESULTS = "./rlcloud-results"


def is_gcs(root: str) -> bool:
    """Whether ``root`` is a Cloud Storage URL (``gs://...``)."""
    return root.startswith("gs://")


#: Pseudo file systems: results written there would go nowhere (or somewhere dangerous).
_PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
#: Longest path and path component most file systems accept (Linux PATH_MAX and NAME_MAX).
_MAX_PATH, _MAX_NAME = 4096, 255


def check_results_root(root: str) -> str:
    """Check a results root before anything is written, and return it normalised: ``gs://bucket/prefix``
    as given, ``file:///dir`` as ``/dir``, a directory path as given. Raises SpecError (field ``results``)
    saying what is wrong: empty, another URL scheme, a relative ``file://`` URL, a path that is an existing
    file (or under one), under /proc, /sys or /dev, or with a name longer than the file system allows.

    ``--results ''`` is an error here rather than a silent ./rlcloud-results, and ``file:///dir`` means
    /dir rather than ``./file:/dir``.
    """
    from rlcloud.errors import excerpt

    given = root

    def refuse(message: str) -> SpecError:
        return SpecError([SpecProblem("results", message, given)])  # SpecProblem prints a short excerpt

    if not isinstance(root, str) or not root.strip():
        raise refuse("empty: give gs://BUCKET[/PREFIX] or a directory")
    if "\0" in root or "\n" in root:
        raise refuse("a results location cannot contain a NUL or a line break")
    if root.startswith("gs:"):
        parse_gs_url(root)  # a SpecError naming the URL and the valid form
        return root
    if root.startswith("file://"):
        root = root[len("file://") :]
        if not root.startswith("/"):
            raise refuse("file:// URLs need an absolute path: file:///abs/dir")
    elif "://" in root:
        scheme = root.split("://", 1)[0]
        raise refuse(
            f"unsupported scheme {excerpt(scheme, 20)}; valid: gs://BUCKET[/PREFIX], file:///DIR or a directory"
        )
    if len(root) > _MAX_PATH:
        raise refuse(f"a path longer than {_MAX_PATH} characters")
    path = Path(root).expanduser()
    long_part = next((part for part in path.parts if len(part.encode()) > _MAX_NAME), None)
    if long_part is not None:
        raise refuse(f"the name {excerpt(long_part, 40)} is longer than {_MAX_NAME} bytes, the file system's limit")
    absolute = Path(os.path.abspath(path))
    real = Path(os.path.realpath(absolute))  # a symlink into /proc is /proc
    if any(a == Path(p) or a.is_relative_to(p) for a in (absolute, real) for p in _PSEUDO_ROOTS):
        raise refuse(f"{absolute} is in a pseudo file system ({', '.join(_PSEUDO_ROOTS)}); give a real directory")
    for candidate in (absolute, *absolute.parents):
        try:
            if candidate.exists():
                if not candidate.is_dir():
                    where = "is" if candidate == absolute else f"is under {candidate}, which is"
                    raise refuse(f"{where} an existing file, not a directory")
                break
        except OSError as exc:  # EACCES on a parent, ELOOP: say so instead of a traceback later
            raise refuse(f"cannot use {absolute}: {exc.strerror or type(exc).__name__}") from None
    return root


def results_root(spec_results: str | None, results: str | None) -> str:
    """The results root in effect, checked and normalised (:func:`check_results_root`: ``file:///dir`` is
    ``/dir``, never ``./file:/dir``): the argument, else the spec's, else the project config's, else
    ./rlcloud-results. The one place experiments, sweeps, their lists and attach resolve a root."""
    if results is not None:
        return check_results_root(results)  # `results=""` is an error, not the default
    if spec_results:
        return check_results_root(spec_results)
    from rlcloud.config import load_project_config

    return check_results_root(load_project_config().results or DEFAULT_RESULTS)


def results_location(root: str, name: str, *, resolve: bool = True) -> str:
    """Where one experiment's results live: ``<root>/<name>``, a gs:// URL or a directory.

    A local directory is made absolute unless ``resolve`` is false: a pod's path (or a fake kubelet's)
    is not this machine's business.
    """
    if is_gcs(root) or not resolve:
        return child(root, name)
    return str((Path(root).expanduser() / name).resolve())


def object_cache_dir() -> Path:
    """Where stored objects read back from gs:// are cached by generation (rlcloud.storage.cache):
    ``$XDG_CACHE_HOME/rlcloud/objects`` (the tests' is their own: tests/conftest.py sets XDG_CACHE_HOME)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlcloud" / "objects"


def local_workdir(root: str, name: str) -> Path:
    """The directory on this machine where a local run of ``name`` works: its results location for a
    local root, a cache directory (``$XDG_CACHE_HOME/rlcloud/local/<hash of root>/<name>``) that the
    runner syncs to the bucket for a gs:// root."""
    if is_gcs(root):
        digest = hashlib.sha256(root.rstrip("/").encode()).hexdigest()[:12]
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return cache / "rlcloud" / "local" / digest / name
    return Path(results_location(root, name))


GS_FORM = (
    "gs://BUCKET[/PREFIX] (bucket: 3-63 characters of a-z, 0-9, '-', '_', '.', "
    "starting and ending with a letter or digit)"
)

# GCS bucket naming rules: lowercase letters, digits, '-', '_', '.'; 3-63 characters (up to 222 with
# dots, each dot-separated part <= 63); starts and ends with a letter or digit.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


def parse_gs_url(url: str, *, field: str = "results") -> tuple[str, str]:
    """Split ``gs://bucket/prefix`` into ``(bucket, prefix)``; the prefix has no leading/trailing '/'.

    Raises :class:`~rlcloud.errors.SpecError` naming ``field``, the URL and the valid form.
    """
    if not url.startswith("gs://"):
        raise SpecError([SpecProblem(field=field, message=f"not a gs:// URL; valid form: {GS_FORM}", value=url)])
    rest = url[len("gs://") :]
    bucket, _, prefix = rest.partition("/")
    problems: list[str] = []
    if not bucket:
        problems.append("the bucket name is missing")
    elif not _BUCKET_RE.match(bucket) or ".." in bucket or len(bucket) > 222:
        problems.append(f"{bucket!r} is not a valid bucket name")
    elif "." not in bucket and len(bucket) > 63:
        problems.append(f"bucket name {bucket!r} is longer than 63 characters")
    elif any(len(part) > 63 for part in bucket.split(".")):
        problems.append(f"a dot-separated part of bucket name {bucket!r} is longer than 63 characters")
    prefix = prefix.strip("/")
    if prefix and any(p in ("", ".", "..") for p in prefix.split("/")):
        problems.append(f"prefix {prefix!r} has an empty, '.' or '..' part")
    if any(c in url for c in "\r\n\x00") or " " in bucket:
        problems.append("it contains whitespace or control characters")
    if problems:
        raise SpecError(
            [
                SpecProblem(field=field, message=f"malformed GCS URL: {p}; valid form: {GS_FORM}", value=url)
                for p in problems
            ]
        )
    return bucket, prefix
