"""Shell completion (`rlcloud completion bash|zsh|fish` and the hidden `rlcloud __complete`) and the GPU type
aliases (`--gpu-type t4`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlcloud.cli import build_parser, main
from rlcloud.cli.complete import candidates, completion_script, remember_clusters

BIN = Path(sys.executable).parent


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with spec files, one local experiment and one sweep under ./rlcloud-results."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs" / "clusters").mkdir(parents=True)
    (tmp_path / "configs" / "clusters" / "t4.yaml").write_text("name: rl-t4\n")
    (tmp_path / "exp.yaml").write_text("name: demo\n")
    (tmp_path / "notes.txt").write_text("not a spec\n")
    for name, state_dir in (("cartpole-ppo", ".rlcloud-local"), ("lr-sweep", ".rlcloud-sweep")):
        (tmp_path / "rlcloud-results" / name / state_dir).mkdir(parents=True)
        (tmp_path / "rlcloud-results" / name / state_dir / "state.json").write_text("{}")
    return tmp_path


def complete(line: str) -> list[str]:
    """What TAB offers at the end of ``line`` (the words after `rlcloud`)."""
    return candidates(build_parser(), line.split(" "))


def test_commands_and_flags(project: Path) -> None:
    assert complete("exp") == ["experiment"]
    assert complete("experiment st") == ["start", "status", "stop"]
    assert "--kubeconfig" in complete("experiment status --k")
    assert "__complete" not in complete("")


def test_after_a_positional(project: Path) -> None:
    # the spec file is given: what comes next are flags, not more commands or files
    assert complete("experiment run exp.yaml --se") == ["--set"]
    assert complete("run exp.yaml ") == []
    assert complete("experiment run ") == ["configs/", "exp.yaml", "rlcloud-results/"]  # spec files, not notes.txt
    assert complete("spec validate exp.yaml ") == ["configs/", "exp.yaml", "rlcloud-results/"]  # PATH...
    assert complete("experiment run configs/clusters/") == ["configs/clusters/t4.yaml"]


def test_after_a_flag_value(project: Path) -> None:
    # a flag's value is not a positional: the NAME still comes after it
    assert complete("experiment status --namespace rl ") == ["cartpole-ppo"]
    assert complete("-o json experiment status c") == ["cartpole-ppo"]
    assert complete("logs cartpole-ppo --tail 5 --role env") == ["env-server"]
    assert complete("experiment status cartpole-ppo -o y") == ["yaml"]
    assert complete("completion ") == ["bash", "zsh", "fish"]
    assert complete("run exp.yaml --results=rl") == ["--results=rlcloud-results/"]


def test_names_of_experiments_sweeps_and_clusters(
    project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    assert complete("experiment status ") == ["cartpole-ppo"]
    assert complete("tensorboard ") == ["cartpole-ppo", "lr-sweep"]  # tensorboard takes sweeps too
    assert complete("sweep status ") == ["lr-sweep"]
    assert complete("experiment new ") == []  # a new name: nothing to offer
    # another results root on the line
    other = tmp_path_factory.mktemp("elsewhere")
    (other / "far-away" / ".rlcloud-local").mkdir(parents=True)
    (other / "far-away" / ".rlcloud-local" / "state.json").write_text("{}")
    assert complete(f"status --results {other} ") == ["far-away"]
    # clusters: only what `cluster list` saw last (no network on TAB), plus cluster spec files for -c
    assert complete("cluster delete -c ") == []
    remember_clusters(["rl-t4", "rl-l4"])
    assert complete("cluster delete -c rl") == ["rl-l4", "rl-t4"]
    assert complete("experiment status cartpole-ppo -c ") == [
        "rl-l4",
        "rl-t4",
        "configs/",
        "exp.yaml",
        "rlcloud-results/",
    ]
    assert "t4" in complete("cluster create -f x.yaml --gpu-type ")


def test_kubeconfig_contexts(project: Path) -> None:
    kubeconfig = project / "kubeconfig"
    kubeconfig.write_text("contexts:\n- name: kind-rl\n  context: {cluster: kind}\n- name: gke-rl\n")
    assert complete(f"experiment list --kubeconfig {kubeconfig} --context k") == ["kind-rl"]
    assert complete(f"experiment list --kubeconfig {project / 'missing'} --context ") == []


def test_hidden_complete_command_prints_one_candidate_a_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["__complete", "bash", "experiment", "status", ""]) == 0
    assert capsys.readouterr().out == "cartpole-ppo\n"
    assert main(["__complete", "bash", "nonsense", "--x=", ""]) == 0  # never an error, whatever is typed


@pytest.mark.processes
@pytest.mark.skipif(not (BIN / "rlcloud").exists(), reason="the rlcloud console script is not installed")
def test_bash_script_completes_after_a_positional_and_a_flag_value(project: Path) -> None:
    script = completion_script("bash")
    probe = (
        script
        + 'COMP_WORDS=(rlcloud experiment status --namespace rl ""); COMP_CWORD=5; _rlcloud_complete; '
        + 'echo "1:${COMPREPLY[*]}"; '
        + 'COMP_WORDS=(rlcloud run exp.yaml --se); COMP_CWORD=3; _rlcloud_complete; echo "2:${COMPREPLY[*]}"\n'
    )
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env, cwd=project, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["1:cartpole-ppo", "2:--set"]


_PROBES = {
    # zsh: compadd only works inside the completion system; a stand-in prints what would be offered
    "zsh": "compdef() { :; }; {script}\n"
    'compadd() { while [[ $1 != -- ]]; do shift; done; shift; print -l -- "$@"; }; '
    'words=(rlcloud experiment status --namespace rl ""); CURRENT=6; _rlcloud; '
    "words=(rlcloud run exp.yaml --se); CURRENT=4; _rlcloud",
    "fish": '{script}\ncomplete -C "rlcloud experiment status --namespace rl "; '
    'complete -C "rlcloud run exp.yaml --se"',
}


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_complete_after_a_positional_and_a_flag_value(shell: str, project: Path) -> None:
    exe = shutil.which(shell)
    if exe is None or not (BIN / "rlcloud").exists():
        pytest.skip(f"{shell} or the rlcloud console script is not installed here")
    probe = _PROBES[shell].replace("{script}", completion_script(shell))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    args = [exe, "-f", "-c", probe] if shell == "zsh" else [exe, "--no-config", "-c", probe]
    result = subprocess.run(args, capture_output=True, text=True, env=env, cwd=project, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["cartpole-ppo", "--set"]


@pytest.mark.processes
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_every_shell_gets_a_script_that_parses(shell: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rlcloud", "completion", shell], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "rlcloud __complete" in result.stdout
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed here")
    check = [exe, "--no-execute"] if shell == "fish" else [exe, "-n"]
    parsed = subprocess.run([*check], input=result.stdout, text=True, capture_output=True, timeout=60)
    assert parsed.returncode == 0, parsed.stderr


# ------------------------------------------------------------------------------------- GPU type aliases


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("t4", "nvidia-tesla-t4"),
        ("T4", "nvidia-tesla-t4"),
        ("l4", "nvidia-l4"),
        ("a100", "nvidia-tesla-a100"),
        ("a100-80gb", "nvidia-a100-80gb"),
        ("h100", "nvidia-h100-80gb"),
        ("h200", "nvidia-h200-141gb"),
        ("v100", "nvidia-tesla-v100"),
        ("p100", "nvidia-tesla-p100"),
        ("p4", "nvidia-tesla-p4"),
        ("nvidia-t4", "nvidia-tesla-t4"),
        ("nvidia-l4", "nvidia-l4"),
    ],
)
def test_gpu_type_aliases(typed: str, expected: str) -> None:
    from rlcloud import Cluster, ClusterSpec

    assert ClusterSpec(name="rl", gpu_type=typed).gpu_type.value == expected
    assert Cluster.kubernetes(context="kind", gpu_type=typed).gpu_type == expected


def test_unknown_gpu_type_from_the_api_names_the_argument() -> None:
    from rlcloud import Cluster
    from rlcloud.errors import SpecError

    with pytest.raises(SpecError) as exc:
        Cluster.kubernetes(context="kind", gpu_type="t44")
    assert exc.value.problems[0].field == "gpu_type" and "t4" in exc.value.problems[0].message


@pytest.mark.processes
def test_a_bad_gpu_type_flag_is_blamed_on_the_flag(tmp_path: Path) -> None:
    spec = tmp_path / "t4.yaml"
    spec.write_text("name: rl-t4\nlocation: us-central1-a\ngpu_type: t4\n")
    result = subprocess.run(
        [sys.executable, "-m", "rlcloud", "cluster", "create", "-f", str(spec), "--gpu-type", "t44", "--yes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: --gpu-type: unknown gpu_type 't44'")
    assert "nvidia-tesla-t4 (t4)" in result.stderr and "a100-80gb" in result.stderr
    assert str(spec) not in result.stderr and "Traceback" not in result.stderr
