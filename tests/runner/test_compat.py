"""The Tensorforce 0.6.5 compatibility layer on the installed TensorFlow/tf-keras/numpy."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from rlcloud.runner import compat
from rlcloud.runner.compat import CompatError
from tests.support.runner import _python


def test_unknown_tensorflow_version_is_named() -> None:
    with pytest.raises(CompatError, match=r"TensorFlow 2\.99\.1 is not supported.*2\.13 to 2\.21"):
        compat._check_tf_version("2.99.1")
    with pytest.raises(CompatError, match="cannot parse"):
        compat._check_tf_version("nightly")
    compat._check_tf_version("2.21.0")


@pytest.mark.processes
def test_import_tensorforce_is_idempotent_and_patches_all_breaks() -> None:
    first = compat.import_tensorforce()
    assert compat.import_tensorforce() is first
    assert compat.is_applied()
    import tensorflow as tf
    from tensorforce.core.optimizers import tf_optimizer
    from tensorforce.core.utils import SignatureDict

    assert os.environ["TF_USE_LEGACY_KERAS"] == "1"
    assert tf.keras.__name__.startswith("tf_keras")  # (tensorforce needs Keras 2)
    assert np.bool8 is np.bool_  # type: ignore[attr-defined]  # (5)
    assert "tensorflow.python.training.tracking.tracking" in sys.modules  # (1)
    assert "tensorflow.python.keras.utils.conv_utils" in sys.modules  # (2)
    assert tf_optimizer.tensorflow_optimizers["adam"] is tf.keras.optimizers.legacy.Adam  # (3)
    # (4) nested entries of an input signature are tuples, the outer level a list
    inner = SignatureDict(a=tf.TensorSpec(shape=(), dtype=tf.float32), b=tf.TensorSpec(shape=(), dtype=tf.int64))
    outer = SignatureDict(x=tf.TensorSpec(shape=(), dtype=tf.float32), nested=inner)
    listed = outer.to_list()
    assert isinstance(listed, list) and isinstance(listed[1], tuple) and len(listed[1]) == 2


@pytest.mark.training
def test_agent_saves_and_restores_after_patching(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tensorforce = compat.import_tensorforce()
    kwargs = dict(
        agent="ppo",
        states=dict(type="float", shape=(4,)),
        actions=dict(type="int", shape=(), num_values=2),
        max_episode_timesteps=20,
        batch_size=2,
    )
    agent = tensorforce.Agent.create(**kwargs, config=dict(seed=3))
    agent.save(directory=str(tmp_path), filename="agent", format="checkpoint")
    saved = [v.numpy() for v in agent.model.trainable_variables]
    # Tensorforce keeps a class-level module stack: close one agent before building the next.
    agent.close()
    other = tensorforce.Agent.create(**kwargs, config=dict(seed=4))
    assert any(not np.array_equal(a, v.numpy()) for a, v in zip(saved, other.model.trainable_variables, strict=True))
    other.restore(directory=str(tmp_path), filename="agent", format="checkpoint")  # (6)
    for a, b in zip(saved, other.model.trainable_variables, strict=True):
        np.testing.assert_array_equal(a, b.numpy())
    other.close()


@pytest.mark.processes
def test_tensorflow_imported_with_keras3_is_refused() -> None:
    result = _python(
        """
        import tensorflow
        from rlcloud.runner.compat import import_tensorforce, CompatError
        try:
            import_tensorforce()
        except CompatError as exc:
            print("ERROR:", exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR: TensorFlow 2." in result.stdout
    assert "TF_USE_LEGACY_KERAS=1" in result.stdout


@pytest.mark.processes
def test_fresh_process_sets_legacy_keras_itself() -> None:
    result = _python(
        """
        import os
        from rlcloud.runner.compat import import_tensorforce
        import_tensorforce()
        import tensorflow as tf
        print(os.environ["TF_USE_LEGACY_KERAS"], tf.keras.__name__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "1" and result.stdout.split()[1].startswith("tf_keras")


@pytest.mark.processes
def test_runner_modules_import_no_tensorflow() -> None:
    result = _python(
        """
        import sys
        import rlcloud.runner.main, rlcloud.runner.loop, rlcloud.runner.vector, rlcloud.runner.envs
        heavy = [m for m in ("tensorflow", "tensorforce", "gymnasium") if m in sys.modules]
        print(",".join(heavy) or "none")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"


@pytest.mark.training
def test_registry_copies_match_tensorforce() -> None:
    compat.import_tensorforce()
    from tensorforce.agents import agents
    from tensorforce.core.layers import layer_modules
    from tensorforce.core.networks import network_modules
    from tensorforce.environments import environments

    from rlcloud.runner import envs

    assert set(agents) == envs.TENSORFORCE_AGENT_TYPES
    assert set(layer_modules) == envs.TENSORFORCE_LAYER_TYPES
    assert set(network_modules) == envs.TENSORFORCE_NETWORK_TYPES
    # gym/openai_gym are tensorforce's old-gym adapters; rlcloud routes those names to gymnasium.
    assert set(environments) - {"gym", "openai_gym"} == envs.TENSORFORCE_ENVIRONMENT_TYPES
