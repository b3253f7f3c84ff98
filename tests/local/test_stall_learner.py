"""A stalled local learner whose own watchdog ends it (issue 30): its supervisor restarts it once, then fails it.

The stand-in runner runs the real runner's stall watchdog (``STANDIN_WATCHDOG``) over its episodes; the local
backend starts it under its real supervisor. Exit code 88 (stalled) is a restart from the latest checkpoint,
89 (stalled again after that) fails the role, the run, and says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from rlcloud.local import LocalBackend
from rlcloud.runner.watchdog import EXIT_STALLED_AGAIN
from tests.support.local import _episodes, _runners, _workdir
from tests.support.specs import cartpole_spec


@pytest.mark.processes
def test_a_learner_ended_by_its_watchdog_is_restarted_once_and_finishes(
    make_backend: Callable[..., LocalBackend],
    tmp_path: Path,
) -> None:
    backend = make_backend(
        STANDIN_EPISODES="6", STANDIN_HANG_AFTER="3", STANDIN_HANG_ONCE="1", STANDIN_WATCHDOG="1",
        STANDIN_STALL_TIMEOUT="2",
    )  # fmt: skip
    backend.start(cartpole_spec("watchdog-once", stall_timeout="2s"), str(tmp_path / "results"))
    workdir = _workdir(tmp_path, "watchdog-once")
    final = backend.wait("watchdog-once", timeout=120)
    log = (workdir / "logs" / "single-0.log").read_text()
    assert final.state == "succeeded", log
    assert final.roles[0].restarts == 1
    assert "stalled: no timestep for" in log and "single-0 stalled (its watchdog ended it): restarting it" in log
    assert "resumed from checkpoint ckpt-3" in log
    assert len(_runners(workdir)) == 2 and _episodes(workdir) == [1, 2, 3, 4, 5, 6]


@pytest.mark.processes
def test_a_learner_whose_watchdog_ends_it_twice_fails_saying_why(
    make_backend: Callable[..., LocalBackend],
    tmp_path: Path,
) -> None:
    backend = make_backend(
        STANDIN_EPISODES="6", STANDIN_HANG_AFTER="2", STANDIN_WATCHDOG="1", STANDIN_STALL_TIMEOUT="2"
    )
    backend.start(cartpole_spec("watchdog-twice", stall_timeout="2s"), str(tmp_path / "results"))
    final = backend.wait("watchdog-twice", timeout=120)
    assert final.state == "failed"
    assert final.roles[0].restarts == 1 and final.roles[0].exit_code == EXIT_STALLED_AGAIN
    # the restarted stand-in resumes at 2 and reports episode 3 before it hangs again (tests/local/standin.py)
    assert re.search(r"stalled: no timestep for \d+ s \(stall_timeout 2 s\) at timestep 3, again", final.message or "")
    assert len(_runners(_workdir(tmp_path, "watchdog-twice"))) == 2
