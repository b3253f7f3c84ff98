"""The supervisor of one local role: the ``kubelet`` of the local backend, a program of its own.

``python -m rlcloud.local.supervisor --workdir DIR --label ROLE-INDEX [--grace S] -- COMMAND...`` runs
the runner command, records its exit code in ``.rlcloud-local/<label>.exit`` and applies the run's
lifecycle rules without anyone watching:

- the learner (single/multi/agent) ended: the env servers are told to stop (they exit by themselves
  when the agent finished the run; this also ends them when the agent failed);
- any role failed (an exit code other than 0, or 143/130 after a stop or pause): the other roles are
  stopped, and the run is failed.

A SIGTERM/SIGINT is forwarded to the runner (it checkpoints and exits); after the grace period the
runner's whole process group is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlcloud.errors import NotFoundError, WorkloadError
from rlcloud.local.state import POLL_S, RunState, atomic_write
from rlcloud.roles import LEARNER_ROLES, poll_until

__all__ = ["DEFAULT_GRACE_PERIOD", "main", "supervise"]

#: Seconds a supervisor gives its runner between SIGTERM and SIGKILL. The runner checkpoints and exits
#: within 10 s on an idle machine; a busy one (first save traced by TensorFlow) can take longer, and
#: locally there is no spot-VM deadline to meet.
DEFAULT_GRACE_PERIOD = 30.0


def supervise(workdir: Path, label: str, command: list[str], grace_period: float = DEFAULT_GRACE_PERIOD) -> int:
    """Run ``command``, record its exit code, and apply the lifecycle rules (module docstring)."""
    run = RunState(workdir)
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    kill_at: list[float] = []

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)
        if not kill_at:
            kill_at.append(time.monotonic() + grace_period)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    while True:
        try:
            code = child.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            # A runner that ignores SIGTERM too long (stuck in a wait) is killed here, with everything
            # it started (its process group is ours), after its exit code (137) has been recorded.
            if kill_at and time.monotonic() >= kill_at[0]:
                atomic_write(run.exit_file(label), "137\n")
                print(f"----- {label} did not stop within {grace_period:g} s of SIGTERM: killing it", flush=True)
                if os.getpgrp() == os.getpid():  # our own session, as LocalBackend starts us
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
    if code < 0:
        code = 128 - code  # killed by a signal: the shell's convention (SIGKILL -> 137)
    atomic_write(run.exit_file(label), f"{code}\n")
    print(f"----- {time.strftime('%Y-%m-%d %H:%M:%S')} {label} exited with code {code}", flush=True)

    role = label.rsplit("-", 1)[0]
    try:
        state = run.read()
    except (NotFoundError, ValueError):
        return code
    if state.get("stop_requested"):
        return code  # whoever asked stops the others
    others = [r for r in run.roles(state) if r.label != label]
    if code != 0:
        print(f"----- {label} failed: stopping the other roles", flush=True)
    elif role in LEARNER_ROLES:
        # The agent told its env servers the run is finished; give them a moment to exit by themselves.
        poll_until(
            lambda: True if not any(run.role_alive(r) for r in others) else None,
            time.monotonic() + 10,
            interval=POLL_S,
        )
    else:
        return code  # an env server that ended normally: the agent decides the rest
    run.stop_roles([r for r in others if run.role_alive(r)], grace_period, reap=False)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlcloud.local.supervisor --workdir DIR --label ROLE-INDEX -- COMMAND...``."""
    parser = argparse.ArgumentParser(prog="python -m rlcloud.local.supervisor")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE_PERIOD, help="seconds from SIGTERM to SIGKILL")
    parser.add_argument("runner", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.runner[1:] if args.runner[:1] == ["--"] else args.runner
    if not command:
        raise WorkloadError("the supervisor needs a command after --")
    return supervise(Path(args.workdir), args.label, command, args.grace)


if __name__ == "__main__":
    sys.exit(main())
