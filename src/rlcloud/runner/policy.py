"""A run's trained policy, back in this process: the agent restored from a checkpoint, acting
deterministically in the environment its run trained on, exported as a SavedModel, rendered to frames.

The agent is built exactly as the runner builds it (runner/loop.py: the spec of record's agent, network,
seed and the environment's specs, with as many parallel interactions as the run had, so that every saved
variable has the shape it was saved with), then the checkpoint is restored into it with the runner's own
restore (runner/saving.py: also across frame dtypes). Acting is Tensorforce's ``independent=True,
deterministic=True`` act, which the runner's final evaluation uses: the same checkpoint, environment and
seed give the same episode and return.

The environment is the spec's own (frame preprocessing is the agent's, inside the restored model; action
repeat and the step limit are the adapter's), built with gymnasium's ``render_mode="rgb_array"`` when
frames are wanted. Nothing here is imported by ``import rlcloud``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.layout import CHECKPOINT_STATE, CHECKPOINTS, checkpoint_path
from rlcloud.runner.envs import GYM_TYPES, EnvAdapter, make_env
from rlcloud.runner.loop import build_agent_kwargs, latest_checkpoint
from rlcloud.specs import ExperimentSpec

__all__ = [
    "EVALUATION_SEED_OFFSET",
    "MAX_FRAMES",
    "MAX_FRAME_PIXELS",
    "Episode",
    "Policy",
    "load_policy",
]

logger = logging.getLogger(__name__)

#: The runner seeds its evaluation environment with the run's seed plus this (runner/loop.py).
EVALUATION_SEED_OFFSET = 100_003
#: The most frames one rendering passes on (all episodes together): 50 s of video at 50 frames a second,
#: five CartPole episodes of the full 500 steps. A GIF holds every frame at a byte a pixel until it is
#: written (2,500 x 600 x 400: 600 MB at most); an MP4 is streamed.
MAX_FRAMES = 2_500
#: The largest frame passed on as it is (pixels); larger frames are downsampled by an integer stride
#: (CartPole's 600 x 400 and Atari's 210 x 160 stay as they are).
MAX_FRAME_PIXELS = 640 * 480


@dataclass
class Episode:
    """One episode of the trained policy: its return and length (timesteps)."""

    ret: float
    length: int


@dataclass
class _Shapes:
    """What :func:`build_agent_kwargs` reads of a vector environment, for an agent without one."""

    states_spec: dict[str, Any]
    actions_spec: dict[str, Any]
    max_episode_timesteps: int | None
    num_envs: int


def checkpoint_names(workdir: Path) -> list[str]:
    """The complete checkpoints in ``workdir``, oldest first."""
    root = Path(workdir) / CHECKPOINTS
    try:
        return sorted(p.name for p in root.iterdir() if p.name.startswith("ckpt-") and (p / CHECKPOINT_STATE).is_file())
    except OSError:
        return []


class Policy:
    """A trained Tensorforce agent with its run's environment.

    Attributes:
        agent: The Tensorforce agent (``tensorforce.Agent``), restored from :attr:`checkpoint`.
        spec: The run's spec of record.
        checkpoint: The checkpoint's name (``ckpt-...``) and ``state``: its counters (timestep, episode).
    """

    def __init__(self, spec: ExperimentSpec, agent: Any, checkpoint: str, state: dict[str, Any]) -> None:
        self.spec = spec
        self.agent = agent
        self.checkpoint = checkpoint
        self.state = state

    def __repr__(self) -> str:
        return f"<Policy {self.spec.name} {self.checkpoint} timestep {self.state.get('timestep')}>"

    def act(self, states: Any, internals: Any = None) -> tuple[Any, Any]:
        """The deterministic action for ``states`` (one environment's observation, in the environment's
        format) and the next internals (pass ``None`` at an episode's start). Returns ``(action, internals)``."""
        if internals is None:
            internals = self.agent.initial_internals()
        return self.agent.act(states=states, internals=internals, independent=True, deterministic=True)  # type: ignore[no-any-return]

    def environment(self, *, render: bool = False) -> EnvAdapter:
        """A new environment as the run built it; ``render``: gymnasium's ``render_mode="rgb_array"``."""
        environment = dict(self.spec.environment)
        env_type = environment.get("type") or environment.get("environment")
        if render and env_type in GYM_TYPES:
            environment.setdefault("render_mode", "rgb_array")
            # frames are drawn off screen: no window, no sound device (and no SDL warnings about them)
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
            os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        return make_env(
            environment,
            repeat_actions=self.spec.repeat_actions,
            max_timesteps_per_episode=self.spec.max_timesteps_per_episode,
        )

    def episodes(
        self,
        count: int = 1,
        *,
        seed: int | None = None,
        on_frame: Callable[[np.ndarray], None] | None = None,
        max_frames: int = MAX_FRAMES,
        on_step: Callable[[int], None] | None = None,
    ) -> list[Episode]:
        """Play ``count`` episodes with the deterministic policy.

        ``seed`` seeds the environment at the first reset (default: the run's evaluation seed, so the first
        episode is the one the run's first evaluation played; the runner's later evaluations in one process
        continue that environment). ``on_frame`` gets each step's RGB frame, the one the policy acts on (an
        episode of N steps gives N frames; at most ``max_frames`` in all, a :class:`SpecError` beyond, so a
        video stays bounded); frames are passed on, not kept. ``on_step`` is called with the steps played
        so far, for progress.
        """
        if count < 1:
            raise SpecError([SpecProblem("episodes", "must be at least 1", count)])
        if seed is None and self.spec.seed is not None:
            seed = int(self.spec.seed) + EVALUATION_SEED_OFFSET
        env = self.environment(render=on_frame is not None)
        played: list[Episode] = []
        steps = 0
        try:
            if seed is not None:
                # The runner seeds its evaluation environment with a reset of its own, then plays each
                # evaluation episode from a further reset (runner/loop.py): the same here, so that seed
                # gives the run's own evaluation episodes.
                env.reset(seed=seed)
            for _ in range(count):
                state = env.reset()
                episode = Episode(0.0, 0)
                internals = None
                terminal = 0
                while not terminal:
                    if on_frame is not None:  # the frame the policy acts on: one per step
                        if steps >= max_frames:
                            raise SpecError(
                                [
                                    SpecProblem(
                                        "max_frames",
                                        f"the episodes passed {max_frames:,} frames; render fewer episodes, or "
                                        "set max_timesteps_per_episode lower, or raise max_frames",
                                        max_frames,
                                    )
                                ]
                            )
                        on_frame(_frame(env))
                    action, internals = self.act(state, internals)
                    state, reward, terminal = env.step(action)
                    episode.ret += reward
                    episode.length += 1
                    steps += 1
                    if on_step is not None:
                        on_step(steps)
                played.append(episode)
        finally:
            env.close()
        return played

    def export(self, directory: str | os.PathLike[str]) -> Path:
        """Write the policy as a TensorFlow SavedModel into ``directory`` (Tensorforce's own ``saved-model``
        export: an ``act`` function and ``initial_internals``, loadable with ``tf.saved_model.load`` alone)
        and ``rlcloud-policy.json`` beside it: the spec of record, the checkpoint and the environment's specs.
        """
        target = Path(directory)
        if target.exists() and any(target.iterdir()):
            raise SpecError([SpecProblem("dest", "exists and is not empty: name a new directory", str(target))])
        # Tensorforce exports the independent act function it has traced: trace it once, deterministically.
        with contextlib.closing(self.environment()) as env:
            self.act(env.reset(seed=0))
        self.agent.save(directory=str(target), filename="policy", format="saved-model")
        saved = target / "policy"
        info = {
            "format": "tensorforce-saved-model",
            "saved_model": saved.name,
            "run": self.spec.name,
            "checkpoint": self.checkpoint,
            "timestep": self.state.get("timestep"),
            "episode": self.state.get("episode"),
            "states": self.agent.spec["states"],
            "actions": self.agent.spec["actions"],
            "environment": dict(self.spec.environment),
            "repeat_actions": self.spec.repeat_actions,
            "max_timesteps_per_episode": self.spec.max_timesteps_per_episode,
            "spec": self.spec.model_dump(mode="json", exclude_none=True),
            "usage": (
                "tf.saved_model.load(DIR + '/policy').act(states, auxiliaries, deterministic), positionally: a "
                "batch of states (batch, *shape), the action masks ({'mask': bool (batch, num_values)} for one "
                "discrete action, {} for none), True; initial_internals() for agents with internals"
            ),
        }
        (target / "rlcloud-policy.json").write_text(json.dumps(info, indent=2, default=str) + "\n", encoding="utf-8")
        return saved

    def close(self) -> None:
        """Release the agent's TensorFlow resources."""
        with contextlib.suppress(Exception):
            self.agent.close()

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _frame(env: EnvAdapter) -> np.ndarray:
    """The environment's current RGB frame, downsampled by an integer stride above :data:`MAX_FRAME_PIXELS`."""
    inner = getattr(env, "env", None)
    render = getattr(inner, "render", None)
    try:
        frame = render() if render is not None else None
    except ImportError as exc:  # gymnasium's DependencyNotInstalled: classic-control draws with pygame
        raise SpecError(
            [SpecProblem("environment", f"cannot draw its frames: {exc}; pip install 'rlcloud[video]'")]
        ) from None
    if frame is None:
        raise SpecError(
            [
                SpecProblem(
                    "environment",
                    "this environment renders no RGB frames (gymnasium's render_mode='rgb_array' gives none); "
                    "a custom class needs render_mode='rgb_array' support to be watched",
                    type(inner).__name__,
                )
            ]
        )
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[2] not in (3, 4):
        raise SpecError([SpecProblem("environment", "render() gave no H x W x RGB frame", str(frame.shape))])
    stride = 1
    while (frame.shape[0] // stride) * (frame.shape[1] // stride) > MAX_FRAME_PIXELS:
        stride += 1
    return np.ascontiguousarray(frame[::stride, ::stride, :3]).astype(np.uint8, copy=False)


def load_policy(spec: ExperimentSpec, workdir: str | os.PathLike[str], checkpoint: str | None = None) -> Policy:
    """Restore ``spec``'s agent from ``workdir``'s latest complete checkpoint (or the one named).

    ``workdir`` holds the run's ``checkpoints/`` as the runner wrote them. A :class:`SpecError` names the
    checkpoint when there is none or the one named is not complete.
    """
    from rlcloud.runner.compat import TensorforceNoise, import_tensorforce
    from rlcloud.runner.inlining import inline_nested_functions
    from rlcloud.runner.kernels import choose_cpu_kernels
    from rlcloud.runner.saving import restore_agent

    workdir = Path(workdir)
    names = checkpoint_names(workdir)
    name = checkpoint or latest_checkpoint(workdir) or (names[-1] if names else None)
    if name is None:
        raise SpecError(
            [SpecProblem("checkpoint", f"{spec.name} has no complete checkpoint yet: nothing was saved to restore")]
        )
    if name not in names:
        known = ", ".join(names) or "none"
        message = f"not a complete checkpoint of {spec.name} (it has: {known})"
        raise SpecError([SpecProblem("checkpoint", message, name)])
    directory = workdir / checkpoint_path(name)
    state = json.loads((directory / CHECKPOINT_STATE).read_text(encoding="utf-8"))
    with contextlib.closing(
        make_env(
            dict(spec.environment),
            repeat_actions=spec.repeat_actions,
            max_timesteps_per_episode=spec.max_timesteps_per_episode,
        )
    ) as env:
        shapes = _Shapes(
            states_spec=env.states_spec,
            actions_spec=env.actions_spec,
            max_episode_timesteps=env.max_episode_timesteps,
            num_envs=1 if spec.run_mode == "single" else spec.num_workers,
        )
    choose_cpu_kernels(spec.network, spec.agent, shapes.states_spec)
    tensorforce = import_tensorforce()
    inline_nested_functions()
    kwargs = build_agent_kwargs(spec, shapes)  # type: ignore[arg-type]
    noise = TensorforceNoise()
    logging.getLogger().addFilter(noise)
    try:
        agent = tensorforce.Agent.create(**kwargs)
    finally:
        logging.getLogger().removeFilter(noise)
    try:
        restore_agent(agent, directory)
    except Exception:
        with contextlib.suppress(Exception):
            agent.close()
        raise
    logger.info("restored %s from checkpoint %s (timestep %s)", spec.name, name, state.get("timestep"))
    return Policy(spec, agent, name, state)
