"""A custom environment of your own: walk right to the end of a corridor (a gymnasium.Env).

Run it on this machine from this folder (the runner imports corridor_env.py from the project folder):

    rlcloud spec validate corridor.yaml
    rlcloud experiment run corridor.yaml

and on a cluster, with the folder packed and taken along (nothing to build, docs/images.md):

    rlcloud experiment start corridor.yaml --set code=. -c CLUSTER
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Corridor(gym.Env[np.ndarray, int]):
    """``width`` cells; the agent starts in the first and is rewarded for reaching the last (-0.1 a step)."""

    def __init__(self, width: int = 5) -> None:
        self.width = width
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)  # 0: left, 1: right
        self.position = 0

    def _state(self) -> np.ndarray:
        return np.array([self.position / (self.width - 1)], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = 0
        return self._state(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        done = self.position >= self.width - 1
        return self._state(), (1.0 if done else -0.1), done, False, {}
