"""Incremental sync of a local results directory to a store, atomic checkpoint publication, and resume.

:class:`Syncer` mirrors ``local_dir`` to a :class:`~rlcloud.storage.base.Store`:

- one listing call per sync; a file is uploaded only when the stored object is missing or differs in
  size or CRC32C (local CRCs are cached by size/mtime/inode, so an unchanged file is not re-read);
- checkpoints follow the protocol of docs/contracts.md: the files of ``checkpoints/<name>/`` first, then
  ``checkpoints/LATEST`` written with a generation precondition. A checkpoint directory is uploaded only
  once the local ``checkpoints/LATEST`` names it (it is complete then), so readers that follow
  ``LATEST`` never see half a checkpoint, even if the uploader dies between two files;
- checkpoint directories that this syncer saw locally and that the runner has since pruned are deleted
  from the store after ``LATEST`` has moved on, and so are a previous runner's once they are older than
  the newest ``keep_checkpoints`` (so a restarted runner leaves no checkpoint behind for good);
- hidden files and directories (``.progress.json.tmp-123``, ``checkpoints/.tmp-ckpt-...``) are skipped.

:meth:`Syncer.start` runs it every N seconds in a thread (and once more at :meth:`Syncer.stop` and at
interpreter exit); :class:`SyncHook` adapts it to the runner loop's hooks, :func:`make_hooks` builds
that from ``RLCLOUD_RESULTS`` (and tees the process's output into ``logs/``), :func:`ship_logs` does the
same for a role that only has a log to ship. :func:`restore_latest` brings the latest complete checkpoint
(and the metrics, progress and logs) into an empty local directory so that a restarted runner continues.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import logging
import os
import signal
import stat
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rlcloud import layout
from rlcloud.errors import NotFoundError, StorageError
from rlcloud.runenv import RunnerEnv
from rlcloud.storage.base import ObjectInfo, PreconditionFailedError, Store, crc32c_of_file, local_targets
from rlcloud.storage.stores import open_store
from rlcloud.stored import MAX_NAME_RECORD_BYTES

__all__ = [
    "SyncHook",
    "SyncReport",
    "Syncer",
    "make_hooks",
    "read_latest",
    "restore_earlier_checkpoints",
    "restore_latest",
    "ship_logs",
]

logger = logging.getLogger(__name__)

#: The checkpoints' objects: ``checkpoints/<name>/...``.
_CHECKPOINTS_PREFIX = f"{layout.CHECKPOINTS}/"
#: What a resumed runner needs besides the checkpoint and layout.RESTORED_FILES: its logs.
RESTORED_PREFIXES = (f"{layout.LOGS}/",)
# A file modified this recently may change again within the file system's mtime granularity: re-hash it.
_FRESH_S = 2.0

#: Seconds between two syncs when ``RLCLOUD_SYNC_INTERVAL`` does not say.
DEFAULT_SYNC_INTERVAL = 30.0


@dataclass
class SyncReport:
    """What one :meth:`Syncer.sync` did."""

    uploaded: list[str] = field(default_factory=list)
    bytes_uploaded: int = 0
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)
    published: str | None = None
    listing_calls: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class _LocalFile:
    path: Path
    size: int
    crc32c: str


def read_latest(store: Store) -> tuple[str, int] | None:
    """The checkpoint name ``checkpoints/LATEST`` holds and that object's generation, or None."""
    for _ in range(3):
        info = store.stat(layout.LATEST)
        if info is None:
            return None
        try:
            name = store.read_record_bytes(layout.LATEST, MAX_NAME_RECORD_BYTES).decode("utf-8", "replace").strip()
        except NotFoundError:
            continue  # deleted between stat and read: look again
        return (name, info.generation) if name else None
    return None


