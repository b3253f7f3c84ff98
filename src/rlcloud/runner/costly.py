"""CartPole with a fixed cost per step: a stand-in for an expensive simulator (benchmarks, tests).

Name it in a spec like any environment class::

    environment: {type: "rlcloud.runner.costly:CostlyCartPole", step_ms: 5, mode: sleep}

``mode: sleep`` waits (a remote simulator, I/O: the CPU is free meanwhile); ``mode: spin`` computes
(busy-waits until its thread has used ``step_ms`` of CPU time, a simulator computing). The episodes are
CartPole-v1's, so a seeded run is reproducible.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium

__all__ = ["COST_MODES", "CostlyCartPole"]

COST_MODES = ("sleep", "spin")


class CostlyCartPole(gymnasium.Wrapper):
    """gymnasium's CartPole-v1 whose every step costs ``step_ms`` milliseconds, slept or spun (``mode``)."""

    def __init__(self, step_ms: float = 5.0, mode: str = "sleep") -> None:
        if mode not in COST_MODES:
            raise ValueError(f"mode must be one of {', '.join(COST_MODES)}, not {mode!r}")
        if step_ms < 0:
            raise ValueError(f"step_ms must be >= 0, not {step_ms!r}")
        super().__init__(gymnasium.make("CartPole-v1"))
        self.step_s = float(step_ms) / 1000.0
        self.mode = mode

    def step(self, action: Any) -> Any:
        """One CartPole step, then the cost."""
        result = self.env.step(action)
        if self.step_s > 0:
            if self.mode == "sleep":
                time.sleep(self.step_s)
            else:
                # CPU time, not wall time: on a busy machine the step still costs step_ms of computing.
                deadline = time.thread_time() + self.step_s
                while time.thread_time() < deadline:
                    pass
        return result
