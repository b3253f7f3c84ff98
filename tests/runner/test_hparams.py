"""TensorBoard's HParams for a sweep's trials, read back with TensorBoard's own reader (its event
multiplexer, and the HParams plugin's metadata parsers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlcloud.runner.hparams import objective_tag, trial_settings, write_hparams
from rlcloud.runner.loop import agent_summary_name
from rlcloud.specs.sweep import SweepSpec

EXPERIMENT = {
    "name": "cartpole",
    "environment": {"type": "gym", "level": "CartPole-v1"},
    "agent": {"type": "ppo", "batch_size": 5, "learning_rate": 1e-3,
              "baseline": {"type": "auto", "size": 16, "depth": 1},
              "baseline_optimizer": {"optimizer": "adam", "learning_rate": 1e-3}},
    "total_timesteps": 1500,
    "run_mode": "multi-threaded",
    "num_workers": 4,
    "summary_frequency": "500t",
    "saver_frequency": None,
    "evaluation": None,
}  # fmt: skip


def _read(root: Path) -> Any:
    from tensorboard.backend.event_processing import plugin_event_multiplexer

    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(root))
    mux.Reload()
    return mux


def _hparams(mux: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run -> the experiment's config, run -> the session's start info) from the HParams plugin's data."""
    from tensorboard.plugins.hparams import metadata

    experiments, sessions = {}, {}
    for run, tags in mux.PluginRunToTagToContent(metadata.PLUGIN_NAME).items():
        for tag, content in tags.items():
            if tag == metadata.EXPERIMENT_TAG:
                experiments[run] = metadata.parse_experiment_plugin_data(content)
            elif tag == metadata.SESSION_START_INFO_TAG:
                sessions[run] = metadata.parse_session_start_info_plugin_data(content)
    return experiments, sessions


def _curve(mux: Any, run: str, tag: str) -> list[tuple[int, float]]:
    import tensorflow as tf

    return [(event.step, float(tf.make_ndarray(event.tensor_proto))) for event in mux.Tensors(run, tag)]


def test_agent_summaries_keep_their_optimizer() -> None:
    assert agent_summary_name("agent/cond_2/losses/policy-loss") == "agent/policy-loss"
    assert agent_summary_name("policy_optimizer/update-norm") == "agent/policy-update-norm"
    assert agent_summary_name("baseline_optimizer/update-norm") == "agent/baseline-update-norm"
    assert agent_summary_name("agent/entropy") == "agent/entropy"


def test_a_trials_hparams_group_by_parameter_with_the_objective_as_a_curve(tmp_path: Path) -> None:
    import tensorflow as tf

    sweep = SweepSpec.model_validate(
        {
            "name": "s",
            "experiment": EXPERIMENT,
            "parameters": {"agent.learning_rate": {"loguniform": [1e-4, 1e-2]}, "agent.batch_size": [5, 10],
                           "network": ["auto", {"type": "auto", "size": 32}]},
            "samples": 2,
            "seeds": 2,
        }
    )  # fmt: skip
    trial = sweep.trial(3)
    workdir = tmp_path / trial.name
    run = write_hparams(workdir, trial_settings(sweep, trial))
    # what the trainer writes in summaries/rlcloud: the objective against timesteps
    writer = tf.summary.create_file_writer(str(run / "rlcloud"))
    with writer.as_default():
        for step, value in ((500, 20.0), (1000, 35.5), (1500, 60.25)):
            tf.summary.scalar(objective_tag("mean_return"), value, step=step)
    writer.close()

    mux = _read(tmp_path)
    experiments, sessions = _hparams(mux)
    session_run = f"{trial.name}/summaries"
    assert list(sessions) == [session_run] and list(experiments) == [session_run]
    info = sessions[session_run]
    assert info.group_name == trial.name
    values = {name: value.WhichOneof("kind") and getattr(value, value.WhichOneof("kind"))
              for name, value in info.hparams.items()}  # fmt: skip
    assert values["agent.learning_rate"] == pytest.approx(trial.params["agent.learning_rate"])
    assert values["agent.batch_size"] == trial.params["agent.batch_size"] and values["seed"] == trial.seed
    assert isinstance(values["network"], str)  # a mapping among the values: held as text, as its domain
    config = experiments[session_run]
    domains = {h.name: h for h in config.hparam_infos}
    assert domains["agent.learning_rate"].domain_interval.min_value == pytest.approx(1e-4)
    assert [v.number_value for v in domains["agent.batch_size"].domain_discrete.values] == [5.0, 10.0]
    (metric,) = config.metric_infos
    assert (metric.name.tag, metric.name.group) == ("episode/mean_return_last_20", "rlcloud")
    # the metric is the curve the trainer writes, read where the plugin looks for it (session run/group)
    assert _curve(mux, f"{session_run}/{metric.name.group}", metric.name.tag) == [
        (500, 20.0), (1000, 35.5), (1500, 60.25)
    ]  # fmt: skip


@pytest.mark.training
def test_a_local_sweeps_trials_have_hparams_and_one_update_norm_per_optimizer(tmp_path: Path) -> None:
    from rlcloud import Sweep

    spec = SweepSpec.model_validate(
        {"name": "hp", "experiment": EXPERIMENT, "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
         "max_parallel": 2}
    )  # fmt: skip
    sweep = Sweep(spec, results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=900)
    assert status.state == "succeeded", status.to_dict()
    mux = _read(Path(sweep.location))
    experiments, sessions = _hparams(mux)
    names = spec.trial_names()
    assert sorted(sessions) == sorted(f"{n}/summaries" for n in names) == sorted(experiments)
    for trial in spec.trials():
        info = sessions[f"{trial.name}/summaries"]
        assert info.hparams["agent.learning_rate"].number_value == pytest.approx(trial.params["agent.learning_rate"])
        run = f"{trial.name}/summaries/rlcloud"
        objective = _curve(mux, run, "episode/mean_return_last_20")
        assert len(objective) >= 3 and objective[-1][0] >= 1500  # a curve over timesteps
        tags = set(mux.GetAccumulator(run).Tags()["tensors"])
        assert {"agent/policy-update-norm", "agent/baseline-update-norm"} <= tags
        assert "agent/update-norm" not in tags