class Syncer:
    """Mirror ``local_dir`` to ``store`` incrementally; see the module docstring.

    ``include``: when given, only files matching one of these globs are synced (e.g. ``["logs/*"]`` for
    an environment server that ships only its log); ``exclude``: globs to skip. Both are matched against
    the relative path and the file name. With ``prune_checkpoints``, checkpoint directories the runner
    deleted locally are deleted from the store, and so are stored ones never seen locally (a previous
    runner's) once they are older than the newest ``keep_checkpoints`` (the runner keeps 3); the one
    LATEST names is never deleted.
    """

    def __init__(
        self,
        local_dir: str | os.PathLike[str],
        store: Store,
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        prune_checkpoints: bool = True,
        keep_checkpoints: int = 3,
    ) -> None:
        if keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints must be >= 1, got {keep_checkpoints}")
        self.local_dir = Path(local_dir)
        self.store = store
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.prune_checkpoints = prune_checkpoints
        self.keep_checkpoints = keep_checkpoints
        self._lock = threading.Lock()
        self._crc_cache: dict[str, tuple[int, int, int, str]] = {}
        self._published: tuple[str, int] | None = None  # (name, generation) of the stored LATEST
        self._seen_checkpoints: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._interval = 30.0
        self._exit_hook_armed = False
        self._exit_hook_registered = False
        self._sync_thread: int | None = None
        self._previous_sigterm: Any = None
        self.last_report: SyncReport | None = None
        self.last_error: BaseException | None = None
        self.syncs = 0

    # -- local side ------------------------------------------------------------------------------

    def _skipped(self, rel: str) -> bool:
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts):
            return True
        if self.include and not any(
            fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(parts[-1], pat) for pat in self.include
        ):
            return True
        return any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(parts[-1], pat) for pat in self.exclude)

    def _crc(self, rel: str, path: Path, st: os.stat_result) -> str:
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        cached = self._crc_cache.get(rel)
        if cached and cached[:3] == key and time.time() - st.st_mtime > _FRESH_S:
            return cached[3]
        crc = crc32c_of_file(path)
        self._crc_cache[rel] = (*key, crc)
        return crc

    def _scan(self) -> dict[str, _LocalFile]:
        files: dict[str, _LocalFile] = {}
        if not self.local_dir.is_dir():
            return files
        for dirpath, dirnames, filenames in os.walk(self.local_dir):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fname in filenames:
                path = Path(dirpath, fname)
                rel = path.relative_to(self.local_dir).as_posix()
                if self._skipped(rel):
                    continue
                try:
                    st = path.lstat()
                    # A link is never followed (it may lead anywhere: its target would be uploaded), nor a FIFO.
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    crc = self._crc(rel, path, st)
                except FileNotFoundError:  # replaced or pruned while scanning
                    continue
                files[rel] = _LocalFile(path, st.st_size, crc)
        return files

    def _local_latest(self) -> str | None:
        try:
            name = (self.local_dir / layout.LATEST).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return name or None

    # -- the sync --------------------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Upload what is new or changed, publish the checkpoint the local LATEST names, prune.

        Makes one listing call; with nothing changed, that is the only request.
        """
        with self._lock:
            self._sync_thread = threading.get_ident()
            try:
                return self._sync()
            finally:
                self._sync_thread = None

    def _sync(self) -> SyncReport:
        started = time.monotonic()
        report = SyncReport()
        from rlcloud.storage import logs

        if logs._active:  # this process tees its output into the workdir: include the latest lines
            logs.drain_output(timeout=0.5)
        # LATEST is read before the scan: its directory is complete by then (the runner writes the
        # directory first), so the scan sees all of that checkpoint's files.
        latest_local = self._local_latest()
        local = self._scan()
        remote = {o.name: o for o in self.store.list()}
        report.listing_calls = 1

        ckpt_dirs = {rel.split("/")[1] for rel in local if rel.startswith(_CHECKPOINTS_PREFIX) and rel.count("/") >= 2}
        if latest_local and latest_local != self._published_name(remote):
            self._publish(latest_local, local, remote, report)

        regular = {rel: f for rel, f in local.items() if not rel.startswith(_CHECKPOINTS_PREFIX)}
        self._upload_changed(regular, remote, report)

        if self.prune_checkpoints:
            self._prune(ckpt_dirs, remote, report)
        self._seen_checkpoints |= ckpt_dirs
        report.seconds = time.monotonic() - started
        self.last_report = report
        self.syncs += 1
        if report.uploaded or report.deleted or report.published:
            logger.info(
                "synced %s to %s: %d uploaded (%.1f MB), %d unchanged, %d deleted%s in %.2f s",
                self.local_dir,
                self.store.url,
                len(report.uploaded),
                report.bytes_uploaded / 1e6,
                report.unchanged,
                len(report.deleted),
                f", published checkpoint {report.published}" if report.published else "",
                report.seconds,
            )
        return report

    def publish_checkpoint(self, name: str) -> SyncReport:
        """Upload ``checkpoints/<name>/`` (what differs), then point the stored LATEST at it.

        The local directory must be complete. Idempotent: publishing the current LATEST again uploads
        nothing. Raises ``StorageError`` (``PreconditionFailedError``) if another writer moved LATEST.
        """
        with self._lock:
            report = SyncReport()
            local = {rel: f for rel, f in self._scan().items() if rel.startswith(f"{_CHECKPOINTS_PREFIX}{name}/")}
            remote = {o.name: o for o in self.store.list(_CHECKPOINTS_PREFIX)}
            report.listing_calls = 1
            if name != self._published_name(remote):
                self._publish(name, local, remote, report, strict=True)
            return report

    def _published_name(self, remote: dict[str, ObjectInfo]) -> str | None:
        info = remote.get(layout.LATEST)
        if info is None:
            self._published = None
            return None
        if self._published is not None and self._published[1] == info.generation:
            return self._published[0]
        # Someone (a previous runner, a restore) wrote it: one read tells the name.
        try:
            name = self.store.read_record_bytes(layout.LATEST, MAX_NAME_RECORD_BYTES).decode("utf-8", "replace").strip()
        except NotFoundError:
            return None
        self._published = (name, info.generation)
        return name

    def _upload_changed(
        self, files: dict[str, _LocalFile], remote: dict[str, ObjectInfo], report: SyncReport
    ) -> list[ObjectInfo]:
        todo = []
        for rel, f in sorted(files.items()):
            have = remote.get(rel)
            if have is not None and have.size == f.size and have.crc32c == f.crc32c:
                report.unchanged += 1
            else:
                todo.append((rel, f))
        if not todo:
            return []
        try:
            stored = self.store.upload_files([(f.path, rel) for rel, f in todo])
        except NotFoundError:
            # A local file vanished between the scan and its upload (a temporary, a pruned
            # checkpoint): upload what still exists and let the next sync catch up.
            todo = [(rel, f) for rel, f in todo if f.path.exists()]
            stored = self.store.upload_files([(f.path, rel) for rel, f in todo])
        for (rel, f), info in zip(todo, stored, strict=True):
            report.uploaded.append(rel)
            report.bytes_uploaded += info.size
            remote[rel] = info
            if info.crc32c != f.crc32c:
                # Changed while uploading (an appended log): the store holds the bytes sent; the next
                # sync sees the difference and uploads again.
                self._crc_cache.pop(rel, None)
        return stored

    def _publish(
        self,
        name: str,
        local: dict[str, _LocalFile],
        remote: dict[str, ObjectInfo],
        report: SyncReport,
        *,
        strict: bool = False,
    ) -> None:
        prefix = f"{_CHECKPOINTS_PREFIX}{name}/"
        files = {rel: f for rel, f in local.items() if rel.startswith(prefix)}
        if not files:
            pointer = self.local_dir / layout.LATEST
            msg = f"checkpoint {name!r} named by {pointer} has no files in {self.local_dir / prefix}"
            if strict:
                raise StorageError(msg)
            logger.warning("%s; not publishing it", msg)
            return
        try:
            stored = self._upload_changed(files, remote, report)
        except NotFoundError:
            if strict:
                raise
            logger.warning("checkpoint %s was pruned locally while uploading; not publishing it", name)
            return
        for info in stored:
            if info.crc32c != files[info.name].crc32c:
                raise StorageError(
                    f"checkpoint file {files[info.name].path} changed while it was uploaded to "
                    f"{self.store.describe(info.name)}; a checkpoint directory must not change once LATEST names it"
                )
        expected = remote[layout.LATEST].generation if layout.LATEST in remote else 0
        try:
            info = self.store.write_text(layout.LATEST, name, if_generation_match=expected)
        except PreconditionFailedError:
            # Our own write may have landed with its answer lost, and the library's retry then found
            # the new generation: that is success. Anything else means another writer.
            current = read_latest(self.store)
            if current is None or current[0] != name:
                raise PreconditionFailedError(
                    f"{self.store.describe(layout.LATEST)} was changed by another writer "
                    f"(now {current[0] if current else None!r}) "
                    f"while publishing checkpoint {name!r}; is a second runner writing to this location?",
                    name=layout.LATEST,
                    expected=expected,
                ) from None
            self._published = current
            now = self.store.stat(layout.LATEST)
            if now is not None:
                remote[layout.LATEST] = now
        else:
            self._published = (name, info.generation)
            remote[layout.LATEST] = info  # the write's answer describes the object: no read-back request
        report.published = name
        logger.info("published checkpoint %s to %s", name, self.store.describe(prefix))

    def _prune(self, ckpt_dirs: set[str], remote: dict[str, ObjectInfo], report: SyncReport) -> None:
        published = self._published[0] if self._published else None
        stored = {n.split("/")[1] for n in remote if n.startswith(_CHECKPOINTS_PREFIX) and n.count("/") >= 2}
        # Those this syncer saw locally and the runner has since pruned; and those only the store holds
        # (left by a previous runner of this experiment: a restart restores just the latest) once they
        # fall out of the newest keep_checkpoints, the runner's own retention.
        gone = self._seen_checkpoints - ckpt_dirs
        if ckpt_dirs:  # only a syncer that has checkpoints of its own judges the store's (not a log shipper)
            newest = set(sorted(stored | ckpt_dirs)[-self.keep_checkpoints :])
            gone |= stored - self._seen_checkpoints - ckpt_dirs - newest
        if published:
            gone.discard(published)
        self._seen_checkpoints -= gone
        doomed = [
            n for n in remote if n.startswith(_CHECKPOINTS_PREFIX) and n.count("/") >= 2 and n.split("/")[1] in gone
        ]
        if doomed:
            self.store.delete_many(doomed)
            report.deleted.extend(doomed)

    # -- background ------------------------------------------------------------------------------

    def start(self, interval_s: float = 30.0, *, handle_sigterm: bool = False) -> Syncer:
        """Sync every ``interval_s`` seconds in a daemon thread, and once more at :meth:`stop` / exit.

        A failing sync is logged (and kept in ``last_error``); the next one retries. With
        ``handle_sigterm`` (main thread only), SIGTERM chains to the previous handler, or exits with
        143 after the final sync when there was none; leave it off when the caller handles SIGTERM.
        """
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if self._thread is not None and self._thread.is_alive():
            return self
        self._interval = interval_s
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"rlcloud-sync:{self.store.url}", daemon=True)
        self._thread.start()
        self._arm_exit_hook()
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def request_sync(self) -> None:
        """Ask the background thread to sync now (returns at once); syncs inline when not started."""
        if self._thread is not None and self._thread.is_alive():
            self._wake.set()
        else:
            self.sync()

    def stop(self, *, final_sync: bool = True, timeout: float | None = None) -> SyncReport | None:
        """Stop the background thread and (by default) sync once more; raises that sync's error."""
        thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout)
        self._exit_hook_armed = False
        if self._previous_sigterm is not None:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None
        return self.sync() if final_sync else None

    @property
    def running(self) -> bool:
        """Whether the background thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.sync()
                self.last_error = None
            except Exception as exc:  # keep syncing: the store may come back
                self.last_error = exc
                logger.warning("sync of %s to %s failed (will retry): %s", self.local_dir, self.store.url, exc)

    def _arm_exit_hook(self) -> None:
        self._exit_hook_armed = True
        if self._exit_hook_registered:
            return
        self._exit_hook_registered = True
        # The final sync uses thread pools, which refuse work once the interpreter has started shutting
        # down threads, i.e. before plain atexit callbacks run. threading's own exit hooks run earlier,
        # in reverse order of registration: importing concurrent.futures.thread first (it registers
        # one) makes ours run while pools still work.
        import concurrent.futures.thread  # noqa: F401

        ref = weakref.ref(self)

        def hook() -> None:
            syncer = ref()
            if syncer is not None and syncer._exit_hook_armed:
                syncer._at_exit()

        register = getattr(threading, "_register_atexit", None)
        if register is not None:
            register(hook)
        else:  # pragma: no cover - other Pythons
            atexit.register(hook)

    def _at_exit(self) -> None:
        try:
            self.stop(final_sync=True)
        except Exception as exc:
            logger.error("final sync of %s to %s failed: %s", self.local_dir, self.store.url, exc)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)
            return
        # Sync once more now, unless this very thread was interrupted inside a sync (it holds the lock;
        # waiting for it would deadlock): then exit and let the exit hook try.
        if self._sync_thread != threading.get_ident():
            self._at_exit()
        raise SystemExit(143)


class SyncHook:
    """The runner loop's hooks (``on_tick``, ``on_checkpoint``, ``on_finish``) over a :class:`Syncer`.

    With a background thread (``start()``), a checkpoint wakes the thread and training goes on at once;
    ``on_finish`` stops the thread and syncs a last time (so the final state and checkpoint are stored
    before the process exits). Without one, ``on_tick`` syncs inline every ``interval_s``.
    """

    def __init__(self, syncer: Syncer, *, interval_s: float = 30.0) -> None:
        self.syncer = syncer
        self.interval_s = interval_s
        self._last = time.monotonic()

    def start(self) -> SyncHook:
        """Start the syncer's background thread."""
        self.syncer.start(self.interval_s)
        return self

    def on_tick(self) -> None:
        """Inline periodic sync when no background thread runs."""
        if not self.syncer.running and time.monotonic() - self._last >= self.interval_s:
            self._last = time.monotonic()
            self.syncer.sync()

    def on_checkpoint(self, name: str) -> None:
        """A checkpoint is complete locally: get it (and LATEST) into the store soon."""
        self.syncer.request_sync()

    def on_finish(self, state: str) -> None:
        """Training ended: stop the thread and sync everything once more (and again at exit, for the
        last log lines written after this)."""
        self.syncer.stop(final_sync=True)
        self.syncer._arm_exit_hook()

    def close(self) -> None:
        """Same as a finish without a state: stop and sync (idempotent)."""
        self.syncer.stop(final_sync=True)


