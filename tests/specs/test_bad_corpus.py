"""A corpus of bad spec files: each gives a SpecError naming the right field; the CLI exits 2 without a traceback.

Every file in tests/specs/bad/ (top level; bad/refs/ holds files they reference) is listed in EXPECTED with the
dotted field path its first problem names; "" means the file as a whole (unreadable, broken YAML/JSON, not a
mapping). The YAML files say what is wrong in their first-line comment.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rlcloud.errors import SpecError
from rlcloud.specs import LegacySpecWarning
from rlcloud.specs.loading import load_spec

BAD_DIR = Path(__file__).parent / "bad"
REPO_ROOT = Path(__file__).parents[2]

EXPECTED: dict[str, str] = {
    # the file as a whole
    "binary.yaml": "",
    "directory.yaml": "",
    "broken-yaml.yaml": "",
    "broken-indentation.yaml": "",
    "broken-json.json": "",
    "not-a-mapping.yaml": "",
    "empty.yaml": "",
    "duplicate-key.yaml": "",
    "duplicate-key.json": "",
    "kind-unknown.yaml": "kind",
    "kind-not-inferable.yaml": "kind",
    # experiments
    "exp-name-uppercase.yaml": "name",
    "exp-name-too-long.yaml": "name",
    "exp-name-missing.yaml": "name",
    "exp-no-stop-condition.yaml": "episodes",
    "exp-episodes-zero.yaml": "episodes",
    "exp-total-timesteps-text.yaml": "total_timesteps",
    "exp-env-no-type.yaml": "environment",
    "exp-env-gym-no-level.yaml": "environment",
    "exp-env-missing-file.yaml": "environment",
    "exp-env-mapping-expected.yaml": "environment",
    "exp-agent-no-type.yaml": "agent",
    "exp-agent-missing-file.json": "agent",
    "exp-network-number.yaml": "network",
    "exp-network-bad-layers.yaml": "network",
    "exp-network-missing-file.yaml": "network",
    "exp-run-mode-unknown.yaml": "run_mode",
    "exp-single-many-workers.yaml": "num_workers",
    "exp-multi-one-worker.yaml": "num_workers",
    "exp-distributed-zero-workers.yaml": "num_workers",
    "exp-parameter-servers.yaml": "num_parameter_servers",
    "exp-repeat-actions-zero.yaml": "repeat_actions",
    "exp-seed-negative.yaml": "seed",
    "exp-execution-unknown.yaml": "execution",
    "exp-deterministic-text.yaml": "deterministic",
    "exp-saver-frequency-text.yaml": "saver_frequency",
    "exp-saver-frequency-fraction.yaml": "saver_frequency",
    "exp-summary-episodes.yaml": "summary_frequency",
    "exp-evaluation-seconds.yaml": "evaluation.every",
    "exp-evaluation-episodes-zero.yaml": "evaluation.episodes",
    "exp-resources-memory-gb.yaml": "resources.learner.memory",
    "exp-resources-env-gpu.yaml": "resources.env_server.gpus",
    "exp-resources-unknown-role.yaml": "resources.trainer",
    "exp-results-bad-bucket.yaml": "results",
    "exp-unknown-field.yaml": "num_worker",
    "exp-capitalised-key.yaml": "resources.Learner",
    "exp-cluster-k80-inline.yaml": "cluster.gpu_type",
    "exp-cluster-file-k80.json": "cluster.gpu_type",
    "exp-cluster-missing-file.yaml": "cluster",
    "exp-cluster-number.yaml": "cluster",
    "exp-cluster-bad-memory.yaml": "cluster.memory_per_node",
    # tensorforce-client files
    "legacy-parameter-servers.json": "num_parameter_servers",
    "legacy-k80-cluster.json": "cluster.gpu_type",
    "legacy-cluster-k80.json": "gpu_type",
    "legacy-exploration-text.json": "agent.actions_exploration.timesteps",
    # clusters
    "cluster-name-dots.yaml": "name",
    "cluster-project.yaml": "project",
    "cluster-location.yaml": "location",
    "cluster-k80.yaml": "gpu_type",
    "cluster-unknown-gpu.yaml": "gpu_type",
    "cluster-gpus-no-type.yaml": "gpu_type",
    "cluster-memory-ratio.yaml": "memory_per_node",
    "cluster-odd-cpus.yaml": "cpus_per_node",
    "cluster-cpus-without-memory.yaml": "memory_per_node",
    "cluster-machine-and-shape.yaml": "machine_type",
    "cluster-num-nodes-zero.yaml": "num_nodes",
    "cluster-disk-small.json": "disk_size",
    "cluster-autoscaling-inverted.yaml": "autoscaling.min_nodes",
    "cluster-autoscaling-outside.yaml": "num_nodes",
    "cluster-labels.yaml": "labels",
    "cluster-ttl.yaml": "ttl",
    "cluster-spot-text.yaml": "spot",
    "cluster-fallback-region.yaml": "fallback_zones",
}

# what the message must say, where the field alone does not pin the rule down
MESSAGE_HINTS: dict[str, str] = {
    "broken-yaml.yaml": "line 5",
    "broken-indentation.yaml": "line 3",
    "broken-json.json": "line 5",
    "binary.yaml": "cannot read",
    "duplicate-key.yaml": "line 8, column 1: duplicate key 'episodes'",
    "duplicate-key.json": "duplicate key 'num_nodes'",
    "directory.yaml": "Is a directory",
    "exp-env-missing-file.yaml": "no-such-env.yaml",
    "exp-agent-missing-file.json": "no-such-agent.json",
    "exp-network-missing-file.yaml": "no-such-network.json",
    "exp-cluster-missing-file.yaml": "no-such-cluster.yaml",
    "cluster-k80.yaml": "2024-05-01",
    "legacy-cluster-k80.json": "2024-05-01",
    "exp-parameter-servers.yaml": "single learner",
    "cluster-memory-ratio.yaml": "7.2-52 GB",
    "exp-summary-episodes.yaml": "cannot count episodes",
}


def corpus() -> list[str]:
    """Names of the bad files (and the one directory) at the top of tests/specs/bad/."""
    return sorted(p.name for p in BAD_DIR.iterdir() if p.suffix in (".yaml", ".json"))


def test_corpus_is_complete_and_large() -> None:
    assert corpus() == sorted(EXPECTED), "add each new bad file to EXPECTED (and remove deleted ones)"
    assert len(EXPECTED) >= 40
    assert (BAD_DIR / "directory.yaml").is_dir()
    assert b"\x00" in (BAD_DIR / "binary.yaml").read_bytes()


def load_error(name: str) -> SpecError:
    """The SpecError loading ``name`` gives (legacy notes silenced: they are not what is tested here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)
        with pytest.raises(SpecError) as info:
            load_spec(BAD_DIR / name)
    return info.value


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_spec_names_its_field(name: str) -> None:
    error = load_error(name)
    assert error.problems, name
    assert error.fields[0] == EXPECTED[name], str(error)
    assert all(p.message for p in error.problems)
    assert name in str(error), "the message names the file"
    if name in MESSAGE_HINTS:
        assert MESSAGE_HINTS[name] in str(error)


