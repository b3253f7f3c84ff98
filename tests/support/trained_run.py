"""One real CartPole PPO run, started as a user starts it and finished, shared by the session's tests that read
a finished run (a plugin of tests/conftest.py): tests/test_policy.py (its policy back) and
tests/test_experiment_facade.py (the Experiment facade's reads). They only read it."""

from __future__ import annotations

import pytest

from rlcloud import Experiment, ExperimentSpec

SPEC = dict(
    name="cp-policy",
    environment={"type": "gym", "level": "CartPole-v1"},
    agent={"type": "ppo", "batch_size": 4, "learning_rate": 3e-3},
    seed=5,
    total_timesteps=1500,
    # one evaluation, at the end: the episodes the restored policy must play again
    evaluation={"every": "1000000t", "episodes": 2},
    summary_frequency=None,
)


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Experiment:
    root = tmp_path_factory.mktemp("policy-results")
    exp = Experiment(ExperimentSpec(**SPEC), results=str(root))
    exp.start()
    assert exp.wait(timeout=900).state == "succeeded"
    return exp
