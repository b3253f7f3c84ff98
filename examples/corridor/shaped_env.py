"""The corridor with its reward shaped by a package of your own (pkgs/corridor_rewards), which the run
installs from requirements.txt (shaped.yaml's code.requirements): nothing to add to the runner image.

    rlcloud experiment run shaped.yaml
    rlcloud experiment start shaped.yaml -c CLUSTER
"""

from __future__ import annotations

from typing import Any

import numpy as np
from corridor_env import Corridor
from corridor_rewards import progress_bonus  # installed from requirements.txt, not in this folder


class ShapedCorridor(Corridor):
    """:class:`corridor_env.Corridor` with a bonus for each step toward the end."""

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        before = self.position
        state, reward, done, truncated, info = super().step(action)
        return state, reward + progress_bonus(before, self.position, self.width), done, truncated, info
