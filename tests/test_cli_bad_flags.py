"""Every command with a bad flag value: exit 2, one line naming the flag (or the name), never a traceback, never
exit 0 for nonsense (issue 37, item 7). All in this process: argparse's types refuse the value before a handler
runs, so nothing is read, started or created."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlcloud.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml"
CLUSTER = Path(__file__).resolve().parents[1] / "src" / "rlcloud" / "configs" / "clusters" / "t4.yaml"
LONG = "a" * 300

#: (argv, what the one line must name). {ex}: an experiment spec, {cl}: a cluster spec.
BAD_FLAGS = [
    # names of runs, sweeps and clusters: DNS-1123 labels of at most 40 characters
    (["experiment", "status", LONG], "NAME"),
    (["experiment", "status", "Bad_Name"], "NAME"),
    (["experiment", "logs", LONG], "NAME"),
    (["experiment", "pause", "-x-"], "NAME"),
    (["experiment", "stop", LONG], "NAME"),
    (["experiment", "download", LONG], "NAME"),
    (["status", LONG], "NAME"),
    (["attach", "UPPER"], "NAME"),
    (["sweep", "status", LONG], "NAME"),
    (["sweep", "results", "a b"], "NAME"),
    (["sweep", "stop", LONG], "NAME"),
    (["tensorboard", "ok", LONG], "NAME"),
    (["cluster", "delete", "-c", LONG, "--yes"], "--cluster"),
    (["cluster", "delete", "-c", "Bad_X", "--yes"], "--cluster"),
    (["experiment", "status", "x", "-c", LONG], "--cluster"),
    (["experiment", "status", "x", "-c", "no/such/file.yaml"], "--cluster"),
    (["cluster", "create", "-f", "{cl}", "-n", LONG], "--name"),
    # directories to write into
    (["experiment", "download", "x", "--dest", "/proc/x/y"], "--dest"),
    (["experiment", "stop", "x", "--dest", "/sys/x"], "--dest"),
    (["experiment", "new", "x", "--dest", "/proc/x"], "--dest"),
    (["experiment", "new", "x", "--template", LONG], "--template"),
    (["experiment", "new", "x", "--template", "../../etc/passwd"], "--template"),
    (["experiment", "download", "x", "--dest", "gs://b/x"], "--dest"),
    (["experiment", "download", "x", "--dest", "{ex}/under-a-file"], "--dest"),
    (["tensorboard", "x", "--dest", "/dev/x"], "--dest"),
    # durations
    (["doctor", "--timeout", "-1"], "--timeout"),
    (["doctor", "--timeout", "0"], "--timeout"),
    (["doctor", "--timeout", "nan"], "--timeout"),
    (["doctor", "--timeout", "inf"], "--timeout"),
    (["doctor", "--timeout", "1e400"], "--timeout"),
    (["doctor", "--timeout", "ten"], "--timeout"),
    # results roots
    (["doctor", "--results", "ftp://x"], "--results"),
    (["doctor", "--results", "gs://Bad_Bucket"], "--results"),
    (["experiment", "status", "x", "--results", "s3://b"], "--results"),
    (["experiment", "list", "--results", ""], "--results"),
    (["sweep", "list", "--results", "/proc/self"], "--results"),
    (["compare", "x", "--results", "ftp://x"], "--results"),
    (["init", "--results", "http://x"], "--results"),
    # projects
    (["doctor", "--project", "Bad_Project!"], "--project"),
    (["doctor", "--project", "abc"], "--project"),
    (["cluster", "list", "--project", "x" * 40], "--project"),
    (["cluster", "reap", "--dry-run", "--project", "-bad-"], "--project"),
    (["experiment", "status", "x", "--project", "1project"], "--project"),
    (["init", "--project", "UPPER-case"], "--project"),
    # cluster overrides
    (["cluster", "create", "-f", "{cl}", "--num-nodes", "-1"], "--num-nodes"),
    (["cluster", "create", "-f", "{cl}", "--num-nodes", "9" * 30], "--num-nodes"),
    (["cluster", "create", "-f", "{cl}", "--gpus-per-node", "1.5"], "--gpus-per-node"),
    (["cluster", "create", "-f", "{cl}", "--location", "nowhere"], "--location"),
    (["cluster", "create", "-f", "{cl}", "--machine-type", "n1 standard"], "--machine-type"),
    (["cluster", "create", "-f", "{cl}", "--gpu-type", ""], "--gpu-type"),
    (["cluster", "delete", "-c", "x", "--location", "Mars-1"], "--location"),
    # Kubernetes targets
    (["experiment", "list", "--kubeconfig", "/no/such/kubeconfig"], "--kubeconfig"),
    (["experiment", "list", "--kubeconfig", "/tmp"], "--kubeconfig"),
    (["experiment", "status", "x", "--context", ""], "--context"),
    (["experiment", "status", "x", "--context", "a b"], "--context"),
    (["experiment", "status", "x", "--context", "c", "--namespace", "Bad_NS"], "--namespace"),
    (["experiment", "status", "x", "--context", "c", "--namespace", "n" * 64], "--namespace"),
    # a namespace without a kubeconfig's cluster started a local run
    (["experiment", "start", "{ex}", "--namespace", "other"], "--namespace"),
    (["experiment", "run", "{ex}", "--namespace", "other"], "--namespace"),
    (["sweep", "start", "{ex}", "--seeds", "2", "--namespace", "other"], "--namespace"),
    (["experiment", "list", "--namespace", "other"], "--namespace"),
    # argparse's own usage errors: one line too
    (["experiment", "status"], "NAME"),
    (["completion", "nosh"], "shell"),
    (["experiment", "logs", "x", "--bogus"], "--bogus"),
    (["-o", "xml", "experiment", "list"], "--output"),
]


def _argv(argv: list[str]) -> list[str]:
    return [a.replace("{ex}", str(EXAMPLE)).replace("{cl}", str(CLUSTER)) for a in argv]


@pytest.mark.parametrize(("argv", "named"), BAD_FLAGS, ids=lambda v: " ".join(v)[:50] if isinstance(v, list) else v)
def test_a_bad_flag_is_exit_2_in_one_line_naming_it(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(_argv(argv))
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err  # one line: not the whole usage first, not a traceback
    assert named in lines[0] and "Traceback" not in captured.err
    assert len(lines[0]) < 700
    assert not (tmp_path / "rlcloud-results").exists() and captured.out == ""  # nothing started or written


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment", "status", "nosuch"],
        ["experiment", "logs", "nosuch"],
        ["experiment", "stop", "nosuch"],
        ["experiment", "download", "nosuch"],
        ["sweep", "status", "nosuch"],
        ["sweep", "results", "nosuch"],
        ["compare", "nosuch"],
        ["tensorboard", "nosuch"],
    ],
)
def test_a_name_that_names_nothing_is_bad_input(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown run or sweep is a typo as a bad flag is: exit 2 (it was 1, the code of a failure)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "nosuch" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


class _Run:
    """Stands in for Experiment.attach() of a run with ``spec``: logs() would print nothing for a role it lacks."""

    def __init__(self, spec: object) -> None:
        self.spec = spec

    def logs(self, follow: bool = False, roles: list[str] | None = None) -> list[str]:
        return []


@pytest.mark.parametrize(
    ("run_mode", "role"),
    [
        ("single", "single-999"),
        ("single", "env-server"),
        ("single", "agent"),
        ("multi-threaded", "single-0"),
        ("multi-threaded", "multi-1"),
        ("distributed", "env-server-4"),
        ("distributed", "agent-1"),
    ],
)
def test_logs_of_a_role_the_run_does_not_have_is_refused(
    run_mode: str, role: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--role single-999` printed nothing and exited 0: the roles are checked against the run's."""
    import rlcloud.cli.experiment
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec.from_file(EXAMPLE, run_mode=run_mode, num_workers=1 if run_mode == "single" else 4)
    monkeypatch.setattr(rlcloud.cli.experiment, "_experiment", lambda args: _Run(spec))
    assert main(["experiment", "logs", "x", "--role", role]) == 2
    err = capsys.readouterr().err
    assert "--role" in err and role in err and "no such role in this run" in err


