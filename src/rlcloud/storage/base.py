"""The results store interface: one location (``gs://bucket/prefix`` or a directory), the same semantics.

A :class:`Store` is rooted at one location; object names are ``/``-separated paths relative to that root
(``metrics.jsonl``, ``checkpoints/LATEST``). Both implementations (``gcs.GcsStore``, ``local.LocalStore``)
offer listing with size and CRC32C, byte and file transfers, idempotent deletes, and a conditional write
(``if_generation_match``; ``0`` = only if absent) that the checkpoint ``LATEST`` pointer relies on.

This module is light on purpose: ``google.cloud`` is imported only when a ``gs://`` URL is opened.
"""

from __future__ import annotations

import base64
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlcloud.errors import StorageError
from rlcloud.results import parse_gs_url  # re-exported: the URL rules live with the results rules

__all__ = [
    "INTERNAL_PREFIX",
    "ObjectInfo",
    "ObjectList",
    "PreconditionFailedError",
    "Progress",
    "Store",
    "crc32c_of_bytes",
    "crc32c_of_file",
    "crc32c_text",
    "is_internal",
    "local_targets",
    "parse_gs_url",
    "tmp_sibling",
]

#: ``progress(done_bytes, total_bytes)``: called as transfers complete (from the calling thread).
Progress = Callable[[int, int], None]


