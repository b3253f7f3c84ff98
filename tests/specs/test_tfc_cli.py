"""The CLI on tensorforce-client files: validate part files, notes that name the file, `--set cluster=`."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rlcloud.cli import main
from rlcloud.specs import LegacySpecWarning

TFC = Path(__file__).parent / "tfc"
TF06 = Path(__file__).parent / "tf06"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rlcloud", *args], capture_output=True, text=True, timeout=120)


def test_validate_checks_an_agent_file_on_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "validate", str(TFC / "agents" / "ppo_baseline.json"), str(TF06 / "ppo.json")]) == 0
    out, err = capsys.readouterr()
    assert f"{TFC / 'agents' / 'ppo_baseline.json'}: OK agent ppo" in out
    assert f"{TF06 / 'ppo.json'}: OK agent ppo" in out  # `"agent": "ppo"` is not "agent None"
    assert "kind: Experiment" not in err
    assert "note: agent.type 'ppo_agent' became 'ppo'" in err


def test_validate_refuses_what_start_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    files = [TF06 / f"experiment_bad_{what}.yaml" for what in ("arg", "gym", "layer")] + [
        TFC / "environments/ue4_maze.json"
    ]
    assert main(["spec", "validate", *map(str, files)]) == 2
    err = capsys.readouterr().err
    assert err.count("INVALID") == 4
    assert "agent.likelihood_ratio_clipping: Tensorforce 0.6 agent 'trpo' takes no argument" in err
    assert "environment.level: unknown gymnasium id" in err
    assert "network[1].type: unknown layer type; Tensorforce 0.4's internal_lstm is 0.6's lstm" in err
    assert "Unreal Engine 4" in err


@pytest.mark.processes
def test_spec_show_warnings_name_the_spec_file_not_rlcloud_source() -> None:
    result = run_cli("spec", "show", str(TFC / "experiments" / "bare.json"))
    assert result.returncode == 0, result.stderr
    warning_lines = [line for line in result.stderr.splitlines() if "LegacySpecWarning" in line]
    assert warning_lines
    assert all(line.startswith(str(TFC)) for line in warning_lines), warning_lines
    assert "rlcloud/specs" not in result.stderr
    assert any(line.startswith(f"{TFC / 'agents' / 'ddqn_anneal.json'}:") for line in warning_lines)


@pytest.mark.parametrize("command", ["run", "start"])
def test_empty_cluster_and_results_overrides_mean_none(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlcloud.experiment import Experiment

    seen: list[Experiment] = []

    def start(self: Experiment, *, accept_new_code: bool = False) -> Experiment:
        seen.append(self)
        raise KeyboardInterrupt  # stop here: nothing is started

    monkeypatch.setattr(Experiment, "start", start)
    experiment = TFC / "experiments" / "invaders_dqn.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)  # the file's notes: tested elsewhere
        code = main(["experiment", command, str(experiment), "--set", "cluster=", "--set", "results="])
    assert code == 130, capsys.readouterr().err  # interrupted, not a TypeError
    assert seen[0].spec.cluster is None
    assert seen[0].spec.results is None


@pytest.mark.training  # builds the agents with Tensorforce
def test_validate_build_reports_a_build_error_as_a_field_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a value only Tensorforce checks: a replay memory smaller than one batch
    agent = tmp_path / "agent.json"
    agent.write_text('{"agent": "dqn", "memory": 10, "batch_size": 64}')
    assert main(["spec", "validate", str(agent)]) == 0
    assert main(["spec", "validate", "--build", str(agent), str(TF06 / "experiment.yaml")]) == 2
    out, err = capsys.readouterr()
    assert f"{agent}: INVALID" in err
    assert "Tensorforce cannot build the agent" in err
    assert f"{TF06 / 'experiment.yaml'}: OK experiment tf06-ppo" in out
