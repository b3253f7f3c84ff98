"""The ``population:`` section of a SweepSpec: population-based training (PBT, Jaderberg et al. 2017).

    population:
      perturbation_interval: 8000        # timesteps between decisions
      quantile: 0.25                     # the bottom quarter copies the top quarter
      mutations:
        agent.learning_rate: {loguniform: [1e-4, 1e-2]}
        agent.entropy_regularization: [0.0, 0.001, 0.01]

The sweep's trials are the population. What the trials do at each interval is rlcloud.runner.population's;
this module is pure data: what may be mutated is checked here, against what Tensorforce 0.6.5 can apply to
a restored agent (:data:`APPLICABLE`, found by experiment: docs/sweeps.md, "Population-based training").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from rlcloud.specs._base import StrictModel

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "APPLICABLE",
    "NEED_NEW_VARIABLES",
    "REPLAY_AGENTS",
    "Population",
    "check_population",
    "mutation_problem",
    "parameter_problem",
]

#: Agent arguments a member may change when it takes another member's checkpoint: a new agent built with
#: the changed argument restores the checkpoint with every variable equal (Tensorforce 0.6.5, CartPole, PPO
#: and DQN; nested keys such as ``agent.baseline_optimizer.learning_rate`` included). No argument changes
#: on a live agent: Tensorforce traces its hyperparameters into its TensorFlow functions as constants (an
#: agent has no learning-rate variable), so each exploit builds a new agent and restores into it.
APPLICABLE = frozenset(
    {
        "learning_rate",
        "discount",
        "entropy_regularization",
        "likelihood_ratio_clipping",
        "multi_step",
        "subsampling_fraction",
        "update_frequency",
        "baseline_optimizer",
        "l2_regularization",
        "exploration",
        "target_sync_frequency",
        "target_update_weight",
        "huber_loss",
        "start_updating",
        "predict_terminal_values",
        "reward_processing",
        "state_preprocessing",
    }
)
#: Agent arguments whose change gives variables of other shapes: a checkpoint of another value cannot be
#: restored ("Received incompatible tensor with shape ..."): the networks' sizes and the memories' capacities.
NEED_NEW_VARIABLES = {
    "network": "the policy network's layer sizes are its variables' shapes",
    "policy": "the policy network's layer sizes are its variables' shapes",
    "baseline": "the baseline network's layer sizes are its variables' shapes",
    "memory": "the memory's capacity is its buffers' shape",
    "batch_size": "an on-policy agent's memory holds batch_size episodes: its buffers' shape",
    "max_episode_timesteps": "the memory's buffers are sized by it",
}
#: Agents whose replay memory is sized by ``memory`` alone: their ``batch_size`` may change.
REPLAY_AGENTS = frozenset({"dqn", "double_dqn", "dueling_dqn", "dpg", "ddpg"})


def mutation_problem(key: str, agent_type: str | None) -> str | None:
    """Why ``key`` (a dotted experiment field) cannot be a mutation of ``agent_type``'s members, or None."""
    parts = key.split(".")
    if parts[0] != "agent" or len(parts) < 2:
        return f"{key} is no agent argument: PBT changes the agent's arguments only, such as agent.learning_rate"
    argument = parts[1]
    if argument == "batch_size" and agent_type in REPLAY_AGENTS:
        return None
    if argument in NEED_NEW_VARIABLES:
        return (
            f"{key} cannot change on a restored agent: {NEED_NEW_VARIABLES[argument]}, so another member's "
            f"checkpoint would not restore (Tensorforce 0.6.5); keep it fixed in the experiment"
        )
    if argument not in APPLICABLE:
        return f"{key} is not among the agent arguments PBT can change: {', '.join(sorted(APPLICABLE))}"
    return None