class PreconditionFailedError(StorageError):
    """A conditional write found another generation than the one expected (someone else wrote first)."""

    def __init__(self, message: str, *, name: str, expected: int) -> None:
        super().__init__(message)
        self.name = name
        self.expected = expected


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object: name relative to the store root, size in bytes, CRC32C and generation.

    ``crc32c`` is the base64 of the big-endian CRC32C, as GCS reports it. ``generation`` changes with
    every write (GCS object generation; a directory store uses the file's mtime in nanoseconds).
    """

    name: str
    size: int
    crc32c: str
    generation: int
    updated: float | None = None


#: A listing, what ``Store.list`` returns (an alias: the method shadows ``list`` in class bodies).
ObjectList = list[ObjectInfo]


def crc32c_of_bytes(data: bytes) -> str:
    """CRC32C of ``data`` in the GCS form (base64 of the 4 big-endian bytes)."""
    import google_crc32c  # C extension; imported here to keep `import rlcloud` minimal

    return base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode("ascii")


def crc32c_text(crc: int) -> str:
    """A CRC32C value (an int, e.g. ``google_crc32c.extend``'s) in the GCS form."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


def crc32c_of_file(path: str | os.PathLike[str], *, chunk_size: int = 4 << 20) -> str:
    """CRC32C of a file's content in the GCS form, read in chunks (constant memory)."""
    import google_crc32c

    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_size):
            crc = google_crc32c.extend(crc, chunk)
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


#: A path part starting with this is this machine's own state, never results: the local backend's process
#: records (``.rlcloud-local/``, ``.rlcloud-sweep/``: pids it may signal), a directory store's lock and
#: temporaries. Such names are never written to, read from or listed from a store, whichever path (sync,
#: download, restore, a facade) asks, so a results prefix that holds them can never make this machine
#: believe it runs, or signal, a process (docs/security.md).
INTERNAL_PREFIX = ".rlcloud-"


def is_internal(name: str) -> bool:
    """Whether a ``/``-separated name has a part that is this machine's own state (:data:`INTERNAL_PREFIX`)."""
    return any(part.startswith(INTERNAL_PREFIX) for part in name.split("/"))


def _check_name(name: str) -> str:
    """Reject object names that would escape the store root, that GCS and a directory treat differently,
    or that are this machine's own state (:data:`INTERNAL_PREFIX`)."""
    if not name or name.startswith("/") or name.endswith("/"):
        raise StorageError(f"invalid object name {name!r}: a relative path like 'dir/file.txt' is required")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise StorageError(f"invalid object name {name!r}: empty, '.' and '..' path parts are not allowed")
    if is_internal(name):
        raise StorageError(
            f"invalid object name {name!r}: a part starting with {INTERNAL_PREFIX!r} is this machine's process "
            "state, never stored or fetched"
        )
    return name


#: the longest file name (one path component, in bytes) and path most local file systems hold
NAME_MAX = 255
PATH_MAX = 4096


def tmp_sibling(path: Path, prefix: str = ".rlcloud-tmp-") -> Path:
    """A unique hidden temporary file next to ``path`` whose name stays within :data:`NAME_MAX` bytes (it
    keeps as much of ``path``'s name as fits, to say what it was for): a 250-byte name still gets one."""
    head = f"{prefix}{uuid.uuid4().hex[:12]}-"
    room = NAME_MAX - len(head.encode())
    tail = path.name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    return path.with_name(head + tail)


def _local_problem(name: str) -> str | None:
    """Why object ``name`` cannot be a file below a local directory, or None when it can."""
    try:
        _check_name(name)
    except StorageError as exc:
        return str(exc)
    if "\0" in name:
        return "it contains a NUL character, which no local file name can hold"
    longest = max(name.split("/"), key=lambda part: len(part.encode()))
    if len(longest.encode()) > NAME_MAX:
        return f"a part of it is {len(longest.encode())} bytes long; local file names hold at most {NAME_MAX}"
    if len(name.encode()) > PATH_MAX - 512:
        return f"it is {len(name.encode())} bytes long; local paths hold at most {PATH_MAX}"
    return None


def local_targets(
    listing: Sequence[ObjectInfo], root: Path
) -> tuple[list[tuple[ObjectInfo, Path]], list[tuple[str, str]]]:
    """Where each listed object goes below ``root``, and the objects that cannot go anywhere, with why.

    A store may hold names no directory can: a NUL, a part longer than :data:`NAME_MAX` bytes, ``..``
    (never written outside ``root``), a name that is both an object and a folder of others (``a`` and
    ``a/b``: the folder's objects win, unless ``a`` is a run's file such as ``metrics.jsonl``), or one
    whose place is taken by a local file or folder. Each such
    object is left out, alone, so one odd name never stops the rest. Zero-byte ``folder/`` objects (the
    Cloud Console's folder placeholders) are folders, not files: left out without a problem.

    Returns:
        ``(targets, skipped)``: ``(info, local path)`` pairs to download, and ``(name, reason)`` pairs.
    """
    targets: list[tuple[ObjectInfo, Path]] = []
    skipped: list[tuple[str, str]] = []
    good = []
    for info in listing:
        if info.name.endswith("/") and info.size == 0 and not _local_problem(info.name.rstrip("/") or "/"):
            continue  # a folder placeholder: the folder appears with the files in it
        problem = _local_problem(info.name)
        if problem:
            skipped.append((info.name, problem))
        else:
            good.append(info)
    from rlcloud.layout import FILE_NAMES

    folders = {name.rsplit("/", 1)[0] for name in (i.name for i in good) if "/" in name}
    folders = {"/".join(f.split("/")[: k + 1]) for f in folders for k in range(f.count("/") + 1)}
    # A run's own file (metrics.jsonl) beside objects under its name (metrics.jsonl/inner.txt): the file is the
    # run's, the objects are strays; a stray must never hide the run's file. Other names: the folder wins.
    names = {info.name for info in good}
    files = {f for f in folders if f in names and f.rsplit("/", 1)[-1] in FILE_NAMES}
    for info in good:
        path = root / info.name
        owner = next((f for f in files if info.name.startswith(f + "/")), None)
        if owner is not None:
            skipped.append((info.name, f"{owner} is a file of the run, not a folder; {owner} is downloaded"))
            continue
        if info.name in folders and info.name not in files:
            skipped.append((info.name, f"it is also a folder of other objects ({info.name}/...), which are downloaded"))
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                skipped.append((info.name, f"{path} is a local folder"))
                continue
            parent = path.parent
            while parent != root and not parent.exists():
                parent = parent.parent
            if parent != root and not parent.is_dir():
                skipped.append((info.name, f"{parent} is a local file, not a folder"))
                continue
        except OSError as exc:
            skipped.append((info.name, f"{path}: {exc.strerror or exc}"))
            continue
        targets.append((info, path))
    return targets, skipped


class Store(ABC):
    """A results location. Names are relative to the store root; see the module docstring.

    Contract for both implementations:

    - ``list`` is recursive, sorted by name, and one logical listing call (GCS pages included); it never
      returns an internal name (:func:`is_internal`): implementations provide ``_list``, this class filters.
    - ``read_bytes`` of a missing object raises :class:`~rlcloud.errors.NotFoundError` naming it.
    - ``write_bytes`` replaces atomically: a reader sees the old or the new content, never a mix.
      With ``if_generation_match`` (``0`` = must not exist) it raises :class:`PreconditionFailedError`
      when the stored generation differs.
    - ``delete`` is idempotent: deleting a missing object is not an error.
    - Transfers verify CRC32C; a mismatch that persists after retries raises ``StorageError``.
    """

    #: the location as a URL (``gs://bucket/prefix`` or ``file:///abs/dir``)
    url: str

    @abstractmethod
    def child(self, prefix: str) -> Store:
        """A store rooted at ``prefix`` below this one (e.g. one experiment under a results root)."""

    def list(self, prefix: str = "") -> ObjectList:
        """Every object whose name starts with ``prefix`` (recursive), sorted by name; internal names
        (:func:`is_internal`: another machine's process state planted in a bucket) are left out."""
        return [info for info in self._list(prefix) if not is_internal(info.name)]

    @abstractmethod
    def _list(self, prefix: str) -> ObjectList:
        """Every stored object under ``prefix``, sorted by name (:meth:`list` filters it)."""

    @abstractmethod
    def stat(self, name: str) -> ObjectInfo | None:
        """The object's metadata, or None when it does not exist."""

    def exists(self, name: str) -> bool:
        """Whether the object exists."""
        return self.stat(name) is not None

    @abstractmethod
    def read_bytes(self, name: str, *, start: int = 0) -> bytes:
        """The object's content from byte ``start`` on (``start`` past the end gives ``b""``)."""

    def read_text(self, name: str) -> str:
        """The object's content decoded as UTF-8."""
        return self.read_bytes(name).decode("utf-8")

    def read_record_bytes(self, name: str, limit: int) -> bytes:
        """The content of a stored record, refused when larger than ``limit`` bytes
        (:class:`~rlcloud.errors.RecordError` naming it) before it is read: a record is input, and a huge
        object planted under a run's name must not be pulled into memory. NotFoundError when absent."""
        from rlcloud.errors import NotFoundError, RecordError

        info = self.stat(name)
        if info is None:
            raise NotFoundError(f"{self.describe(name)} does not exist")
        if info.size > limit:
            raise RecordError(
                f"{self.describe(name)}: {info.size} bytes, more than the {limit} a record of its kind holds; not read"
            )
        data = self.read_bytes(name)
        if len(data) > limit:  # rewritten, larger, since the stat
            raise RecordError(f"{self.describe(name)}: more than the {limit} bytes a record of its kind holds")
        return data

    def read_versioned(self, name: str, limit: int) -> tuple[bytes, int]:
        """A stored record and the generation of exactly those bytes (what a cache keys them by), refused as
        :meth:`read_record_bytes` refuses. NotFoundError when absent. A store that can tell the generation
        with the content (GCS: one request) overrides this stat-then-read."""
        from rlcloud.errors import NotFoundError

        info = self.stat(name)
        if info is None:
            raise NotFoundError(f"{self.describe(name)} does not exist")
        return self.read_record_bytes(name, limit), info.generation

    def list_named(self, names: Sequence[str]) -> ObjectList:
        """The objects called one of ``names`` at the root or in a folder directly below it (``spec.yaml``,
        ``<trial>/spec.yaml``): a run's or a sweep's records, without its checkpoints' objects where the
        store can leave them out (a directory store looks at those paths only; GCS lists with a glob)."""
        wanted = set(names)
        return [i for i in self.list() if i.name.count("/") <= 1 and i.name.rsplit("/", 1)[-1] in wanted]

    @abstractmethod
    def write_bytes(self, name: str, data: bytes, *, if_generation_match: int | None = None) -> ObjectInfo:
        """Write ``data`` atomically; with ``if_generation_match`` only if the generation still matches."""

    def write_text(self, name: str, text: str, *, if_generation_match: int | None = None) -> ObjectInfo:
        """Write ``text`` as UTF-8 (see :meth:`write_bytes`)."""
        return self.write_bytes(name, text.encode("utf-8"), if_generation_match=if_generation_match)

    @abstractmethod
    def upload_files(self, pairs: Sequence[tuple[Path, str]], *, progress: Progress | None = None) -> ObjectList:
        """Upload ``(local path, name)`` pairs concurrently; returns what was stored, in input order."""

    def upload_file(self, path: str | os.PathLike[str], name: str) -> ObjectInfo:
        """Upload one file (see :meth:`upload_files`)."""
        return self.upload_files([(Path(path), name)])[0]

    @abstractmethod
    def download_files(self, items: Sequence[tuple[ObjectInfo, Path]], *, progress: Progress | None = None) -> None:
        """Download objects (as listed) to local paths concurrently, each written atomically and verified
        against the listed CRC32C. Parent directories are created."""

    def download_file(self, name: str, path: str | os.PathLike[str]) -> ObjectInfo:
        """Download one object to ``path`` (atomically, CRC32C verified)."""
        from rlcloud.errors import NotFoundError

        info = self.stat(name)
        if info is None:
            raise NotFoundError(f"{self.describe(name)} does not exist")
        self.download_files([(info, Path(path))])
        return info

    @abstractmethod
    def delete(self, name: str) -> None:
        """Delete an object; a missing object is not an error."""

    def delete_many(self, names: Sequence[str]) -> None:
        """Delete several objects (missing ones are skipped)."""
        for name in names:
            self.delete(name)

    def close(self) -> None:  # noqa: B027 - optional: only stores that open connections override it
        """Release connections this store opened (a client passed in is left to its owner)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self, name: str = "") -> str:
        """The URL of an object of this store (for messages)."""
        return self.url.rstrip("/") + ("/" + name if name else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
