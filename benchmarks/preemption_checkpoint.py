"""SIGTERM to checkpoint-in-store time of the Space Invaders DQN learner (examples/space_invaders_dqn.yaml).

On a Spot preemption GKE gives a pod 15 s after SIGTERM (docs/troubleshooting.md): the learner's SIGTERM
checkpoint counts only if it is complete in the results store by then. This script runs the runner as a
pod runs it (``python -m rlcloud.runner``, ``RLCLOUD_RESULTS=gs://...``, stdout a pipe so the runner ships
its log too) against fake-gcs-server behind tests/fakes/faulty_proxy.py holding every request
``--latency-ms`` (default 20 ms, a GKE pod's round trip to Cloud Storage), trains until the agent has
real state (past ``start_updating``, at least one episode in the replay memory), sends SIGTERM and
measures:

(a) SIGTERM -> checkpoint complete on local disk (``checkpoints/LATEST`` names the new checkpoint);
(b) SIGTERM -> checkpoint complete in the store (the stored ``checkpoints/LATEST`` names it), and
    SIGTERM -> the runner's exit (after its last sync);
(c) the checkpoint's size and file count, and its largest variables (one read of the checkpoint).

Mode: the pod's learner is the distributed agent, one Tensorforce agent with ``parallel_interactions =
num_workers`` fed by env servers. Its checkpoint holds the same variables as the multi-threaded mode's
agent with the same ``num_workers``, which needs no env-server processes: so by default the example runs
``multi-threaded`` with ``num_workers`` 4 (the example's), the agent state the pod would checkpoint;
``--mode single`` runs one environment (a smaller observe buffer, below). The store is polled directly
(not through the proxy) every 50 ms; the local LATEST every 10 ms.

Usage::

    uv run --frozen python benchmarks/preemption_checkpoint.py [--repeats 3] [--workers 4] [--latency-ms 20]

Benchmarks print figures; nothing here is asserted in tests.

Measured 2026-11-23 on the 2-core development VM (shared with other jobs), defaults (multi-threaded, 4
environments, 20 ms, SIGTERM at timestep ~2,050-2,180, 3 repeats): the checkpoint is 347.3 MB in 5 files
(replay memory ``agent/memory/buffers/states`` [10000, 84, 84, 1] float32: 282.2 MB; the dense layer's
weights, its target copy and Adam's two moments: 4 x 15.9 MB); (a) local disk: median 2.43 s, max 3.31 s;
(b) in the store: median 7.10 s, max 8.60 s; runner exit: median 11.90 s, max 12.20 s (the interpreter's
shutdown with TensorFlow and the environments takes 3-5 s after the last sync). Before the runner left
the episode buffers out (runner/saving.py) the checkpoint was 912.0 MB (564.5 MB of it
``agent/states_buffer``, [4, 5000, 84, 84, 1]): (a) 5.23 and 3.83 s, (b) 28.49 and
24.70 s, exit 32.12 and 28.92 s (2 repeats): past the 15 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.faulty_proxy import proxy_process
from tests.fakes.gcs import FakeGcsServer

from rlcloud.roles import Role
from rlcloud.specs import ExperimentSpec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "space_invaders_dqn.yaml"
PREFIX = "exp"


@dataclass
class Run:
    """One repetition's figures (seconds from SIGTERM; None when it did not happen)."""

    local_s: float | None = None
    store_s: float | None = None
    exit_s: float | None = None
    exit_code: int | None = None
    timestep: int = 0
    name: str = ""
    size: int = 0
    files: int = 0
    log: list[str] = field(default_factory=list)
    workdir: Path | None = None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _progress(workdir: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads((workdir / "progress.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def one_run(
    server: FakeGcsServer, proxy_url: str, spec_path: Path, role: str, work: Path, args: argparse.Namespace
) -> Run:
    """Start the runner, train past ``start_updating``, SIGTERM it, and time the checkpoint."""
    bucket_name = server.create_bucket()
    bucket = server.client().bucket(bucket_name)
    workdir = work / f"run-{bucket_name}"
    env = dict(os.environ)
    env.update(
        RLCLOUD_RESULTS=f"gs://{bucket_name}/{PREFIX}",
        STORAGE_EMULATOR_HOST=proxy_url,
        TF_CPP_MIN_LOG_LEVEL="2",
    )
    # a pipe, as in a pod: the runner copies its output into the results (logs/), as it does there
    cmd = [sys.executable, "-m", "rlcloud.runner", "--role", role, "--spec", str(spec_path), "--workdir", str(workdir)]
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = Run()
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: run.log.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        _wait_for_training(proc, workdir, run, args)
        before = _read(workdir / "checkpoints" / "LATEST")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        blob = bucket.blob(f"{PREFIX}/checkpoints/LATEST")
        next_store_poll = sent
        while run.local_s is None or run.store_s is None or run.exit_s is None:
            now = time.monotonic()
            if now - sent > args.timeout:
                break
            if run.local_s is None:
                name = _read(workdir / "checkpoints" / "LATEST")
                if name and name != before:
                    run.local_s, run.name = now - sent, name
            if run.store_s is None and now >= next_store_poll:
                next_store_poll = now + 0.05
                try:
                    stored = blob.download_as_text().strip()
                except Exception:  # not there yet (404)
                    stored = ""
                if stored and stored != before and (not run.name or stored == run.name):
                    run.store_s = time.monotonic() - sent
            if run.exit_s is None and proc.poll() is not None:
                run.exit_s, run.exit_code = time.monotonic() - sent, proc.returncode
                if run.store_s is None:  # one last look: it may have landed between two polls
                    with_name = _stored_latest(blob)
                    if with_name and with_name == run.name:
                        run.store_s = run.exit_s
                    else:
                        break
            time.sleep(0.01)
        proc.wait(timeout=args.timeout)
        run.exit_code = proc.returncode
        p = _progress(workdir)
        run.timestep = int(p.get("timestep", 0))
        _count_checkpoint(run, workdir, bucket)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(5)
    run.workdir = workdir
    # fake-gcs-server keeps objects in memory: ~1 GB a run
    bucket.delete_blobs(list(bucket.list_blobs()))
    return run


def _wait_for_training(proc: Any, workdir: Path, run: Run, args: argparse.Namespace) -> None:
    """Until the runner trains past ``--min-timesteps`` with an episode done; RuntimeError if it exits first."""
    deadline = time.monotonic() + args.timeout
    while True:
        p = _progress(workdir)
        if p.get("state") == "running" and p.get("timestep", 0) >= args.min_timesteps and p.get("episode", 0) >= 1:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the runner did not get to training (exit {proc.poll()}):\n" + "".join(run.log[-30:]))
        time.sleep(0.5)


def _count_checkpoint(run: Run, workdir: Path, bucket: Any) -> None:
    """The checkpoint's size and file count, checked equal in the store when it got there."""
    if run.name:
        ckpt = workdir / "checkpoints" / run.name
        files = [f for f in ckpt.rglob("*") if f.is_file()]
        run.size, run.files = sum(f.stat().st_size for f in files), len(files)
        if run.store_s is not None:
            stored_files = list(bucket.list_blobs(prefix=f"{PREFIX}/checkpoints/{run.name}/"))
            assert len(stored_files) == run.files, (len(stored_files), run.files)
            assert sum(int(b.size) for b in stored_files) == run.size


def _stored_latest(blob: Any) -> str:
    try:
        return str(blob.download_as_text()).strip()
    except Exception:
        return ""


def warm_up(server: FakeGcsServer, work: Path, mb: int) -> None:
    """Upload ``mb`` MB once and delete it: a fresh fake-gcs-server took 12 s for its first 340 MB upload
    here and 5 s for the next ones (its memory backend growing, not a cost GCS has)."""
    if mb <= 0:
        return
    path = work / "warm-up.bin"
    with open(path, "wb") as fh:
        fh.truncate(mb << 20)
    bucket = server.client().bucket(server.create_bucket())
    blob = bucket.blob("warm-up.bin")
    blob.upload_from_filename(str(path))
    blob.delete()
    path.unlink()


def largest_variables(checkpoint: Path, top: int = 6) -> list[tuple[int, str, str]]:
    """(bytes, dtype, name) of the biggest variables of a Tensorforce checkpoint (imports TensorFlow)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    prefix = tf.train.latest_checkpoint(str(checkpoint))
    reader = tf.train.load_checkpoint(prefix)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    sizes = [(int(np.prod(shapes[n], dtype=np.int64)) * dtypes[n].size, dtypes[n].name, n) for n in shapes]
    return sorted(sizes, reverse=True)[:top]


def summary(label: str, values: list[float | None]) -> str:
    """``label: median X s, max Y s [all runs]`` (a missing value counts as a failure)."""
    done = [v for v in values if v is not None]
    runs = ", ".join("-" if v is None else f"{v:.2f}" for v in values)
    if not done:
        return f"{label}: never [{runs}]"
    return f"{label}: median {statistics.median(done):.2f} s, max {max(done):.2f} s   [{runs}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("multi-threaded", "single"), default="multi-threaded")
    parser.add_argument("--workers", type=int, default=None, help="num_workers (default: the example's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="held per request by the proxy")
    parser.add_argument("--min-timesteps", type=int, default=2000, help="train at least this long first")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for each wait")
    parser.add_argument("--warm-up-mb", type=int, default=1024, help="one upload into the fake server first")
    parser.add_argument("--log", action="store_true", help="print the runner's log lines after SIGTERM")
    parser.add_argument("--keep", metavar="DIR", default=None, help="keep the work directories under DIR")
    args = parser.parse_args()

    base = ExperimentSpec.from_file(EXAMPLE)
    workers = args.workers or base.num_workers
    spec = base.replace(run_mode=args.mode, num_workers=workers, total_timesteps=10**9)
    start_updating = int(spec.agent.get("start_updating", 0))
    args.min_timesteps = max(args.min_timesteps, start_updating + 500)
    role = Role.SINGLE.value if args.mode == "single" else Role.MULTI.value
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlcloud-preempt-"))
    work.mkdir(parents=True, exist_ok=True)
    spec_path = work / "spec.yaml"
    spec_path.write_text(spec.to_yaml(), encoding="utf-8")
    print(
        f"{EXAMPLE.name}: run_mode {args.mode}, {spec.num_envs} environment(s) (the agent's parallel_interactions), "
        f"memory {spec.agent.get('memory')}, max_timesteps_per_episode {spec.max_timesteps_per_episode}; "
        f"SIGTERM after >= {args.min_timesteps} timesteps and >= 1 episode; proxy latency {args.latency_ms:g} ms "
        f"per request; {os.cpu_count()} CPU cores; {args.repeats} repeats"
    )
    runs: list[Run] = []
    try:
        with FakeGcsServer() as server, proxy_process(server.url, latency_ms=args.latency_ms) as proxy_url:
            warm_up(server, work, args.warm_up_mb)
            for i in range(args.repeats):
                run = one_run(server, proxy_url, spec_path, role, work, args)
                runs.append(run)
                print(
                    f"run {i + 1}: SIGTERM at timestep ~{run.timestep}: local {_fmt(run.local_s)}, "
                    f"store {_fmt(run.store_s)}, exit {_fmt(run.exit_s)} (code {run.exit_code}); "
                    f"{run.name} {run.size / 1e6:.1f} MB in {run.files} files",
                    flush=True,
                )
                if args.log:
                    after = next((k for k, line in enumerate(run.log) if "received SIGTERM" in line), 0)
                    print("".join("    | " + line for line in run.log[after:]), end="")
                if args.keep is None and i + 1 < args.repeats and run.workdir is not None:
                    shutil.rmtree(run.workdir, ignore_errors=True)  # ~1 GB each; the last one is read below
        print()
        print(summary("(a) SIGTERM -> checkpoint complete on local disk", [r.local_s for r in runs]))
        print(summary("(b) SIGTERM -> checkpoint complete in the store ", [r.store_s for r in runs]))
        print(summary("    SIGTERM -> runner exit                      ", [r.exit_s for r in runs]))
        sizes = sorted({(r.size, r.files) for r in runs if r.name})
        print("(c) checkpoint: " + "; ".join(f"{s / 1e6:.1f} MB in {n} files" for s, n in sizes))
        last = next((r for r in reversed(runs) if r.name), None)
        if last is not None and last.workdir is not None:
            print("    largest variables:")
            for size, dtype, name in largest_variables(last.workdir / "checkpoints" / last.name):
                print(f"    {size / 1e6:9.1f} MB  {dtype:8}  {name}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


if __name__ == "__main__":
    main()
