"""Reading many runs back: one listing per location, one request per object, concurrent, cached, indexed.

What a table of runs needs is in each run's summary (:mod:`rlcloud.storage.summary`) and its spec of record.
For a location (a run's, or a sweep's: its trials are the folders below it that hold a spec of record):

1. one listing of the records by name (:meth:`~rlcloud.storage.base.Store.list_named`: the spec, the summary and
   its sources, with each one's size, CRC32C and generation; GCS pages of 1,000 objects);
2. for a gs:// sweep, its index (:data:`~rlcloud.layout.SWEEP_INDEX`: one listing and 16 shards at most), whose
   entries stand for the finished trials whose listed spec and summary they are (:class:`_Index`);
3. each other run's spec of record and summary, read concurrently (:data:`READ_THREADS` at a time) in one
   request each, or not at all when the local cache holds that generation (:mod:`rlcloud.storage.cache`);
4. a summary that is not current (missing, of another version, built from other records than those listed)
   is rebuilt from the records themselves, read the same way;
5. the finished trials read one by one go into the sweep's index (written under generation preconditions).

So a finished sweep of N trials costs its listing pages (N/1000), the index's listing and 2N small reads the
first time ever, the listings and at most 16 shard reads on any other machine, and the listings alone a second
time here; a running trial costs its records until its runner writes its next summary. Every gs:// location
of one bucket is read through one store (one client, one connection pool) per process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from rlcloud.errors import NotFoundError, RLCloudError, StorageError
from rlcloud.layout import (
    EVALUATION,
    FINAL_STATES,
    METRICS,
    PROGRESS,
    RUN_INDEX_FILES,
    RUN_SUMMARY,
    SPEC,
    SUMMARY_SOURCES,
    SUMMARY_VERSION,
    SWEEP_INDEX,
    SWEEP_INDEX_SHARDS,
    ProgressRecord,
    child,
    sweep_index_path,
)
from rlcloud.results import is_gcs
from rlcloud.stored import MAX_RECORD_BYTES

if TYPE_CHECKING:
    from rlcloud.storage.base import ObjectInfo, Store
    from rlcloud.storage.cache import ObjectCache
    from rlcloud.storage.summary import Episodes

__all__ = [
    "READ_THREADS",
    "RunRecord",
    "forget_stores",
    "read_episodes",
    "read_locations",
    "read_trials_progress",
    "shared_store",
]

logger = logging.getLogger(__name__)

#: Reads in flight at once: each small read waits on the network (~80 ms from a laptop), not on bandwidth.
READ_THREADS = 32
#: Largest shard of a sweep's index read (~5 KiB a trial: 10,000 trials in 16 shards are ~3 MiB each).
MAX_INDEX_BYTES = 64 << 20
_T = TypeVar("_T")


@dataclass
class RunRecord:
    """One run as a reader of many runs sees it: its spec of record and its (current) summary."""

    location: str
    spec: dict[str, Any] | None
    summary: dict[str, Any]
    #: the sweep it was found in (a trial of a sweep location), else None
    sweep: str | None = None
    #: whether the summary was built from the records here (none stored, or not current)
    rebuilt: bool = False

    @property
    def progress(self) -> ProgressRecord | None:
        """progress.json as the summary holds it (None when the run has written none)."""
        value = self.summary.get("progress")
        return ProgressRecord.of(value) if isinstance(value, dict) else None


#: A run to read: (location's position, its store, its location, its listed records, its sweep, its record
#: from the sweep's index when the index has it)
_Job = tuple[int, "Store", str, dict[str, "ObjectInfo"], str | None, RunRecord | None]

# ------------------------------------------------------------------------------------------- the stores

_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()


def shared_store(location: str) -> Store:
    """The store of ``location``: for gs://, a child of this process's one store per bucket (one client and
    its connection pool for every run read); a directory's own store otherwise."""
    from rlcloud.storage import open_store
    from rlcloud.storage.base import parse_gs_url

    if not is_gcs(location):
        return open_store(location)
    bucket, prefix = parse_gs_url(location)
    with _stores_lock:
        root = _stores.get(bucket)
        if root is None:
            root = _stores[bucket] = open_store(f"gs://{bucket}", max_workers=READ_THREADS)
    return root.child(prefix) if prefix else root


