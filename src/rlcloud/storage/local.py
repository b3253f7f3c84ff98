"""A results store in a local directory, with the same semantics as the GCS store.

Writes go to a temporary file in the target directory and are renamed into place (atomic on POSIX).
Conditional writes take an ``flock`` on ``<root>/.rlcloud-lock`` so that check-and-rename is atomic
between processes on the same machine. A file's generation is its ``st_mtime_ns``; a conditional
write makes sure the new generation differs from the old one even within the file system's timestamp
granularity. Files whose name starts with ``.rlcloud-`` (temporaries, the lock) are never listed.

A directory of results is data others may have shaped (a download, a copy, a shared disk): symbolic links in
it are never followed. Only regular files are listed, read or copied, never through a link (:func:`open_within`),
and a file is written only where its directory resolves inside the root (:func:`check_within`).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlcloud.errors import NotFoundError, RLCloudError, StorageError
from rlcloud.storage.base import (
    INTERNAL_PREFIX,
    ObjectInfo,
    ObjectList,
    PreconditionFailedError,
    Progress,
    Store,
    _check_name,
    crc32c_of_file,
    is_internal,
    tmp_sibling,
)

__all__ = ["LocalStore", "check_within", "open_within"]

_LOCK_NAME = INTERNAL_PREFIX + "lock"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_within(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` (a file below ``root``) when its directory resolves outside ``root``: a symbolic link on
    the way (``logs -> /etc``) would read or write elsewhere. OSError (ELOOP) naming the path."""
    if not _inside(os.path.realpath(os.path.dirname(path)), os.path.realpath(root)):
        raise OSError(errno.ELOOP, "a symbolic link on its way leads out of the directory", str(path))


