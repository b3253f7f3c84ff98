"""The environment adapter (gymnasium, Tensorforce-style and user classes) and spec validation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlcloud.errors import SpecError
from rlcloud.runner.envs import GymnasiumAdapter, TensorforceAdapter, make_env, validate_experiment

CARTPOLE = {"type": "gym", "level": "CartPole-v1"}

USER_ENVS = '''
import numpy as np
import gymnasium


class Corridor(gymnasium.Env):
    """Walk right to the end of a corridor of `length` cells: reward 1 per step, terminated at the end."""

    def __init__(self, length=4):
        self.length = length
        self.observation_space = gymnasium.spaces.Box(0.0, float(length), shape=(1,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(3, start=-1)
        self.actions = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.actions.append(int(action))
        self.pos = max(0, self.pos + int(action))
        return np.array([self.pos], dtype=np.float32), 1.0, self.pos >= self.length, False, {}


class Counter:
    """Tensorforce-style: states()/actions()/reset()/execute(); truncates itself after `limit` steps."""

    def __init__(self, limit=3):
        self.limit = limit

    def states(self):
        return dict(type="float", shape=(2,))

    def actions(self):
        return dict(type="int", shape=(), num_values=3)

    def max_episode_timesteps(self):
        return None

    def reset(self):
        self.t = 0
        return np.zeros(2, dtype=np.float32)

    def execute(self, actions):
        self.t += 1
        return np.full(2, self.t, dtype=np.float32), 2 if self.t >= self.limit else 0, float(actions)
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    package = tmp_path / "myenvs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "worlds.py").write_text(textwrap.dedent(USER_ENVS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "myenvs.worlds"


def test_cartpole_specs_and_terminated_is_1() -> None:
    env = make_env(CARTPOLE)
    assert isinstance(env, GymnasiumAdapter)
    assert env.states_spec == {"type": "float", "shape": (4,)}  # infinite bounds: no min/max
    assert env.actions_spec == {"type": "int", "shape": (), "num_values": 2}
    assert env.max_episode_timesteps == 500
    state = env.reset(seed=0)
    assert state.shape == (4,)
    terminal, steps = 0, 0
    while not terminal:  # always pushing left topples the pole long before the 500-step limit
        state, reward, terminal = env.step(np.int64(0))
        assert reward == 1.0
        steps += 1
    assert terminal == 1 and steps < 100
    env.close()


def test_time_limits_truncate_with_2() -> None:
    own = make_env({**CARTPOLE, "max_episode_steps": 3})  # gymnasium's TimeLimit
    assert own.max_episode_timesteps == 3
    own.reset(seed=0)
    assert [own.step(i % 2)[2] for i in range(3)] == [0, 0, 2]
    capped = make_env(CARTPOLE, max_timesteps_per_episode=4)
    assert capped.max_episode_timesteps == 4  # the smaller of the spec's and the environment's limit
    capped.reset(seed=0)
    assert [capped.step(i % 2)[2] for i in range(4)] == [0, 0, 0, 2]
    capped.reset()  # a new episode counts from zero again
    assert capped.step(0)[2] == 0


def test_repeat_actions_sums_rewards_and_scales_the_limit() -> None:
    env = make_env({**CARTPOLE, "max_episode_steps": 10}, repeat_actions=3)
    assert env.max_episode_timesteps == 4  # ceil(10 raw steps / 3)
    env.reset(seed=0)
    _state, reward, terminal = env.step(1)
    assert reward == 3.0 and terminal == 0
    rewards = [env.step(i % 2)[1] for i in range(3)]
    assert rewards == [3.0, 3.0, 1.0]  # the 10-step TimeLimit cuts the last repeat short


def test_user_gymnasium_class_by_dotted_path(user_module: str) -> None:
    env = make_env({"type": f"{user_module}:Corridor", "length": 2})
    assert isinstance(env, GymnasiumAdapter)
    assert env.states_spec == {"type": "float", "shape": (1,), "min_value": 0.0, "max_value": 2.0}
    env.reset(seed=1)
    # Discrete(3, start=-1): the agent's actions 0..2 are the environment's -1..+1.
    assert env.actions_spec == {"type": "int", "shape": (), "num_values": 3}
    assert env.step(np.int64(2))[2] == 0
    assert env.step(np.int64(2))[2] == 1
    assert env.env.unwrapped.actions == [1, 1]
    also = make_env({"class": f"{user_module}.Corridor"})
    assert also.env.unwrapped.length == 4


def test_tensorforce_style_class(user_module: str) -> None:
    env = make_env({"class": f"{user_module}.Counter", "limit": 5}, max_timesteps_per_episode=2)
    assert isinstance(env, TensorforceAdapter)
    assert env.actions_spec["num_values"] == 3
    env.reset()
    assert env.step(2)[1:] == (2.0, 0)
    assert env.step(1)[1:] == (1.0, 2)


def test_bad_dotted_paths_are_spec_errors(user_module: str) -> None:
    with pytest.raises(SpecError, match=r"environment\.type: cannot import module 'nowhere'"):
        make_env({"type": "nowhere:Env"})
    with pytest.raises(SpecError, match="has no class 'Missing'"):
        make_env({"class": f"{user_module}.Missing"})


def _spec(**fields: object) -> dict[str, object]:
    spec: dict[str, object] = {"environment": dict(CARTPOLE), "agent": {"type": "ppo", "batch_size": 10}}
    spec.update(fields)
    return spec


def test_validation_accepts_good_specs(user_module: str) -> None:
    validate_experiment(_spec())
    validate_experiment(_spec(environment={"type": "gym", "level": "ALE/SpaceInvaders-v5"}))
    validate_experiment(_spec(network=[{"type": "dense", "size": 32}, {"type": "dense", "size": 32}]))
    validate_experiment(_spec(network={"type": "auto", "size": 64, "depth": 2}))
    validate_experiment(_spec(environment={"type": f"{user_module}:Corridor"}), import_user_classes=True)


def test_unknown_gym_id_names_the_field_with_close_matches() -> None:
    with pytest.raises(SpecError) as info:
        validate_experiment(_spec(environment={"type": "gym", "level": "CartPole-v2"}))
    assert info.value.fields == ["environment.level"]
    assert "unknown gymnasium id; did you mean 'CartPole-v1'" in str(info.value)
    with pytest.raises(SpecError, match="ALE/SpaceInvaders-v5"):
        validate_experiment(_spec(environment={"type": "gym", "level": "ALE/SpaceInvader-v5"}))


def test_unknown_agent_and_environment_types() -> None:
    with pytest.raises(SpecError) as info:
        validate_experiment(_spec(agent={"type": "ppp"}))
    assert info.value.fields == ["agent.type"]
    assert "did you mean 'ppo'" in str(info.value)
    with pytest.raises(SpecError, match=r"environment.type: unknown environment type.*valid: ale"):
        validate_experiment(_spec(environment={"type": "atari"}))
    with pytest.raises(SpecError, match=r"agent\.states: is set by the runner"):
        validate_experiment(_spec(agent={"type": "ppo", "states": {}}))


def test_malformed_networks_report_every_problem() -> None:
    network = [{"type": "dense", "size": 32}, {"size": 8}, {"type": "dnse", "size": -1}, "dense"]
    with pytest.raises(SpecError) as info:
        validate_experiment(
            _spec(agent={"type": "ppo", "batch_size": 10, "network": {"type": "layred"}}, network=network)
        )
    assert info.value.fields == [
        "agent.network.type",
        "network[1].type",
        "network[2].type",
        "network[2].size",
        "network[3]",
    ]
    text = str(info.value)
    assert "did you mean 'layered'" in text and "did you mean 'dense'" in text
    with pytest.raises(SpecError, match="needs at least one layer"):
        validate_experiment(_spec(network=[]))


def test_validation_works_on_experiment_specs() -> None:
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec(
        name="x", environment={"type": "gym", "level": "CartPol-v1"}, agent={"type": "ppo"}, episodes=1
    )
    with pytest.raises(SpecError, match="CartPole-v1"):
        validate_experiment(spec)


def test_deterministic_training_is_refused_up_front() -> None:
    with pytest.raises(SpecError) as info:
        validate_experiment(_spec(deterministic=True))
    assert info.value.fields == ["deterministic"] and "evaluation" in str(info.value)