def forget_stores() -> None:
    """Close this process's shared stores (their clients' connections); the next read opens new ones (e.g.
    after ``STORAGE_EMULATOR_HOST`` changed)."""
    with _stores_lock:
        stores = list(_stores.values())
        _stores.clear()
    for store in stores:
        store.close()


def _cache_for(store: Store) -> ObjectCache | None:
    """The object cache for reads from ``store`` (gs:// only: a directory is read as fast as the cache)."""
    if not store.url.startswith("gs://"):
        return None
    from rlcloud.storage.cache import default_cache

    cache = default_cache()
    return cache if cache.enabled else None


def _read(store: Store, info: ObjectInfo, limit: int) -> bytes:
    """The bytes of a listed object: from the cache when it holds the listed generation, else one read (then
    cached under the generation the read returned: the bytes and the generation are of one version)."""
    cache = _cache_for(store)
    url = store.describe(info.name)
    if cache is not None:
        hit = cache.get(url, info.generation)
        if hit is not None:
            return hit
    data, generation = store.read_versioned(info.name, limit)
    if cache is not None:
        cache.put(url, generation, data)
    return data


def _pool_map(fn: Callable[[Any], _T], items: Sequence[Any]) -> list[_T]:
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(items)), thread_name_prefix="rlcloud-read") as pool:
        return list(pool.map(fn, items))


# ------------------------------------------------------------------------------------------- reading


def _group(listing: Sequence[ObjectInfo]) -> dict[str, dict[str, ObjectInfo]]:
    """Listed records by folder ("" for the location itself): {folder: {record name: info}}, each info named
    relative to its folder (what the folder's own store calls it)."""
    from dataclasses import replace

    out: dict[str, dict[str, ObjectInfo]] = {}
    for info in listing:
        folder, _, name = info.name.rpartition("/")
        out.setdefault(folder, {})[name] = replace(info, name=name)
    return out


def read_locations(locations: Sequence[str], *, trials: Sequence[Sequence[str] | None] | None = None) -> list[Any]:
    """Each location's runs: ``[RunRecord]`` for a run's location, the trials' RunRecords (in name order, or in
    the order of ``trials[i]`` when given: a sweep's own trial names) for a sweep's, ``[]`` for a folder with
    neither, or the NotFoundError saying so; read concurrently, listings first."""
    if not locations:
        return []
    stores = [shared_store(location) for location in locations]

    def listing(store: Store) -> list[ObjectInfo] | RLCloudError:
        try:
            return store.list_named(RUN_INDEX_FILES)
        except RLCloudError as exc:
            return exc

    listings = _pool_map(listing, stores)
    jobs: list[_Job] = []
    indexes: list[tuple[Store, _Index, list[int]]] = []  # a sweep's index and its jobs
    out: list[Any] = [[] for _ in locations]
    for i, (location, store, listed) in enumerate(zip(locations, stores, listings, strict=True)):
        if isinstance(listed, RLCloudError):
            out[i] = listed
            continue
        folders = _group(listed)
        here = folders.get("", {})
        if SPEC in here or PROGRESS in here or METRICS in here:
            jobs.append((i, store, location, here, None, None))
            continue
        names = [f for f, records in folders.items() if f and SPEC in records]
        wanted = trials[i] if trials is not None else None
        if wanted is not None:
            found = set(names)
            names = [n for n in wanted if n in found]
        else:
            names.sort()
        if not names and wanted is None:  # a Sweep object none of whose trials started yet: no runs
            out[i] = NotFoundError(
                f"no results in {location} (no spec.yaml, progress.json or metrics.jsonl, and no sweep's trials)"
            )
            continue
        sweep = location.rstrip("/").rsplit("/", 1)[-1]
        index = _Index.read(store) if names and store.url.startswith("gs://") else None
        first = len(jobs)
        for n in names:
            known = index.record(n, folders[n], child(location, n), sweep) if index is not None else None
            jobs.append((i, store.child(n), child(location, n), folders[n], sweep, known))
        if index is not None:
            indexes.append((store, index, list(range(first, len(jobs)))))

    def read(job: _Job) -> RunRecord:
        _, store, location, listed, sweep, known = job
        return known if known is not None else _read_run(store, location, listed, sweep)

    runs = _pool_map(read, jobs)
    for (i, *_), run in zip(jobs, runs, strict=True):
        if isinstance(out[i], list):
            out[i].append(run)
    for store, index, members in indexes:
        index.update(store, [(jobs[k][3], runs[k]) for k in members if jobs[k][5] is None])
    return out