def open_within(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of the regular file ``path`` below ``root``, opened without following a symbolic
    link (its own, or a directory's on the way out of ``root``) and never blocking (a FIFO, a device). OSError
    (ELOOP, or EINVAL for what is not a regular file) otherwise."""
    check_within(root, path)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


class LocalStore(Store):
    """A results location in a local directory (``file:///dir`` or a plain path)."""

    def __init__(self, root: str | os.PathLike[str], *, max_workers: int = 8) -> None:
        self.root = Path(root).absolute()
        self.url = "file://" + str(self.root)
        self.max_workers = max(1, max_workers)
        # CRC32C per file keyed by (size, mtime_ns, inode), so an unchanged file is hashed once.
        self._crc_cache: dict[str, tuple[int, int, int, str]] = {}
        self._cache_lock = threading.Lock()

    # -- helpers ---------------------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        return self.root / _check_name(name)

    def _info(self, name: str, path: Path, st: os.stat_result) -> ObjectInfo:
        key = str(path)
        with self._cache_lock:
            cached = self._crc_cache.get(key)
        if cached and cached[:3] == (st.st_size, st.st_mtime_ns, st.st_ino):
            crc = cached[3]
        else:
            crc = crc32c_of_file(path)
            with self._cache_lock:
                self._crc_cache[key] = (st.st_size, st.st_mtime_ns, st.st_ino, crc)
        return ObjectInfo(name=name, size=st.st_size, crc32c=crc, generation=st.st_mtime_ns, updated=st.st_mtime)

    def _remember(self, path: Path, crc: str) -> ObjectInfo:
        st = path.stat()
        with self._cache_lock:
            self._crc_cache[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ino, crc)
        rel = path.relative_to(self.root).as_posix()
        return ObjectInfo(name=rel, size=st.st_size, crc32c=crc, generation=st.st_mtime_ns, updated=st.st_mtime)

    def _tmp_for(self, path: Path) -> Path:
        return tmp_sibling(path, f"{INTERNAL_PREFIX}tmp-")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _io_error(self, exc: OSError, what: str) -> RLCloudError:
        if exc.errno == errno.ENOENT:
            return NotFoundError(f"{what} does not exist")
        if exc.errno == errno.ELOOP:
            return StorageError(f"{what}: a symbolic link, never followed in a results directory")
        return StorageError(f"{what}: {exc.strerror or exc}")

    # -- Store -----------------------------------------------------------------------------------

    def child(self, prefix: str) -> LocalStore:
        """A store rooted at ``prefix`` below this directory."""
        return LocalStore(self.root / _check_name(prefix.strip("/")), max_workers=self.max_workers)

    def _list(self, prefix: str) -> ObjectList:
        """Every file below the root whose relative name starts with ``prefix``, sorted."""
        out: ObjectList = []
        # Walk only the deepest directory the prefix names completely, not the whole tree.
        base_rel = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root / base_rel if base_rel else self.root
        if not start.is_dir():
            return []
        try:
            for dirpath, dirnames, filenames in os.walk(start):
                dirnames[:] = [d for d in dirnames if not d.startswith(INTERNAL_PREFIX)]
                for fname in filenames:
                    if fname.startswith(INTERNAL_PREFIX):
                        continue
                    path = Path(dirpath, fname)
                    name = path.relative_to(self.root).as_posix()
                    if not name.startswith(prefix):
                        continue
                    try:
                        st = path.lstat()
                    except FileNotFoundError:  # removed while listing
                        continue
                    if stat.S_ISREG(st.st_mode):  # not a link (never followed), a FIFO or a socket
                        out.append(self._info(name, path, st))
        except OSError as exc:
            raise self._io_error(exc, f"listing {self.describe(prefix)}") from exc
        out.sort(key=lambda o: o.name)
        return out

    def list_named(self, names: Sequence[str]) -> ObjectList:
        """The files called one of ``names`` in the root and in each folder directly below it; nothing else is
        walked or hashed (a sweep's checkpoints stay unread)."""
        out: ObjectList = []
        try:
            below = [e.name + "/" for e in os.scandir(self.root) if e.is_dir(follow_symlinks=False)]
            folders = ["", *sorted(f for f in below if not f.startswith(INTERNAL_PREFIX))]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self._io_error(exc, f"listing {self.describe()}") from exc
        for folder in folders:
            for base in names:
                if is_internal(base):
                    continue
                info = self.stat(folder + base)
                if info is not None:
                    out.append(info)
        out.sort(key=lambda o: o.name)
        return out

    def read_versioned(self, name: str, limit: int) -> tuple[bytes, int]:
        """The file's content (at most ``limit`` bytes, else RecordError) and its generation, from one open."""
        from rlcloud.errors import RecordError

        try:
            with os.fdopen(open_within(self.root, self._path(name)), "rb") as fh:
                generation = os.fstat(fh.fileno()).st_mtime_ns
                data = fh.read(limit + 1)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotFoundError(f"{self.describe(name)} does not exist") from exc
        except OSError as exc:
            raise self._io_error(exc, self.describe(name)) from exc
        if len(data) > limit:
            raise RecordError(f"{self.describe(name)}: more than the {limit} bytes a record of its kind holds")
        return data, generation

    def stat(self, name: str) -> ObjectInfo | None:
        """The file's size, CRC32C and generation (mtime_ns), or None."""
        path = self._path(name)
        try:
            check_within(self.root, path)
            st = path.lstat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # behind a link leading out: no such object here
                return None
            raise self._io_error(exc, self.describe(name)) from exc
        if not stat.S_ISREG(st.st_mode):  # a link is never followed: there is no such object
            return None
        return self._info(name, path, st)

    def read_bytes(self, name: str, *, start: int = 0) -> bytes:
        """The file's content from byte ``start``."""
        try:
            with os.fdopen(open_within(self.root, self._path(name)), "rb") as fh:
                if start:
                    fh.seek(start)
                return fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotFoundError(f"{self.describe(name)} does not exist") from exc
        except OSError as exc:
            raise self._io_error(exc, self.describe(name)) from exc

    def write_bytes(self, name: str, data: bytes, *, if_generation_match: int | None = None) -> ObjectInfo:
        """Write atomically (tmp + fsync + rename); conditionally under the store lock."""
        from rlcloud.storage.base import crc32c_of_bytes

        path = self._path(name)
        crc = crc32c_of_bytes(data)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._tmp_for(path)
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if if_generation_match is None:
                os.replace(tmp, path)
                return self._remember(path, crc)
            with self._locked():
                try:
                    old = path.stat().st_mtime_ns
                except FileNotFoundError:
                    old = 0
                if old != if_generation_match:
                    tmp.unlink(missing_ok=True)
                    raise PreconditionFailedError(
                        f"{self.describe(name)} has generation {old}, expected {if_generation_match}",
                        name=name,
                        expected=if_generation_match,
                    )
                os.replace(tmp, path)
                # mtime granularity can be coarse: make sure a reader sees a new generation.
                new = path.stat().st_mtime_ns
                if new == old:
                    os.utime(path, ns=(new + 1, new + 1))
                return self._remember(path, crc)
        except StorageError:
            raise
        except OSError as exc:
            raise self._io_error(exc, f"writing {self.describe(name)}") from exc

    def _copy(self, src: Path, dst: Path, *, src_root: Path | None = None) -> str:
        """Copy src to dst atomically, returning the CRC32C of the bytes copied. With ``src_root`` (this store's
        root, when downloading) ``src`` is read only as a regular file inside it, never through a link."""
        import google_crc32c

        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._tmp_for(dst)
        crc = 0
        try:
            fd = open_within(src_root, src) if src_root is not None else os.open(src, os.O_RDONLY | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fin, open(tmp, "wb") as fout:
                while chunk := fin.read(4 << 20):
                    crc = google_crc32c.extend(crc, chunk)
                    fout.write(chunk)
            os.replace(tmp, dst)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")

    def upload_files(self, pairs: Sequence[tuple[Path, str]], *, progress: Progress | None = None) -> ObjectList:
        """Copy local files into the store concurrently (each atomically)."""
        total = sum(_size(p) for p, _ in pairs)
        done = 0

        def one(pair: tuple[Path, str]) -> ObjectInfo:
            src, name = pair
            dst = self._path(name)
            try:
                crc = self._copy(Path(src), dst)
            except FileNotFoundError as exc:
                raise NotFoundError(f"local file {src} does not exist (uploading to {self.describe(name)})") from exc
            except OSError as exc:
                raise self._io_error(exc, f"copying {src} to {self.describe(name)}") from exc
            return self._remember(dst, crc)

        results: ObjectList = []
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            for info in pool.map(one, pairs):
                results.append(info)
                done += info.size
                if progress:
                    progress(done, total)
        return results

    def download_files(self, items: Sequence[tuple[ObjectInfo, Path]], *, progress: Progress | None = None) -> None:
        """Copy stored files to local paths concurrently, verifying each against its listed CRC32C."""
        total = sum(info.size for info, _ in items)
        done = 0

        def one(item: tuple[ObjectInfo, Path]) -> int:
            info, dst = item
            src = self._path(info.name)
            try:
                crc = self._copy(src, Path(dst), src_root=self.root)
            except FileNotFoundError as exc:
                raise NotFoundError(f"{self.describe(info.name)} does not exist") from exc
            except OSError as exc:
                raise self._io_error(exc, f"copying {self.describe(info.name)} to {dst}") from exc
            if crc != info.crc32c:
                # It may have been rewritten since it was listed: accept the newer, consistent version.
                now = self.stat(info.name)
                if now is None or now.crc32c != crc:
                    raise StorageError(
                        f"checksum mismatch downloading {self.describe(info.name)} to {dst}: "
                        f"expected crc32c {info.crc32c}, got {crc}"
                    )
            return info.size

        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            for size in pool.map(one, items):
                done += size
                if progress:
                    progress(done, total)

    def delete(self, name: str) -> None:
        """Remove the file (idempotent) and the directories it leaves empty."""
        path = self._path(name)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._io_error(exc, f"deleting {self.describe(name)}") from exc
        with self._cache_lock:
            self._crc_cache.pop(str(path), None)
        parent = path.parent
        while parent != self.root and parent.is_relative_to(self.root):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
