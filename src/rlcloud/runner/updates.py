"""Timestep-based updates at their single-environment rate when an agent steps several environments.

Tensorforce 0.6.5 makes an agent with ``parallel_interactions > 1`` observe per episode
(``config.buffer_observe = 'episode'``, agents/tensorforce.py): an environment's timesteps reach the model
only when its episode ends. The model decides on an update inside ``observe`` (models/tensorforce.py
``core_observe``, "Handle periodic update"): it updates once if ``timesteps >= last_update + frequency``,
whatever the number of timesteps the call brought. So an agent that updates every ``frequency`` timesteps
alone (DQN: ``update_frequency`` 4, one batch each 4 timesteps) updates once per *episode* with several
environments: measured on Space Invaders with 4 env servers, 3 updates per 1,000 timesteps against 250 in
single mode (issue 31). That is not a faster run but one that learns ~80 times less per timestep.

:class:`TimestepUpdates` restores the rate: after each vector step the loop asks it to catch up, and it runs
the model's own update (``Model.update``, the graph ``Agent.update`` runs, the same ``core_update`` the
observe graph calls) once for every multiple of ``frequency`` the global timestep counter passed in that
step, less the updates ``observe`` itself made, then moves ``last_update`` (a saved variable) to the
counter, so that ``observe``'s own check agrees and a resumed run goes on from the same place. Updates start
once the first episode has reached the memory (before, it holds nothing to sample), as Tensorforce's own
observe-path condition starts them. What stays different from one environment is Tensorforce's design,
not the rate: transitions reach the replay memory when their episode ends, not when they happen.

It applies only where it can be exact: a Tensorforce agent with several parallel interactions that
observes per episode, updating in ``timesteps`` units at a constant integer frequency. Agents that update
per episode (PPO) are unaffected. ``RLCLOUD_TIMESTEP_UPDATES=0`` keeps Tensorforce's once-per-observe updates
(to compare; rlcloud.runenv).
"""

from __future__ import annotations

import logging
from typing import Any

from rlcloud.runenv import RunnerEnv

__all__ = ["TimestepUpdates"]

logger = logging.getLogger(__name__)


class TimestepUpdates:
    """Catches an agent observing per episode up with one update per ``frequency`` timesteps."""

    def __init__(self, agent: Any, frequency: int) -> None:
        self.agent = agent
        self.frequency = frequency
        #: the updates this object has run (besides those observe ran)
        self.performed = 0
        # the timestep and update counters at the last catch_up, once updates may start
        self._seen: tuple[int, int] | None = None

    @classmethod
    def for_agent(cls, agent: Any, enabled: bool | None = None) -> TimestepUpdates | None:
        """The catch-up for ``agent``, or None where Tensorforce's own updates already keep the rate (one
        environment, per-episode updates) or it cannot be exact (see the module docstring).

        ``enabled`` None reads ``RLCLOUD_TIMESTEP_UPDATES`` (default on).
        """
        if enabled is None:
            enabled = RunnerEnv.from_env().timestep_updates is not False
        frequency = _update_frequency(agent) if enabled else None
        if frequency is None:
            return None
        logger.info(
            "updates every %d timesteps across %d environments (Tensorforce alone: once per episode's observe)",
            frequency,
            agent.parallel_interactions,
        )
        return cls(agent, frequency)

    def catch_up(self) -> int:
        """Run the updates due since the last call, less those observe ran meanwhile; return how many it
        ran. Call after every vector step's observe."""
        agent = self.agent
        timesteps, updates = int(agent.timesteps), int(agent.updates)
        if int(agent.episodes) == 0:
            return 0  # nothing in the memory yet
        seen, self._seen = self._seen, (timesteps, updates)
        if seen is None:
            return 0  # the first episode just reached the memory: the schedule starts here
        observed = updates - seen[1]  # observe's own updates in this step (Agent.observe counts them)
        due = timesteps // self.frequency - seen[0] // self.frequency - observed
        model = agent.model
        for _ in range(max(due, 0)):
            agent.updates = int(model.update().numpy())
        if due > 0 or observed > 0:
            # observe's own check (timesteps >= last_update + frequency) agrees with this schedule
            model.last_update.assign(timesteps)
        if due <= 0:
            return 0
        self.performed += due
        self._seen = (timesteps, int(agent.updates))
        if model.saver is not None:  # as Agent.update does
            model.save()
        return due


def _update_frequency(agent: Any) -> int | None:
    """The agent's constant update frequency in timesteps when it observes per episode across several
    environments; None otherwise."""
    if not getattr(agent, "_is_agent", False) or int(getattr(agent, "parallel_interactions", 1)) < 2:
        return None
    model = getattr(agent, "model", None)
    if model is None or getattr(agent.config, "buffer_observe", None) != "episode":
        return None
    if getattr(model, "update_unit", None) != "timesteps" or getattr(model, "update_frequency", None) is None:
        return None
    frequency = model.update_frequency.is_constant()  # None: a decaying frequency, no exact schedule to keep
    if not isinstance(frequency, int) or frequency < 1 or not hasattr(model, "last_update"):
        return None
    return frequency