class _Index:
    """A sweep's index (:data:`~rlcloud.layout.SWEEP_INDEX`): its shards as read, and their entries by trial.

    An entry holds a finished trial's spec of record and summary as text, with the generations of the stored
    objects they are; it stands for the trial only while those are the listed generations (and the summary is
    current for the listed records). Readers add the finished trials they had to read one by one, shard by
    shard, each write under the shard's generation (a reader that loses a race, or may not write, leaves it:
    the index is derived, the next reader adds what is missing)."""

    def __init__(self, shards: dict[int, ObjectInfo], entries: dict[str, dict[str, Any]]) -> None:
        self.shards = shards
        self.entries = entries

    @classmethod
    def read(cls, store: Store) -> _Index:
        """The index of the sweep at ``store``: one listing, then its shards (concurrently, cached)."""
        shards: dict[int, ObjectInfo] = {}
        try:
            for info in store.list(SWEEP_INDEX + "/"):
                stem = info.name[len(SWEEP_INDEX) + 1 :].removesuffix(".json")
                if stem.isdigit() and info.name == sweep_index_path(int(stem)):
                    shards[int(stem)] = info
        except RLCloudError as exc:
            logger.debug("index of %s not read: %s", store.url, exc)
            return cls({}, {})

        def load(info: ObjectInfo) -> dict[str, Any]:
            try:
                value = json.loads(_read(store, info, MAX_INDEX_BYTES))
            except (ValueError, RLCloudError) as exc:
                logger.debug("%s not read: %s", store.describe(info.name), exc)
                return {}
            ok = isinstance(value, dict) and value.get("version") == SUMMARY_VERSION
            trials = value.get("trials") if ok else None
            return trials if isinstance(trials, dict) else {}

        entries: dict[str, dict[str, Any]] = {}
        for got in _pool_map(load, list(shards.values())):
            entries.update({k: v for k, v in got.items() if isinstance(v, dict)})
        return cls(shards, entries)

    def record(self, name: str, listed: dict[str, ObjectInfo], location: str, sweep: str) -> RunRecord | None:
        """The trial's RunRecord from its entry, when the entry is of the listed spec and summary."""
        from rlcloud.storage.summary import summary_is_current

        entry = self.entries.get(name)
        if entry is None or SPEC not in listed or RUN_SUMMARY not in listed:
            return None
        if entry.get("spec_generation") != listed[SPEC].generation:
            return None
        if entry.get("summary_generation") != listed[RUN_SUMMARY].generation:
            return None
        spec, summary = entry.get("spec"), entry.get("summary")
        if not isinstance(spec, dict) or not isinstance(summary, dict) or not summary_is_current(summary, listed):
            return None
        return RunRecord(location, spec, summary, sweep)

    def update(self, store: Store, read: list[tuple[dict[str, ObjectInfo], RunRecord]]) -> None:
        """Add the finished trials read one by one (their stored summary current, their state final)."""
        from rlcloud.storage.base import PreconditionFailedError

        added: dict[int, dict[str, dict[str, Any]]] = {}
        for listed, run in read:
            progress = run.progress
            if run.rebuilt or run.spec is None or progress is None or progress.state not in FINAL_STATES:
                continue
            name = run.location.rstrip("/").rsplit("/", 1)[-1]
            entry = {"spec_generation": listed[SPEC].generation, "summary_generation": listed[RUN_SUMMARY].generation,
                     "spec": run.spec, "summary": run.summary}  # fmt: skip
            added.setdefault(zlib.crc32(name.encode()) % SWEEP_INDEX_SHARDS, {})[name] = entry

        def write(shard: int) -> None:
            mine = {k: v for k, v in self.entries.items() if zlib.crc32(k.encode()) % SWEEP_INDEX_SHARDS == shard}
            mine.update(added[shard])
            body = json.dumps({"version": SUMMARY_VERSION, "trials": mine}, separators=(",", ":")).encode()
            info = self.shards.get(shard)
            name = sweep_index_path(shard)
            try:
                written = store.write_bytes(name, body, if_generation_match=info.generation if info else 0)
            except (PreconditionFailedError, RLCloudError) as exc:  # another reader's, or no permission to write
                logger.debug("%s not updated: %s", store.describe(name), exc)
                return
            cache = _cache_for(store)
            if cache is not None:  # what this reader wrote is what the next one lists
                cache.put(store.describe(name), written.generation, body)

        _pool_map(write, sorted(added))


