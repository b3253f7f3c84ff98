"""A supervisor under a stepping clock, as a program: ``python -m tests.local.clocked_supervisor WORKDIR LABEL MODE
SCENARIO [--budget USD PRICE] [--stall-timeout S]`` (tests/local/test_clocks.py).

:func:`rlcloud.local.supervisor.supervise` runs here in a process of its own, single-threaded as the real supervisor
is (it forks its runner: no other thread may run then), with a :class:`tests.support.clocks.SteppingClock` whose hook
plays the ``SCENARIO`` in the supervisor's thread, between two of its looks at the time:

* ``step``: once the runner's first report is there, step the wall clock 2 hours forward, let the supervisor read
  the clock ``READS`` more times (``step:READS``), then release the runner (the ``release`` file);
* ``replace``: once the second runner has started (a restart), let 5 s pass on the monotonic clock (the
  replacement "imports TensorFlow" meanwhile), then release it;
* ``none``: nothing (a control).

Its runner is :data:`CHILD`, a stand-in that writes progress.json and heartbeats as the real runner does and waits
for ``release`` where the real one would be busy. The last line printed is ``{"code": EXIT_CODE}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlcloud.local.supervisor import supervise
from rlcloud.runner.watchdog import HEARTBEAT_DIR
from tests.support.clocks import SteppingClock

#: The stand-in runner: ``CHILD WORKDIR LABEL MODE``. Every attempt appends its pid to ``attempts``.
CHILD = r"""
import json, os, signal, sys, time
from pathlib import Path

work, label, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
with open(work / "attempts", "a") as fh:
    fh.write(f"{os.getpid()}\n")
attempt = len((work / "attempts").read_text().split())
release = work / "release"
beat = work / ".heartbeat" / label
timestep = 0


def report(state, **extra):
    body = {"state": state, "updated": time.time(), "timestep": timestep, **extra}
    tmp = work / f".progress.{os.getpid()}"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, work / "progress.json")


def train(until_released, elapsed=5.4, stale_advance=0.0):
    # a step every 50 ms: a report (its heartbeat advanced_at) and, with a watchdog, the heartbeat file
    global timestep
    first = True
    while not (until_released and release.exists()):
        timestep += 1
        now = time.time()
        report("running", elapsed=elapsed, advanced_at=now - (stale_advance if first else 0.0))
        first = False
        if mode in ("heartbeat", "env-server"):
            beat.parent.mkdir(exist_ok=True)
            beat.touch()
        if not until_released and timestep >= 20:
            return
        time.sleep(0.05)


if mode == "budget":  # one report, then a long update: the supervisor counts on from the report
    report("running", elapsed=float(os.environ.get("CHILD_ELAPSED", "5.4")), advanced_at=time.time())
    while not release.exists():
        time.sleep(0.05)
elif mode in ("heartbeat", "progress", "env-server"):
    train(until_released=True)
elif mode == "freeze":  # attempt 1 freezes (SIGSTOP); attempt 2 imports until released, then trains
    if attempt == 1:
        report("running", elapsed=1.0, advanced_at=time.time())
        os.kill(os.getpid(), signal.SIGSTOP)
    while not release.exists():
        time.sleep(0.05)
    report("starting")
    # the first report of training can carry an advance from before it (agent building, a restore)
    train(until_released=False, stale_advance=float(os.environ.get("CHILD_STALE_ADVANCE", "0")))
report("succeeded", elapsed=5.4)
"""


def scenario_clock(workdir: Path, label: str, mode: str, scenario: str) -> SteppingClock:
    """The clock whose hook plays ``scenario`` (module docstring)."""
    kind, _, reads = scenario.partition(":")
    release = workdir / "release"
    attempts = workdir / "attempts"
    if kind == "step":
        beat = workdir / HEARTBEAT_DIR / label
        started = (workdir / "progress.json") if mode in ("budget", "progress") else beat
        stepped: list[int] = []

        def step(clock: SteppingClock) -> None:
            if not stepped:
                if started.exists():
                    stepped.append(clock.step(2 * 3600))
            elif clock.reads >= stepped[0] + int(reads or 30):
                release.touch()

        return SteppingClock(on_read=step)
    if kind == "replace":
        replaced: list[float] = []

        def replace(clock: SteppingClock) -> None:
            if not replaced:
                if attempts.exists() and len(attempts.read_text().split()) == 2:
                    replaced.append(clock.monotonic())
            elif clock.monotonic() - replaced[0] >= 5.0:
                release.touch()

        return SteppingClock(on_read=replace)
    return SteppingClock()


def main() -> int:
    """Run the supervisor as the module docstring says; print its exit code last."""
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir")
    parser.add_argument("label")
    parser.add_argument("mode")
    parser.add_argument("scenario")
    parser.add_argument("--budget", nargs=2, type=float, default=None)
    parser.add_argument("--stall-timeout", type=float, default=None)
    parser.add_argument("--wall-offset", type=float, default=0.0)
    args = parser.parse_args()
    workdir = Path(args.workdir)
    clock = scenario_clock(workdir, args.label, args.mode, args.scenario)
    clock.step(args.wall_offset)
    command = [sys.executable, "-c", CHILD, str(workdir), args.label, args.mode]
    budget = tuple(args.budget) if args.budget else None
    code = supervise(
        workdir,
        args.label,
        command,
        2.0,
        args.stall_timeout,
        budget,
        clock=clock.clock,  # type: ignore[arg-type]
    )
    print(json.dumps({"code": code}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
