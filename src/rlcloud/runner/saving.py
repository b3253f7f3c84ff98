"""An agent's checkpoint without the state Tensorforce discards on restore: its per-environment episode buffers.

Tensorforce's ``Agent.save(format="checkpoint")`` writes every variable reachable from the model, also
those it creates with ``is_saved=False``: the observe buffers that hold each environment's unfinished
episode (``states_buffer``, ``actions_buffer``, ``buffer_index``, ...; ``parallel_interactions x
max_episode_timesteps`` states when the agent runs several environments), the episode counters and the
summaries' step counters.
``Agent.restore`` then resets ``buffer_index`` to zero (``TensorforceModel.reset``), so what those buffers
held is never used again, and rlcloud's loop resets the environments on resume anyway. For the Space
Invaders DQN example with 4 environments they are 564 MB of a 912 MB checkpoint (the replay memory, which
*is* restored, is 282 MB): writing and uploading them is most of the time a SIGTERM checkpoint takes
(benchmarks/preemption_checkpoint.py), and a Spot pod has 15 s.

:func:`save_agent` writes the same files as ``agent.save(directory, filename="agent",
format="checkpoint")`` (``agent-N.index``, ``agent-N.data-*``, ``checkpoint``, ``agent.json``), through it,
while the model shows the checkpoint all its children but those whose variables are all ``is_saved=False``.
Object-based restore matches by name and tolerates the missing ones (Tensorforce restores with
``expect_partial()``), so ``agent.restore`` reads it, and checkpoints written before this module remain
readable. The variables left out keep their current values in the restoring agent (zeros in a new one).

:func:`restore_agent` is ``agent.restore`` for those checkpoints, also when the replay memory's frames were
saved in the other dtype than this runner keeps them in (float32 or uint8 levels, runner/frames.py).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["restore_agent", "save_agent", "unsaved_state"]


def _variables(obj: Any, depth: int = 0) -> list[Any]:
    """The tf.Variables at or under ``obj`` in the checkpoint's object graph (a few levels: buffers are
    variables or dicts of variables).

    Breadth first, each object once: the graph links modules back to their parents (and through them to
    every other module), so a walk of every path visited the model's ~50 children tens of thousands of
    times (0.2-0.3 s of each checkpoint of CartPole's PPO). Breadth first, an object is reached at its
    shortest depth, so the objects expanded (those within 4 levels) and the variables found are the same.
    """
    import tensorflow as tf

    found: list[Any] = []
    seen = {id(obj)}
    level = [obj]
    while level:
        below = []
        for item in level:
            if isinstance(item, tf.Variable):
                found.append(item)
                continue
            children = getattr(item, "_trackable_children", None)
            if children is None or depth > 4:
                continue
            for child in children().values():
                if id(child) not in seen:
                    seen.add(id(child))
                    below.append(child)
        level = below
        depth += 1
    return found


def unsaved_state(model: Any) -> set[str]:
    """Names of the ``model``'s checkpoint children that hold only variables Tensorforce marks
    ``is_saved=False`` (its per-environment episode buffers and counters)."""
    skipped = set()
    for name, child in model._trackable_children().items():
        variables = _variables(child)
        if variables and all(getattr(v, "is_saved", True) is False for v in variables):
            skipped.add(name)
    return skipped


def save_agent(agent: Any, directory: str | os.PathLike[str]) -> list[str]:
    """Write ``agent``'s checkpoint into ``directory`` without its episode buffers (module docstring).

    Args:
        agent: A Tensorforce agent (``tensorforce.Agent.create``).
        directory: Where the files go; created if missing.

    Returns:
        The names of the model's children left out, sorted.
    """
    model = agent.model
    skipped = unsaved_state(model)
    children_of = type(model)._trackable_children

    def kept_children(save_type: Any = "checkpoint", **kwargs: Any) -> dict[str, Any]:
        children = children_of(model, save_type, **kwargs)
        return {name: child for name, child in children.items() if name not in skipped}

    # An instance attribute shadows the method for this one save. The model is filtered itself, not
    # wrapped: it is also reachable from its submodules (e.g. ``l2_regularization/parent``), and every
    # path to it must see the same children. object.__setattr__: tf.Module would track the function.
    object.__setattr__(model, "_trackable_children", kept_children)
    try:
        agent.save(directory=str(directory), filename="agent", format="checkpoint")
    finally:
        object.__delattr__(model, "_trackable_children")
    return sorted(skipped)


def restore_agent(agent: Any, directory: str | os.PathLike[str]) -> None:
    """Restore ``agent`` from the checkpoint :func:`save_agent` wrote into ``directory``, converting the replay
    memory's frames when they were saved as float32 and the agent keeps uint8 levels, or the reverse
    (runner/frames.py, :func:`~rlcloud.runner.frames.frames_across_dtypes`).

    Args:
        agent: A Tensorforce agent built from the run's spec.
        directory: A checkpoint directory (``agent-N.index``, ``agent-N.data-*``, ``checkpoint``).
    """
    import tensorflow as tf

    from rlcloud.runner.frames import frames_across_dtypes

    with frames_across_dtypes(agent.model, tf.train.latest_checkpoint(str(directory))):
        agent.restore(directory=str(directory), filename="agent", format="checkpoint")