def _read_run(store: Store, location: str, listed: dict[str, ObjectInfo], sweep: str | None) -> RunRecord:
    from rlcloud.errors import RecordError
    from rlcloud.storage.summary import summary_is_current
    from rlcloud.stored import parse_record

    spec = None
    if SPEC in listed:
        try:
            data = _read(store, listed[SPEC], MAX_RECORD_BYTES)
            spec = dict(parse_record(data, source=store.describe(SPEC), form="yaml"))
        except NotFoundError:
            spec = None
        except RecordError as exc:
            raise RecordError(f"{exc}; it is not a spec of record: move it away to start over") from None
    if RUN_SUMMARY in listed:
        try:
            summary = json.loads(_read(store, listed[RUN_SUMMARY], MAX_RECORD_BYTES))
        except (ValueError, RLCloudError) as exc:
            logger.debug("%s: not read (%s); rebuilt from the records", store.describe(RUN_SUMMARY), exc)
            summary = None
        if summary_is_current(summary, listed):
            return RunRecord(location, spec, summary, sweep)
    return RunRecord(location, spec, _rebuild(store, listed), sweep, rebuilt=True)


def _rebuilt_key(store: Store, listed: dict[str, ObjectInfo]) -> tuple[str, int]:
    """The cache key of a summary built from the listed records: their generations, one number."""
    text = ",".join(f"{n}:{listed[n].generation}:{listed[n].crc32c}" for n in SUMMARY_SOURCES if n in listed)
    generation = int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big") + 1
    return store.describe(RUN_SUMMARY) + "#built", generation


def _rebuild(store: Store, listed: dict[str, ObjectInfo]) -> dict[str, Any]:
    """The summary of the records listed, built here (and cached under their generations)."""
    from rlcloud.storage.summary import build_summary

    cache = _cache_for(store)
    url, generation = _rebuilt_key(store, listed)
    if cache is not None:
        hit = cache.get(url, generation)
        if hit is not None:
            try:
                cached = json.loads(hit)
                if isinstance(cached, dict):
                    return cached
            except ValueError:
                pass
    progress = _progress(store, listed)
    episodes, evaluation = _episodes(store, listed)
    from rlcloud.storage.summary import evaluation_means_of

    sources = {
        n: {"size": listed[n].size, "crc32c": listed[n].crc32c} if n in listed else None for n in SUMMARY_SOURCES
    }
    summary = build_summary(progress, episodes, evaluation_means_of(evaluation), sources)
    if cache is not None:
        cache.put(url, generation, json.dumps(summary, separators=(",", ":")).encode())
    return summary