# ------------------------------------------------------------------------------------------------- CLI
# Every file goes through the CLI's own entry point in-process (exit code, output), and through real
# `python -m rlcloud` subprocesses: one run with the whole corpus (an escaping exception would show a
# traceback and cut the report short), and one run per file for a file of each kind that fails before the
# models see it. A subprocess per file for all ~70 would cost most of a minute on a small machine.

cli_missing = pytest.mark.skipif(importlib.util.find_spec("rlcloud.cli") is None, reason="rlcloud.cli not there yet")

# one of each way a file can fail before the models see it, plus reference and legacy failures
FILE_LEVEL = [
    "binary.yaml",
    "directory.yaml",
    "broken-yaml.yaml",
    "broken-json.json",
    "empty.yaml",
    "kind-unknown.yaml",
    "exp-agent-missing-file.json",
    "legacy-exploration-text.json",
]


def relative(name: str) -> str:
    """The bad file's path as a user would type it from the repository root."""
    return f"tests/specs/bad/{name}"


def run_cli(*paths: str) -> subprocess.CompletedProcess[str]:
    """``python -m rlcloud spec validate PATHS`` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "rlcloud", "spec", "validate", *paths],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def check_invalid_output(name: str, output: str) -> None:
    """The CLI's report on one bad file: INVALID, the field, the hint, no traceback."""
    assert "Traceback" not in output
    assert f"{relative(name)}: INVALID" in output
    field = EXPECTED[name]
    if field:
        assert f"  - {field}: " in output
    if name in MESSAGE_HINTS:
        assert MESSAGE_HINTS[name] in output


@cli_missing
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cli_validate_exits_2(name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from rlcloud.cli import main

    monkeypatch.chdir(REPO_ROOT)
    assert main(["spec", "validate", relative(name)]) == 2
    captured = capsys.readouterr()
    check_invalid_output(name, captured.out + captured.err)


@pytest.mark.processes
@cli_missing
@pytest.mark.parametrize("name", FILE_LEVEL)
def test_cli_subprocess_exits_2_without_traceback(name: str) -> None:
    result = run_cli(relative(name))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    check_invalid_output(name, result.stderr)


@pytest.mark.processes
@cli_missing
def test_cli_subprocess_reports_the_whole_corpus() -> None:
    names = sorted(EXPECTED)
    good = "tests/specs/legacy/small_cluster.json"
    result = run_cli(*[relative(n) for n in names], good)
    assert result.returncode == 2
    assert f"{good}: OK cluster small-cluster" in result.stdout
    # each file's report runs from its unindented "PATH: INVALID" line to the next one
    reports: dict[str, str] = {}
    current = ""
    for line in result.stderr.splitlines(keepends=True):
        if line.endswith(": INVALID\n") and not line.startswith(" "):
            current = line.removesuffix(": INVALID\n").removeprefix("tests/specs/bad/")
        reports[current] = reports.get(current, "") + line
    assert sorted(reports) == names
    for name in names:
        check_invalid_output(name, reports[name])
