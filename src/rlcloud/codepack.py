"""Code archives: a project folder packed deterministically, named by its SHA-256, stored once, unpacked safely.

The client packs the folder a spec's ``code:`` names (:func:`pack`): regular files only, sorted by path,
each with the same fixed time, mode and owner, so the same files give the same bytes, and the same digest,
on any machine and in any order the file system lists them. What must never leave the laptop is left out
whatever the patterns say (:func:`secret_reason`): hidden files and folders (``.git``, ``.env``, ``.kube``,
``.ssh``...), virtual environments (a folder holding ``pyvenv.cfg`` or ``conda-meta``), caches, results
folders, and files that look like keys or credentials by name (``*.pem``, ``kubeconfig``, ``id_rsa``) or by
content (a PEM private key, a service-account or authorized-user JSON, a kubeconfig). The archive is
bounded (:data:`MAX_CODE_BYTES`, :data:`MAX_CODE_FILES`) with an error naming the largest files.

The store keeps archives by digest under ``<results root>/_code/`` (:func:`code_location`); an archive that
is there already is not uploaded again (:func:`publish`). A runner fetches the archive its spec of record
names, checks the digest, and unpacks it read-only into a cache folder (:func:`fetch`): regular files only,
no path leaving the folder, the same bounds. Nothing else in ``_code/`` is ever read (convention 16: data
never acts unless the spec of record names it).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import os
import shutil
import stat
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from rlcloud.errors import SpecError, SpecProblem, WorkloadError
from rlcloud.layout import child
from rlcloud.results import DEFAULT_RESULTS

if TYPE_CHECKING:
    from rlcloud.specs.code import CodeSpec
    from rlcloud.specs.experiment import ExperimentSpec
    from rlcloud.storage.base import Store

__all__ = [
    "CODE_FOLDER",
    "MAX_CODE_BYTES",
    "MAX_CODE_FILES",
    "CodeArchive",
    "archive_name",
    "code_cache",
    "code_location",
    "fetch",
    "pack",
    "pin",
    "publish",
    "remove_tree",
    "secret_reason",
    "unpack",
]

#: Where a results root keeps code archives (not a run: run names are DNS labels, never ``_code``).
CODE_FOLDER = "_code"
#: A code archive holds code, not data sets or checkpoints: 64 MiB of files and 10,000 files at most.
MAX_CODE_BYTES = 64 * 1024 * 1024
MAX_CODE_FILES = 10_000
#: A tar entry costs a 512-byte header (a PAX one for long names, another 512+) and pads to 512 bytes.
_ARCHIVE_OVERHEAD = 2048
#: Every packed file gets these: the bytes of an archive depend on the files' paths and contents only.
_FILE_MODE = 0o644
_MTIME = 0

#: Folders that are never code: caches, tool state and rlcloud's own results (hidden ones go anyway).
_NEVER_FOLDERS = frozenset(
    {"__pycache__", "node_modules", Path(DEFAULT_RESULTS).name, "site-packages", "wandb", "mlruns", "lightning_logs"}
)
#: File names that hold keys or credentials (matched case-insensitively against the name).
_SECRET_NAMES = (
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx", "id_rsa*", "id_dsa*", "id_ecdsa*",
    "id_ed25519*", "kubeconfig*", "*.kubeconfig", "*credentials*.json", "*service-account*.json",
    "*service_account*.json", "*serviceaccount*.json", "*-key.json", "*_key.json", "*.tfstate", "*.tfstate.*",
    "htpasswd", "*.env",
)  # fmt: skip
#: What a key or credentials file holds: a PEM private key, a Google service-account or authorized-user JSON
#: (google-auth's fields), a kubeconfig's users. Checked in every file, so a renamed key is left out too.
_SECRET_CONTENT = (
    (b"PRIVATE KEY-----", "holds a private key"),
    (b'"private_key"', "holds a private key (a service-account key file?)"),
    (b'"refresh_token"', "holds a refresh token (Google user credentials?)"),
    (b"client-key-data:", "holds a Kubernetes client key (a kubeconfig?)"),
    (b"kind: Config", "looks like a kubeconfig"),
)


@dataclass(frozen=True)
class CodeArchive:
    """A packed code folder: the archive's bytes, its digest, and what went in and what was left out."""

    data: bytes
    digest: str
    #: ``(path, size)`` of every packed file, sorted by path
    files: list[tuple[str, int]] = field(default_factory=list)
    #: ``(path, why)`` of the files the secret filter (or a link) kept out; pattern exclusions are not listed
    left_out: list[tuple[str, str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The archive's object name under the code folder (:func:`archive_name`)."""
        return archive_name(self.digest)


def archive_name(digest: str) -> str:
    """``sha256-<hex>.tar``: the object a digest ``sha256:<hex>`` names under ``<results root>/_code/``."""
    return digest.replace(":", "-", 1) + ".tar"


def code_location(results_root: str) -> str:
    """Where a results root keeps code archives: ``<root>/_code``."""
    return child(results_root, CODE_FOLDER)


# ----------------------------------------------------------------------------------------------- packing


def _matches(rel: str, pattern: str) -> bool:
    """A pattern without ``/`` matches any part of ``rel``; with ``/``, ``rel`` or a folder it is in."""
    pattern = pattern.rstrip("/")
    parts = rel.split("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in parts)
    return any(fnmatch.fnmatchcase("/".join(parts[: k + 1]), pattern) for k in range(len(parts)))


def _selected(rel: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    return any(_matches(rel, p) for p in include) and not any(_matches(rel, p) for p in exclude)


def secret_reason(rel: str, content: bytes | None = None) -> str | None:
    """Why the file at ``rel`` (relative, ``/``-separated) must never be packed, or None.

    Hidden files and folders, caches and results folders, key-like names, and (given ``content``) a private
    key, Google credentials or a kubeconfig inside.
    """
    parts = rel.split("/")
    for part in parts[:-1]:
        if part.startswith("."):
            return f"inside the hidden folder {part}"
        if part in _NEVER_FOLDERS:
            return f"inside {part} (not code)"
    name = parts[-1]
    if name.startswith("."):
        return "a hidden file (.env, .netrc and the like hold secrets)"
    lowered = name.lower()
    for pattern in _SECRET_NAMES:
        if fnmatch.fnmatchcase(lowered, pattern):
            return f"named like a key or credentials file ({pattern})"
    if content is not None:
        for marker, why in _SECRET_CONTENT:
            if marker in content:
                return why
    return None


def _is_environment(folder: Path) -> bool:
    """A virtual environment or a conda environment: installed packages, never the project's code."""
    return (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir()


def _walk(root: Path, code: CodeSpec, skip: Sequence[Path]) -> tuple[list[tuple[str, Path]], list[tuple[str, str]]]:
    """The files to pack (``(rel, path)``, sorted by rel) and those left out as secret, links or special."""
    chosen: list[tuple[str, Path]] = []
    left_out: list[tuple[str, str]] = []
    skipped = {p.resolve() for p in skip}
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        rel_here = here.relative_to(root).as_posix()
        keep = []
        for name in sorted(dirs):
            sub = here / name
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            if sub.is_symlink():
                left_out.append((rel + "/", "a link (links are not followed: they may lead out of the folder)"))
            elif name.startswith(".") or name in _NEVER_FOLDERS or _is_environment(sub) or sub.resolve() in skipped:
                continue  # never code; not listed one file at a time (a .git or a venv holds thousands)
            elif any(_matches(rel, p) for p in code.exclude):
                continue
            else:
                keep.append(name)
        dirs[:] = keep
        for name in sorted(files):
            path = here / name
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                left_out.append((rel, "a link (links are not followed: they may lead out of the folder)"))
                continue
            if not stat.S_ISREG(mode) or not _selected(rel, code.include, code.exclude):
                continue
            reason = secret_reason(rel)
            if reason:
                left_out.append((rel, reason))
                continue
            chosen.append((rel, path))
    chosen.sort()
    return chosen, sorted(left_out)


def _too_big(what: str, sizes: list[tuple[str, int]]) -> SpecError:
    largest = sorted(sizes, key=lambda item: -item[1])[:3]
    names = ", ".join(f"{rel} ({size / 2**20:.1f} MiB)" for rel, size in largest)
    return SpecError(
        [
            SpecProblem(
                "code",
                f"{what}: a code archive holds at most {MAX_CODE_FILES} files and {MAX_CODE_BYTES // 2**20} MiB "
                f"(the largest: {names}). Leave data, checkpoints and results out with code.exclude, or name "
                "only the code with code.include",
            )
        ]
    )


def pack(code: CodeSpec, *, skip: Iterable[Path] = ()) -> CodeArchive:
    """Pack the folder ``code.path`` names (see the module docstring); ``skip``: folders left out as well
    (e.g. a local results root inside the project).

    Raises:
        SpecError: on ``code``: the folder is missing, holds nothing to pack, or is over the bounds (naming
            the largest files); on ``code.requirements``: the requirements file is not packed.
    """
    root = Path(code.path).expanduser()
    if not root.is_dir():
        raise SpecError([SpecProblem("code.path", "is not a folder on this machine", code.path)])
    chosen, left_out = _walk(root, code, list(skip))
    sizes = [(rel, path.stat().st_size) for rel, path in chosen]
    total = sum(size for _rel, size in sizes)
    if len(chosen) > MAX_CODE_FILES or total > MAX_CODE_BYTES:
        raise _too_big(f"{code.path} has {len(chosen)} files, {total / 2**20:.1f} MiB to pack", sizes)
    buffer = io.BytesIO()
    files: list[tuple[str, int]] = []
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for rel, path in chosen:
            data = path.read_bytes()
            reason = secret_reason(rel, data)
            if reason:
                left_out.append((rel, reason))
                continue
            info = tarfile.TarInfo(rel)
            info.size, info.mtime, info.mode = len(data), _MTIME, _FILE_MODE
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
            files.append((rel, len(data)))
    if not files:
        raise SpecError(
            [SpecProblem("code", f"nothing to pack in {code.path} (include {code.include}, exclude {code.exclude})")]
        )
    if code.requirements is not None and code.requirements not in {rel for rel, _size in files}:
        raise SpecError(
            [SpecProblem("code.requirements", f"is not among the packed files of {code.path}", code.requirements)]
        )
    data = buffer.getvalue()
    return CodeArchive(data, "sha256:" + hashlib.sha256(data).hexdigest(), files, sorted(left_out))


def pin(spec: ExperimentSpec, *, skip: Iterable[Path] = ()) -> tuple[ExperimentSpec, CodeArchive | None]:
    """``spec`` with its code packed and its digest set (the spec's ``code``, else rlcloud.yaml's), and the
    archive to publish; ``(spec, None)`` without code. A spec whose code folder is not on this machine but
    whose digest is set (a resume from another machine) keeps that digest: the store holds its archive."""
    code = spec.code
    if code is None:
        from rlcloud.config import load_project_config

        code = load_project_config().code
    if code is None:
        return spec, None
    if code.digest is not None and not Path(code.path).expanduser().is_dir():
        return spec, None
    archive = pack(code, skip=skip)
    pinned = code.model_copy(update={"digest": archive.digest})
    return spec.model_copy(update={"code": pinned}), archive


def publish(archive: CodeArchive, store: Store) -> bool:
    """Store ``archive`` under ``store`` (the results root's code folder) unless it is there: True when it was
    uploaded. Create-only, so two starts racing upload it once; the same name is the same bytes."""
    from rlcloud.storage.base import PreconditionFailedError

    info = store.stat(archive.name)
    if info is not None and info.size == len(archive.data):
        return False
    try:
        store.write_bytes(archive.name, archive.data, if_generation_match=0 if info is None else info.generation)
    except PreconditionFailedError:
        return False  # another start stored it a moment ago
    return True


# ------------------------------------------------------------------------------------------- unpacking


def code_cache() -> Path:
    """Where unpacked archives live on this machine or pod: ``$XDG_CACHE_HOME/rlcloud/code`` (default
    ``~/.cache``), one read-only folder per digest, shared by every role and run that uses it."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rlcloud" / "code"


def _member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if (
        not name
        or "\x00" in name
        or "\\" in name
        or path.is_absolute()
        or any(p in ("", ".", "..") for p in path.parts)
    ):
        raise WorkloadError(f"the code archive holds the path {name!r}, which would leave its folder: refused")
    return path


def unpack(data: bytes, digest: str, dest: Path) -> Path:
    """Check ``data`` against ``digest`` and unpack it read-only into ``dest`` (created whole or not at all).

    Raises:
        WorkloadError: the digest differs (a tampered or truncated archive), or an entry is not a regular file
            inside the folder, or the archive is over the bounds. Nothing is left in ``dest`` then.
    """
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise WorkloadError(f"the code archive's digest is {actual}, not the spec of record's {digest}: refused")
    if dest.is_dir():
        return dest  # unpacked before, from an archive of this digest (only a checked one is ever renamed here)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.{os.getpid()}.partial"
    remove_tree(staging)
    staging.mkdir()
    try:
        _extract(data, staging)
        for folder, dirs, _files in os.walk(staging, topdown=False):
            for name in dirs:
                os.chmod(Path(folder) / name, 0o555)
        os.chmod(staging, 0o555)
        try:
            os.rename(staging, dest)
        except OSError:
            if not dest.is_dir():
                raise
            remove_tree(staging)  # another role unpacked the same digest first
    except BaseException:
        remove_tree(staging)
        raise
    return dest


def _extract(data: bytes, into: Path) -> None:
    count = total = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:", encoding="utf-8") as tar:
        for member in tar:
            path = _member_path(member.name)
            if not member.isreg():
                raise WorkloadError(f"the code archive holds {member.name!r}, not a regular file: refused")
            count, total = count + 1, total + member.size
            if count > MAX_CODE_FILES or total > MAX_CODE_BYTES:
                raise WorkloadError(
                    f"the code archive holds more than {MAX_CODE_FILES} files or {MAX_CODE_BYTES // 2**20} MiB: refused"
                )
            target = into.joinpath(*path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None  # a regular file
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(source, out)
            os.chmod(target, 0o444)


def remove_tree(path: Path) -> None:
    """Delete ``path`` and what it holds, read-only folders included (an unpacked archive, an overlay)."""
    if not path.exists():
        return
    for folder, dirs, _files in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(Path(folder) / name, 0o755)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o755)
    shutil.rmtree(path, ignore_errors=True)


def fetch(location: str, digest: str, *, cache: Path | None = None) -> Path:
    """The folder holding the archive ``digest`` names, unpacked from ``location`` (a results root's code
    folder) into ``cache`` (default :func:`code_cache`) unless it is there already.

    Only ``<location>/<archive_name(digest)>`` is read, after its size is checked against the bounds.

    Raises:
        WorkloadError: the archive is missing, too large, tampered with or unsafe (see :func:`unpack`).
    """
    from rlcloud.storage import open_store

    dest = (cache or code_cache()) / digest.replace(":", "-", 1)
    if dest.is_dir():
        return dest
    store = open_store(location)
    name = archive_name(digest)
    info = store.stat(name)
    if info is None:
        raise WorkloadError(f"the code archive {store.describe(name)} does not exist (the spec of record names it)")
    limit = MAX_CODE_BYTES + MAX_CODE_FILES * _ARCHIVE_OVERHEAD
    if info.size > limit:
        raise WorkloadError(f"the code archive {store.describe(name)} is {info.size} bytes, more than {limit}: refused")
    return unpack(store.read_bytes(name), digest, dest)