def _source(info: ObjectInfo | None) -> dict[str, Any] | None:
    return None if info is None else {"size": info.size, "crc32c": info.crc32c}


def _progress(store: Store, listed: dict[str, ObjectInfo]) -> ProgressRecord | None:
    from rlcloud.stored import parse_record

    if PROGRESS not in listed:
        return None
    try:
        data = _read(store, listed[PROGRESS], MAX_RECORD_BYTES)
        value = parse_record(data, source=store.describe(PROGRESS))
    except NotFoundError:
        return None
    except StorageError as exc:  # one run's unreadable progress never stops the table of many
        logger.warning("run %s: progress ignored: %s", store.url, exc)
        return None
    return ProgressRecord.clean(value, store.describe(PROGRESS))


def _episodes(store: Store, listed: dict[str, ObjectInfo]) -> tuple[Episodes, list[tuple[float, float, float]]]:
    """The training episodes and the evaluation rows of the listed records (lines that are no episode record
    are skipped with one warning per file, as every reader of them does)."""
    from rlcloud.storage.client import MAX_METRICS_BYTES, parse_episode_records
    from rlcloud.storage.summary import Episodes, evaluation_rows

    def records(name: str) -> list[dict[str, Any]]:
        if name not in listed:
            return []
        try:
            data = _read(store, listed[name], MAX_METRICS_BYTES)
        except NotFoundError:
            return []
        return parse_episode_records(data, store.describe(name))

    return Episodes.of_records(records(METRICS)), evaluation_rows(records(EVALUATION))


def read_episodes(locations: Sequence[str]) -> list[Episodes]:
    """Each run's training episodes (its metrics.jsonl as arrays), read concurrently: what a curve of another
    window than the summary's, or an objective at another budget, needs."""
    from rlcloud.storage.summary import Episodes

    def one(location: str) -> Episodes:
        store = shared_store(location)
        try:
            listed = {i.name: i for i in store.list_named([METRICS]) if "/" not in i.name}
        except RLCloudError as exc:
            logger.warning("run %s: episodes not read: %s", location, exc)
            return Episodes.empty()
        return _episodes(store, listed)[0]

    return _pool_map(one, locations)


def read_trials_progress(store: Store, names: Sequence[str]) -> dict[str, ProgressRecord]:
    """progress.json of each trial ``names`` of the sweep at ``store``: one listing of the sweep's records
    (their generations); a finished trial's progress from the sweep's index when its entry is of the listed
    objects (gs://), else progress.json read in one request, concurrently, or taken from the object cache when
    it holds that generation (a finished trial's never changes). A trial without one, or whose record cannot
    be read, is left out (with a debug line: a status of many trials never stops at one)."""
    wanted = set(names)
    folders = {k: v for k, v in _group(store.list_named(RUN_INDEX_FILES)).items() if k in wanted}
    index = _Index.read(store) if folders and store.url.startswith("gs://") else None
    out: dict[str, ProgressRecord] = {}
    for name, listed in folders.items():
        known = index.record(name, listed, store.describe(name), "") if index is not None else None
        if known is not None and known.progress is not None:
            out[name] = known.progress

    def read(name: str) -> ProgressRecord | None:
        from rlcloud.stored import parse_record

        trial = store.child(name)
        try:
            data = _read(trial, folders[name][PROGRESS], MAX_RECORD_BYTES)
            source = trial.describe(PROGRESS)
            return ProgressRecord.clean(parse_record(data, source=source), source)
        except RLCloudError as exc:
            logger.debug("progress of %s unreadable: %s", store.describe(name), exc)
            return None

    order = sorted(n for n, listed in folders.items() if n not in out and PROGRESS in listed)
    for name, record in zip(order, _pool_map(read, order), strict=True):
        if record is not None:
            out[name] = record
    return out