def restore_latest(store: Store, local_dir: str | os.PathLike[str], *, progress: Any = None) -> str | None:
    """Bring the latest complete checkpoint into ``local_dir`` so a runner continues from it.

    Reads the stored ``checkpoints/LATEST``, downloads that checkpoint's directory, the records a
    runner appends to (``metrics.jsonl``, ``evaluation.jsonl``), ``progress.json`` and ``logs/``, and
    writes the local ``LATEST`` last. Returns the checkpoint name, or None when the store has none (then
    only the records and logs are restored, if any). Files that exist locally are left alone, so it is
    meant for an empty (or fresh) directory; a local LATEST means nothing is downloaded at all.
    """
    local = Path(local_dir)
    if (local / layout.LATEST).exists():
        logger.info("%s already has a checkpoint; not restoring from %s", local, store.url)
        return None
    latest = read_latest(store)
    name = latest[0] if latest else None
    wanted: list[ObjectInfo] = []
    listing = store.list()
    for info in listing:
        n = info.name
        in_ckpt = name is not None and n.startswith(f"{_CHECKPOINTS_PREFIX}{name}/")
        restored = in_ckpt or n in layout.RESTORED_FILES or n.startswith(RESTORED_PREFIXES)
        if restored and not os.path.lexists(local / n):
            wanted.append(info)
    if name is not None and not any(i.name.startswith(f"{_CHECKPOINTS_PREFIX}{name}/") for i in listing):
        raise StorageError(
            f"{store.describe(layout.LATEST)} names {name!r}, "
            f"but {store.describe(_CHECKPOINTS_PREFIX + name)}/ is empty"
        )
    from rlcloud.storage.client import destinations

    targets, skipped = local_targets(wanted, local)
    for skipped_name, reason in skipped:  # a log with an odd name must not stop the run from resuming
        logger.warning("not restored: %s: %s", store.describe(skipped_name), reason)
    store.download_files(destinations(local, targets), progress=progress)
    if name is not None:
        tmp = local / layout.CHECKPOINTS / ".LATEST.restore-tmp"
        tmp.write_text(name + "\n", encoding="utf-8")
        os.replace(tmp, local / layout.LATEST)
        logger.info("restored checkpoint %s from %s (%d files)", name, store.url, len(wanted))
    return name


