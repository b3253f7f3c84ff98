"""The console script: init, spec show/validate basics, completion, and bad input exiting 2 without traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlcloud.cli import main


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlcloud", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("init", "spec", "experiment", "cluster", "tensorboard", "run", "status", "logs", "attach"):
        assert command in out


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment", "--help"],
        ["experiment", "run", "--help"],
        ["experiment", "list", "--help"],
        ["cluster", "create", "--help"],
        ["cluster", "delete", "--help"],
        ["spec", "validate", "--help"],
        ["init", "--help"],
    ],
)
def test_every_command_has_help_with_an_example(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert "example:" in capsys.readouterr().out


def test_init_copies_default_specs_and_checks_credentials(tmp_path: Path) -> None:
    from tests.gke.test_credentials import service_account_key

    # init loads the key (a broken one must fail there, not in `cluster list`): it must be a real RSA key
    key = service_account_key(tmp_path / "key.json", "my-rl-project")
    canary = json.loads(key.read_text())["private_key"].splitlines()[5]
    project = tmp_path / "proj"
    result = run_cli("init", "--project", "my-rl-project", "--credentials", str(key), "--dir", str(project))
    assert result.returncode == 0, result.stderr
    assert canary not in result.stdout + result.stderr
    config = yaml.safe_load((project / "rlcloud.yaml").read_text())
    assert config["project"] == "my-rl-project"
    assert config["credentials"] == str(key.resolve())
    # the key itself is never copied into the project
    assert not any(canary in p.read_text(errors="ignore") for p in project.rglob("*") if p.is_file())
    for kind in ("clusters", "experiments", "agents", "networks", "environments"):
        assert list((project / "configs" / kind).glob("*.yaml")), kind
    # the copied experiments resolve their agent/env/network by name from ./configs/<kind>s/
    validate = run_cli("spec", "validate", *map(str, (project / "configs/experiments").glob("*.yaml")), cwd=project)
    assert validate.returncode == 0, validate.stderr
    assert validate.stdout.count(": OK experiment") == 2


def test_init_refuses_a_file_that_is_not_a_credentials_file(tmp_path: Path) -> None:
    secret = tmp_path / "notes.json"
    secret.write_text('{"password": "hunter2-canary"}')
    result = run_cli("init", "--credentials", str(secret), "--dir", str(tmp_path / "p"))
    assert result.returncode == 2
    assert "credentials" in result.stderr and "Traceback" not in result.stderr
    assert "hunter2-canary" not in result.stderr + result.stdout
    assert not (tmp_path / "p" / "rlcloud.yaml").exists()


def test_spec_show_applies_overrides_and_round_trips(tmp_path: Path) -> None:
    spec = tmp_path / "exp.yaml"
    spec.write_text(
        "name: demo\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo, batch_size: 10}\nepisodes: 50\n"
    )
    result = run_cli("spec", "show", str(spec), "--set", "run_mode=multi-threaded", "--set", "num_workers=8")
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["kind"] == "Experiment" and shown["num_workers"] == 8 and shown["run_mode"] == "multi-threaded"
    again = tmp_path / "again.yaml"
    again.write_text(result.stdout)
    assert run_cli("spec", "show", str(again)).stdout == result.stdout


def test_bad_set_and_bad_override_exit_2_without_traceback(tmp_path: Path) -> None:
    spec = tmp_path / "exp.yaml"
    spec.write_text("name: demo\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo}\nepisodes: 5\n")
    for args in (["--set", "novalue"], ["--set", "num_workers=0"], ["--set", "run_mode=parallel"]):
        result = run_cli("spec", "show", str(spec), *args)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("error:")


def test_unknown_command_exits_2() -> None:
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_completion_script_names_the_commands() -> None:
    result = run_cli("completion", "bash")
    assert result.returncode == 0
    assert "complete -F _rlcloud_complete rlcloud" in result.stdout
    assert '"experiment") words="' in result.stdout and "run" in result.stdout
    bash = subprocess.run(["bash", "-n"], input=result.stdout, text=True, capture_output=True)
    assert bash.returncode == 0, bash.stderr


def test_experiment_new_writes_a_valid_spec(tmp_path: Path) -> None:
    result = run_cli("experiment", "new", "my-exp", "--dest", str(tmp_path))
    assert result.returncode == 0, result.stderr
    from rlcloud.specs.loading import read_data_file

    data = read_data_file(tmp_path / "my-exp.yaml")
    assert data["name"] == "my-exp"
    bad = run_cli("experiment", "new", "My_Exp", "--dest", str(tmp_path))
    assert bad.returncode == 2 and "name" in bad.stderr