@pytest.mark.parametrize(
    ("run_mode", "roles"),
    [("single", ["single-0"]), ("single", ["learner"]), ("distributed", ["env-server-3", "agent"])],
)
def test_logs_of_roles_the_run_has_are_taken(
    run_mode: str, roles: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rlcloud.cli.experiment
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec.from_file(EXAMPLE, run_mode=run_mode, num_workers=1 if run_mode == "single" else 4)
    monkeypatch.setattr(rlcloud.cli.experiment, "_experiment", lambda args: _Run(spec))
    assert main(["experiment", "logs", "x", *(f for r in roles for f in ("--role", r))]) == 0, capsys.readouterr()


def test_good_flags_still_parse(capsys: pytest.CaptureFixture[str]) -> None:
    """The checks take what the docs show: a domain-scoped project, a zone and a region, a cluster file."""
    from rlcloud.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["doctor", "--project", "example.com:my-project", "--timeout", "1200"])
    assert args.project == "example.com:my-project" and args.timeout == 1200.0
    args = parser.parse_args(
        ["cluster", "create", "-f", str(CLUSTER), "--location", "us-central1-a", "--num-nodes", "0"]
    )
    assert args.location == "us-central1-a" and args.num_nodes == 0
    args = parser.parse_args(["cluster", "delete", "-c", "rl-t4", "--location", "europe-west4"])
    assert args.location == "europe-west4"
    args = parser.parse_args(["experiment", "status", "x", "-c", str(CLUSTER), "--results", "gs://my-bucket/rl"])
    assert args.cluster == str(CLUSTER)