def restore_earlier_checkpoints(store: Store, local_dir: str | os.PathLike[str]) -> list[str]:
    """Download the stored complete checkpoints that ``local_dir`` lacks (the runner keeps three), for a
    runner whose latest checkpoint cannot be restored: :func:`restore_latest` brings only the latest, to
    keep a resume fast. A checkpoint set aside locally as unreadable is not fetched again. Returns the
    names downloaded, newest first; LATEST is left as it is (the runner moves it to the one it restores).
    """
    local = Path(local_dir)
    listing = store.list(_CHECKPOINTS_PREFIX)
    stored = {i.name.split("/")[1] for i in listing if i.name.count("/") >= 2 and i.name.endswith("/state.json")}
    wanted = sorted(
        n
        for n in stored
        if not (local / layout.CHECKPOINTS / n / layout.CHECKPOINT_STATE).exists()
        and not (local / layout.CHECKPOINTS / f".unreadable-{n}").exists()
    )
    items = [i for i in listing if i.name.count("/") >= 2 and i.name.split("/")[1] in wanted]
    targets, skipped = local_targets(items, local)
    for skipped_name, reason in skipped:
        logger.warning("not restored: %s: %s", store.describe(skipped_name), reason)
    store.download_files(targets)
    if wanted:
        logger.info("restored earlier checkpoint(s) %s from %s", ", ".join(reversed(wanted)), store.url)
    return list(reversed(wanted))