def parameter_problem(key: str, agent_type: str | None) -> str | None:
    """Why the swept parameter ``key`` cannot differ between the members of a population (their checkpoints
    must fit each other's variables), or None."""
    parts = key.split(".")
    shaped = parts[0] in ("network", "max_timesteps_per_episode", "environment") or (
        parts[0] == "agent" and len(parts) > 1 and parts[1] in NEED_NEW_VARIABLES
        and not (parts[1] == "batch_size" and agent_type in REPLAY_AGENTS)
    )  # fmt: skip
    if not shaped:
        return None
    return (
        f"{key} differs between the members, but they exchange checkpoints: it gives variables of other shapes "
        f"(or another task); keep it the same for every trial of a population"
    )


class Population(StrictModel):
    """Population-based training over the sweep's trials (rlcloud.runner.population): every
    ``perturbation_interval`` timesteps a trial in the bottom ``quantile`` of those that reached that timestep
    takes the checkpoint of one in the top ``quantile`` (exploit) and perturbs its ``mutations`` (explore)."""

    perturbation_interval: int = Field(
        ..., ge=1, le=10**12, description="Timesteps between two decisions (at interval, 2 x interval, ...)."
    )
    quantile: float = Field(
        0.25,
        gt=0,
        le=0.5,
        description="The share of the trials at an interval that copy (bottom) and are copied (top), 0 < q <= 0.5.",
    )
    resample_probability: float = Field(
        0.25, ge=0, le=1, description="Chance that a number given a distribution is drawn anew instead of x0.8/x1.2."
    )
    check_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Seconds between reads of the store while a decision waits for earlier trials to reach its "
        "timestep (never changes a decision).",
    )
    mutations: dict[str, Any] = Field(
        ...,
        description="Dotted agent argument -> a list of values or a distribution (as parameters takes): numbers "
        "are multiplied by 0.8 or 1.2, lists and choices drawn anew.",
    )

    @field_validator("mutations", mode="before")
    @classmethod
    def _mutations(cls, value: Any) -> Any:
        # a distribution's own checks are the sweep's (SweepSpec._population), where Distribution lives
        if not isinstance(value, dict) or not value:
            raise PydanticCustomError("mutations", "give at least one agent argument -> a list or a distribution")
        for key, values in value.items():
            if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*", key):
                raise PydanticCustomError("mutations", f"{key!r} is not a dotted field such as agent.learning_rate")
            if isinstance(values, list) and not values:
                raise PydanticCustomError("mutations", f"{key}: give at least one value")
            if not isinstance(values, list | dict | StrictModel):
                raise PydanticCustomError(
                    "mutations", f"{key}: give a list of values or a distribution such as {{loguniform: [1e-4, 1e-2]}}"
                )
        return dict(value)


def check_population(sweep: SweepSpec, distribution: type[StrictModel]) -> None:
    """Check ``sweep``'s population section against the rest of it (PydanticCustomError naming the field):
    mutations are lists or distributions (made ``distribution`` instances here) of agent arguments Tensorforce
    can change on a restored agent; no swept parameter gives the members variables of other shapes; PBT
    replaces early stopping, needs two trials at least and a synchronous loop (an exploit resets the
    environments)."""
    assert sweep.population is not None
    mutations, agent_type = sweep.population.mutations, sweep.experiment.agent.get("type")
    kind = agent_type if isinstance(agent_type, str) else None
    for key, values in list(mutations.items()):
        where = f"population.mutations.{key}"
        if isinstance(values, dict):
            try:
                mutations[key] = distribution.model_validate(values)
            except ValidationError as exc:
                raise PydanticCustomError("population", f"{where}: {exc.errors()[0]['msg']}") from None
        problem = mutation_problem(key, kind)
        if problem is not None:
            raise PydanticCustomError("population", f"{where}: {problem}")
    for key, values in sweep.parameters.items():
        problem = parameter_problem(key, kind)
        if problem is not None and (not isinstance(values, list) or len(values) > 1):
            raise PydanticCustomError("population", f"parameters.{key}: {problem}")
    if sweep.early_stopping is not None:
        raise PydanticCustomError(
            "population", "population and early_stopping exclude each other: PBT replaces a bad trial's weights"
        )
    if sweep.num_trials < 2 or sweep.experiment.execution == "overlapped":
        raise PydanticCustomError(
            "population", "population needs 2 trials or more (a population) and execution other than overlapped"
        )
