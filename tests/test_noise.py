"""What libraries print on their own is not shown to a user unless asked (-v): TensorFlow's start-up chatter,
the Atari emulator's banner, Tensorforce's "No min_value bound" warning. Warnings and errors still show."""

from __future__ import annotations

import logging
import os

import pytest

from rlcloud.runner.compat import STARTUP_CHATTER, _startup_chatter_dropped

CHATTER = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1795877416.126819   20274 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors.\n"
)
KEPT = "W0000 00:00:1795877416.2   20274 cuda_executor.cc:1] a real warning\nan error of the import itself\n"


def test_tensorflow_start_up_chatter_is_dropped_and_the_rest_kept(capfd: pytest.CaptureFixture[str]) -> None:
    with _startup_chatter_dropped(already=False):
        os.write(2, (CHATTER + KEPT).encode())  # as TensorFlow's C++ side writes: to the descriptor
    err = capfd.readouterr().err
    assert err == KEPT
    assert all(STARTUP_CHATTER.match(line) for line in CHATTER.splitlines(keepends=True))


def test_debug_logging_keeps_the_chatter(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG), _startup_chatter_dropped(already=False):  # rlcloud -vv
        os.write(2, CHATTER.encode())
    assert capfd.readouterr().err == CHATTER


def test_an_atari_environment_is_made_without_the_emulators_banner(capfd: pytest.CaptureFixture[str]) -> None:
    from rlcloud.runner.envs import make_env

    make_env({"type": "gym", "level": "ALE/SpaceInvaders-v5"}).close()
    seen = capfd.readouterr()
    assert "A.L.E" not in seen.out + seen.err and "Stella" not in seen.out + seen.err


@pytest.mark.training
def test_build_shows_no_tensorforce_bound_warning(caplog: pytest.LogCaptureFixture) -> None:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.validation import build_agent

    spec = ExperimentSpec(
        name="noise",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 2},
        episodes=1,
    )
    with caplog.at_level(logging.INFO):
        build_agent(spec)
    assert not [r for r in caplog.records if "bound specified" in r.getMessage()]