def make_hooks(
    results: str,
    workdir: str | os.PathLike[str],
    *,
    log_name: str | None = None,
    interval_s: float | None = None,
) -> SyncHook:
    """What runner/main.py gives the training loop when ``RLCLOUD_RESULTS`` is set.

    Opens the store at ``results`` (the experiment's location), restores the latest checkpoint, the
    records and the logs into an empty ``workdir``, then (with ``log_name``, e.g. ``"single-0"``) copies
    this process's stdout/stderr into ``logs/<log_name>.log`` (after the restore, so a restarted
    runner appends to its predecessor's log), and starts a background syncer (every
    ``RLCLOUD_SYNC_INTERVAL`` seconds, default 30).
    """
    store = open_store(results)
    Path(workdir).mkdir(parents=True, exist_ok=True)
    restore_latest(store, workdir)
    if log_name:
        from rlcloud.storage.logs import tee_output

        tee_output(Path(workdir) / layout.log_path(log_name))
    if interval_s is None:
        interval_s = RunnerEnv.from_env().sync_interval or DEFAULT_SYNC_INTERVAL
    return SyncHook(Syncer(workdir, store), interval_s=interval_s).start()


def ship_logs(
    results: str,
    workdir: str | os.PathLike[str],
    log_name: str,
    *,
    interval_s: float | None = None,
) -> Syncer:
    """For a role that writes no results of its own (an environment server): copy this process's
    stdout/stderr into ``logs/<log_name>.log`` and sync only ``logs/`` to ``results``, every
    ``RLCLOUD_SYNC_INTERVAL`` seconds and once more at exit. Returns the running :class:`Syncer`.
    """
    from rlcloud.storage.logs import tee_output

    store = open_store(results)
    log = Path(workdir) / layout.log_path(log_name)
    if not log.exists():
        # continue the log of this role's previous process, if one was stored
        with contextlib.suppress(NotFoundError):
            store.download_file(layout.log_path(log_name), log)
    tee_output(log)
    if interval_s is None:
        interval_s = RunnerEnv.from_env().sync_interval or DEFAULT_SYNC_INTERVAL
    return Syncer(workdir, store, include=[layout.log_path(log_name)], prune_checkpoints=False).start(interval_s)
