"""open_store: a results location (``gs://bucket/prefix``, ``file:///dir`` or a directory) to its Store.

The one module that knows both store kinds; they know only :mod:`rlcloud.storage.base`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.storage.base import Store, parse_gs_url

__all__ = ["open_store"]


def open_store(
    url: str | os.PathLike[str],
    *,
    client: Any = None,
    credentials: Any = None,
    project: str | None = None,
    max_workers: int | None = None,
) -> Store:
    """Open a results location: ``gs://bucket/prefix``, ``file:///dir`` or a plain directory path.

    For ``gs://`` URLs, ``client`` (a ``google.cloud.storage.Client``) is used when given; otherwise
    one is built from ``credentials`` (default: ``google.auth.default()``), or anonymously when
    ``STORAGE_EMULATOR_HOST`` is set. No network call is made here: a missing bucket or a denied
    permission surfaces on first use as :class:`~rlcloud.errors.NotFoundError` /
    :class:`~rlcloud.errors.AuthError` naming the location. ``max_workers`` bounds concurrent transfers
    (default: the store's own, 32 for GCS, whose small requests wait on the network, 8 for a directory).
    A directory store creates its directory on first write.
    """
    text = os.fspath(url)
    if not text:
        raise SpecError(
            [SpecProblem(field="results", message="empty location; give gs://BUCKET[/PREFIX] or a directory")]
        )
    if text.startswith("gs:"):
        bucket, prefix = parse_gs_url(text)
        from rlcloud.storage.gcs import GcsStore  # google.cloud only when a gs:// URL is used

        return GcsStore(
            bucket, prefix, client=client, credentials=credentials, project=project, **_workers(max_workers)
        )
    if "://" in text and not text.startswith("file://"):
        scheme = text.split("://", 1)[0]
        raise SpecError(
            [
                SpecProblem(
                    field="results",
                    message=f"unsupported scheme {scheme!r}; valid: gs://BUCKET[/PREFIX], file:///DIR or a directory",
                    value=text,
                )
            ]
        )
    from rlcloud.storage.local import LocalStore

    if text.startswith("file://"):
        path = text[len("file://") :]
        if not path.startswith("/"):
            raise SpecError(
                [
                    SpecProblem(
                        field="results", message="file:// URLs need an absolute path: file:///abs/dir", value=text
                    )
                ]
            )
        return LocalStore(Path(path), **_workers(max_workers))
    return LocalStore(Path(text).expanduser(), **_workers(max_workers))


def _workers(max_workers: int | None) -> dict[str, Any]:
    return {} if max_workers is None else {"max_workers": max_workers}
