"""A stand-in for ``python -m rlcloud.runner`` (standard library only, starts in milliseconds).

The fake kubelet runs it instead of the real runner in the fast Kubernetes tests, so that the
lifecycle (logs, status, pause/resume with a SIGTERM checkpoint, env-server DNS and completion,
exit codes) is exercised without TensorFlow. It honours the same arguments, environment variables,
exit codes and results layout as the real runner (docs/contracts.md), in miniature:

- learner roles (single/multi/agent) "train" ``STANDIN_EPISODES`` episodes of ``STANDIN_DELAY``
  seconds, printing one line each and updating ``progress.json``; on SIGTERM they write
  ``checkpoints/ckpt-<episode>`` + ``checkpoints/LATEST`` and exit 143; on start they resume from
  ``LATEST``. The agent first connects to every env server in ``RLCLOUD_ENV_SERVERS`` (through
  ``RLCLOUD_HOST_MAP``) and at the end tells each one ``done``.
- env-server listens on ``RLCLOUD_BIND_HOST:RLCLOUD_PORT`` and exits 0 when told ``done``.
- ``STANDIN_EXIT=<code>`` makes any role exit with that code at once (spec errors: 2, 3).
- ``--sweep SWEEP.yaml --index I`` (a sweep's pod) runs trial ``I`` into ``$RLCLOUD_SWEEP_RESULTS/<trial>``
  (this one imports rlcloud's SweepSpec to name it); ``STANDIN_FAIL_TRIAL=<index>:<code>`` makes that
  trial exit with that code (``all:<code>``: every trial).
- ``STANDIN_CRASH_TRIAL=<index>:<N>``: that trial checkpoints after N episodes and exits 3 (failed, not
  retried: FailIndex), to be run again from the checkpoint. ``--trials 6-9`` (a Job that grows a sweep): pod
  ``I`` runs the I-th of those trials.
- ``STANDIN_HANG_AFTER=N`` makes a learner hang after N episodes of its own (its heartbeat, ``advanced_at`` in
  progress.json, stops; SIGTERM still checkpoints it); ``STANDIN_STALL_TIMEOUT`` is the stall_timeout its
  progress.json says (the real runner's comes from the spec). ``STANDIN_WATCHDOG=1`` runs the real runner's
  stall watchdog (:class:`rlcloud.runner.watchdog.StallWatchdog`) over the stand-in's episodes, with that
  stall_timeout: a hang ends the pod with exit code 88, or 89 when the previous pod stalled too; the learner
  then checkpoints every episode (a hung learner cannot checkpoint on its way out). With
  ``STANDIN_HANG_ONCE`` only the first pod hangs (it leaves ``hung`` in the results). ``STANDIN_HANG_GIL``
  makes the hang hold the GIL (a catastrophic regex): the watchdog's thread cannot run either.
- ``--sweep ... --stride P`` (a warm sweep's pod) runs the real :func:`rlcloud.runner.warm.run_share` (the
  pod's heartbeat, its trials one after another, failure records, halting) with stand-in trials: each
  learns as above into its results, skipped once it succeeded; with ``STANDIN_WATCHDOG`` each runs the
  real watchdog over the pod's heartbeat. ``STANDIN_HANG_TRIALS=i,j`` makes only those trials hang (after
  ``STANDIN_HANG_AFTER`` episodes; every time, unless ``STANDIN_HANG_ONCE``), and
  ``STANDIN_HANG_BEFORE=i`` makes the pod hang holding the GIL while it prepares trial i, the first time
  (between trials: no watchdog runs, only the pod's heartbeat can tell). ``STANDIN_LOSE_STALLS=1`` undoes
  each stall's record in the results before the pod ends (a store that lost it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

terminated = False


def _on_term(signum: int, frame: object) -> None:
    global terminated
    terminated = True


def _results(workdir: str) -> Path:
    path = Path(os.environ.get("RLCLOUD_RESULTS") or workdir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_json(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _resolve(entry: str) -> tuple[str, int]:
    host, port = entry.rsplit(":", 1)
    mapping = dict(item.split("=", 1) for item in (os.environ.get("RLCLOUD_HOST_MAP") or "").split(",") if "=" in item)
    target = mapping.get(entry) or mapping.get(host)
    if target:
        host, port = target.rsplit(":", 1)
    return host, int(port)


def _send(entry: str, message: bytes, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(_resolve(entry), timeout=2) as sock:
                sock.sendall(message)
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            if terminated:
                return
            time.sleep(0.05)


def _checkpoint(results: Path, name: str) -> str:
    """A checkpoint folder, then LATEST naming it (replaced atomically, as the runner's is)."""
    (results / "checkpoints" / name).mkdir(parents=True, exist_ok=True)
    latest = results / "checkpoints" / "LATEST"
    tmp = latest.with_suffix(".tmp")
    tmp.write_text(name)
    tmp.replace(latest)
    return name


def learner(role: str, results: Path, workdir: str, *, warm: bool = False) -> int:
    episodes = int(os.environ.get("STANDIN_EPISODES", "5"))
    delay = float(os.environ.get("STANDIN_DELAY", "0.05"))
    latest = results / "checkpoints" / "LATEST"
    start = 0
    if latest.exists():
        start = int(latest.read_text().strip().split("-")[1])
        print(f"resumed from {latest.read_text().strip()}", flush=True)
    servers = [s for s in (os.environ.get("RLCLOUD_ENV_SERVERS") or "").split(",") if s]
    for entry in servers:
        _send(entry, b"hello\n")
    print(f"{role}: training with {len(servers)} env servers", flush=True)
    hang_after = int(os.environ.get("STANDIN_HANG_AFTER", "0"))
    if hang_after and os.environ.get("STANDIN_HANG_ONCE") and (results / "hung").exists():
        hang_after = 0
    stall_timeout = float(os.environ.get("STANDIN_STALL_TIMEOUT", "600"))
    watchdog = None
    counters = {"timestep": start}
    if os.environ.get("STANDIN_WATCHDOG"):
        from rlcloud.runner.watchdog import StallWatchdog, heartbeat_path

        trainer = type("Trainer", (), {"running": True, "counters": counters})()
        # progress.json in the results (this stand-in writes it there), the heartbeat in the pod's work
        # directory (where the liveness probe looks), as the real runner's are after its sync; a warm pod's
        # trial takes the pod's heartbeat over, as the real runner's does
        beat = None if warm else heartbeat_path(workdir, f"{role}-0")
        watchdog = StallWatchdog(trainer, stall_timeout, results, label=f"{role}-0", heartbeat=beat).start()
    for episode in range(start, episodes):
        if hang_after and episode >= start + hang_after:  # N episodes into this process
            (results / "hung").write_text(f"{os.getpid()}\n")
            print(f"hanging after episode {episode}", flush=True)
            if os.environ.get("STANDIN_HANG_GIL"):
                # a hang that holds the GIL (the regex engine never releases it): no thread, no signal
                # handler runs; only the liveness probe over the watchdog's heartbeat can end it
                re.match(r"(a+)+$", "a" * 64 + "b")
            while not terminated:
                time.sleep(0.05)
        if terminated:
            name = _checkpoint(results, f"ckpt-{episode}")
            _write_json(results / "progress.json", {"state": "stopped", "episode": episode, "checkpoint": name})
            print(f"checkpoint {name} on SIGTERM", flush=True)
            return 143
        crash_after = os.environ.get("STANDIN_CRASH_AFTER")
        if crash_after and episode >= int(crash_after):
            # a crash that is no spec error but is not retried either (exit 3: FailIndex): after a checkpoint
            name = _checkpoint(results, f"ckpt-{episode}")
            _write_json(results / "progress.json", {"state": "failed", "episode": episode, "checkpoint": name})
            print(f"checkpoint {name}, then crashing", flush=True)
            return 3
        print(f"episode {episode} return {10 + episode}", flush=True)
        beat = {"advanced_at": time.time(), "stall_timeout": stall_timeout}
        _write_json(results / "progress.json", {"state": "running", "episode": episode + 1, "timestep": 0, **beat})
        counters["timestep"] = episode + 1
        if watchdog is not None:
            name = _checkpoint(results, f"ckpt-{episode + 1}")
        time.sleep(delay)
    if watchdog is not None:
        watchdog.stop()
    for entry in servers:
        _send(entry, b"done\n")
    _write_json(results / "progress.json", {"state": "succeeded", "episode": episodes})
    print("done", flush=True)
    return 0


def env_server(index: int) -> int:
    port = int(os.environ.get("RLCLOUD_PORT", "5000"))
    host = os.environ.get("RLCLOUD_BIND_HOST", "0.0.0.0")
    with socket.create_server((host, port)) as server:
        server.settimeout(0.2)
        print(f"env server {index} listening on {port}", flush=True)
        while not terminated:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                data = conn.recv(64)
            if data.startswith(b"done"):
                print(f"env server {index}: agent done", flush=True)
                return 0
    return 143


def warm(args: argparse.Namespace) -> int:
    """A warm sweep pod: the real run_share over stand-in trials."""
    import logging

    from rlcloud.runner.warm import run_share
    from rlcloud.specs.sweep import SweepSpec

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    sweep = SweepSpec.from_yaml_text(Path(args.sweep).read_text())
    hanging = {int(i) for i in os.environ.get("STANDIN_HANG_TRIALS", "").split(",") if i}
    if os.environ.get("STANDIN_LOSE_STALLS"):
        from rlcloud.runner.watchdog import on_stall_exit

        def lose(code: int) -> None:  # registered first: runs before the warm loop's own hook
            progress = Path(os.environ["RLCLOUD_RESULTS"]) / "progress.json"
            _write_json(progress, {**json.loads(progress.read_text()), "state": "running", "stalls": 0})
            print(f"lost the record of a stall (exit code {code})", flush=True)

        on_stall_exit(lose)
    before = os.environ.get("STANDIN_HANG_BEFORE")

    def prepare(trial_args: argparse.Namespace) -> object:
        trial = sweep.trial(trial_args.index)
        results = Path(os.environ["RLCLOUD_SWEEP_RESULTS"]) / trial.name
        marker = Path(os.environ["RLCLOUD_SWEEP_RESULTS"]) / f"hung-before-{trial_args.index}"
        if before is not None and int(before) == trial_args.index and not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{os.getpid()}\n")
            print(f"hanging before trial {trial.name}", flush=True)
            re.match(r"(a+)+$", "a" * 64 + "b")  # holds the GIL: no thread runs
        progress = results / "progress.json"
        if progress.exists() and json.loads(progress.read_text()).get("state") == "succeeded":
            return 0
        os.environ["RLCLOUD_RESULTS"] = str(results)  # undone after the trial by run_share
        os.environ["STANDIN_THIS_TRIAL"] = str(trial_args.index)
        print(f"trial {trial_args.index}: {trial.name}", flush=True)
        return trial.spec, Path(trial_args.workdir)

    def train(trial_args: argparse.Namespace, spec: object, workdir: Path) -> int:
        if int(os.environ["STANDIN_THIS_TRIAL"]) not in hanging:
            os.environ.pop("STANDIN_HANG_AFTER", None)
        return learner(trial_args.role, _results(str(workdir)), str(workdir), warm=True)

    return run_share(args, prepare, train)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", required=True)
    parser.add_argument("--index", type=int, default=0)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--spec")
    source.add_argument("--sweep")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--stride", type=int)
    parser.add_argument("--claim", type=float, nargs="?", const=60.0)  # rlcloud.runner.main's
    parser.add_argument("--trials")
    args = parser.parse_args()
    if args.claim is not None and os.environ.get("STANDIN_LEASE_S"):  # a test's short lease
        args.claim = float(os.environ["STANDIN_LEASE_S"])
    signal.signal(signal.SIGTERM, _on_term)
    if os.environ.get("STANDIN_EXIT"):
        print(f"exiting with {os.environ['STANDIN_EXIT']}", flush=True)
        return int(os.environ["STANDIN_EXIT"])
    if args.sweep and args.trials:  # a Job that grows a sweep: its pod I runs the I-th of its trials
        from rlcloud.specs.sweep import parse_trial_indices

        args.index = parse_trial_indices(args.trials)[args.index]
    if args.sweep and args.stride:
        return warm(args)
    if args.sweep:
        # a pod of a sweep's Indexed Job: trial --index of the sweep, under <RLCLOUD_SWEEP_RESULTS>/<trial>
        from rlcloud.specs.sweep import SweepSpec

        trial = SweepSpec.from_yaml_text(Path(args.sweep).read_text()).trial(args.index)
        failing, _, code = os.environ.get("STANDIN_FAIL_TRIAL", "").partition(":")
        if failing and (failing == "all" or int(failing) == args.index):
            print(f"trial {trial.name}: exiting with {code}", flush=True)
            return int(code)
        crashing, _, after = os.environ.get("STANDIN_CRASH_TRIAL", "").partition(":")
        if crashing and int(crashing) == args.index:
            os.environ["STANDIN_CRASH_AFTER"] = after
        os.environ["RLCLOUD_RESULTS"] = os.environ["RLCLOUD_SWEEP_RESULTS"] + "/" + trial.name
        print(f"trial {args.index}: {trial.name}", flush=True)
    elif not Path(args.spec).is_file():
        print(f"no spec at {args.spec}", flush=True)
        return 2
    if args.role == "env-server":
        return env_server(args.index)
    return learner(args.role, _results(args.workdir), args.workdir)


if __name__ == "__main__":
    sys.exit(main())