# ---------------------------------------------------------------- data never drives the terminal (issue 37, 11)


@pytest.mark.parametrize("control", ["\x1b[2J", "\x07", "\x1b]0;pwned\x07", "\x9b31m", "\r"])
def test_compare_notes_never_carry_control_characters(
    control: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run directory named with an escape sequence reached the note line under compare's table raw (the
    runs left out at budgets='complete' are named there)."""
    from tests.support.written_runs import write_run

    root = tmp_path / "results"
    ramp = [float(i) for i in range(100)]
    runs = [
        write_run(root, "full-s1", seed=1, returns=ramp),
        write_run(root, "full-s2", seed=2, returns=[r + 10 for r in ramp]),
        write_run(root, f"early{control}-s3", seed=3, returns=ramp[:40], state="stopped-early"),
    ]
    assert main(["compare", *runs, "--budgets", "complete"]) == 0
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "left out" in printed and "early" in printed
    assert control not in printed


def test_every_print_of_the_cli_goes_through_shown() -> None:
    """The CLI prints data (names, paths, notes, library messages) with echo() or print(shown(...)); a bare
    print of an f-string or a variable could carry an ESC to the terminal (compare's notes did)."""
    import ast

    allowed_calls = {"shown", "show", "dumps", "completion_script"}  # show: shown, or as written with --raw
    bare = []
    for path in sorted((Path(__file__).resolve().parents[1] / "src" / "rlcloud" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"):
                continue
            first = node.args[0] if node.args else None
            if first is None or (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            if isinstance(first, ast.Call):
                name = first.func.attr if isinstance(first.func, ast.Attribute) else getattr(first.func, "id", "")
                if name in allowed_calls:
                    continue
            if path.name == "_parser.py" and isinstance(first, ast.Call):  # echo() itself
                continue
            bare.append(f"{path.name}:{node.lineno}")
    assert not bare, f"print data with echo() (rlcloud.cli._parser): {bare}"
