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


@pytest.mark.processes
def test_init_copies_default_specs_and_checks_credentials(tmp_path: Path) -> None:
    from tests.support.gke import service_account_key

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


@pytest.mark.processes
def test_init_refuses_a_file_that_is_not_a_credentials_file(tmp_path: Path) -> None:
    secret = tmp_path / "notes.json"
    secret.write_text('{"password": "hunter2-canary"}')
    result = run_cli("init", "--credentials", str(secret), "--dir", str(tmp_path / "p"))
    assert result.returncode == 2
    assert "credentials" in result.stderr and "Traceback" not in result.stderr
    assert "hunter2-canary" not in result.stderr + result.stdout
    assert not (tmp_path / "p" / "rlcloud.yaml").exists()


@pytest.mark.processes
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


@pytest.mark.processes
def test_bad_set_and_bad_override_exit_2_without_traceback(tmp_path: Path) -> None:
    spec = tmp_path / "exp.yaml"
    spec.write_text(
        "name: demo\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo, batch_size: 5}\nepisodes: 5\n"
    )
    for args in (["--set", "novalue"], ["--set", "num_workers=0"], ["--set", "run_mode=parallel"]):
        result = run_cli("spec", "show", str(spec), *args)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("error:")


@pytest.mark.processes
def test_unknown_command_exits_2() -> None:
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.processes
def test_completion_script_names_the_commands() -> None:
    result = run_cli("completion", "bash")
    assert result.returncode == 0
    assert "complete -o filenames -F _rlcloud_complete rlcloud" in result.stdout
    assert "rlcloud __complete bash" in result.stdout  # dynamic: tests/test_completion.py
    bash = subprocess.run(["bash", "-n"], input=result.stdout, text=True, capture_output=True)
    assert bash.returncode == 0, bash.stderr


@pytest.mark.processes
def test_experiment_new_writes_a_valid_spec(tmp_path: Path) -> None:
    result = run_cli("experiment", "new", "my-exp", "--dest", str(tmp_path))
    assert result.returncode == 0, result.stderr
    from rlcloud.specs.loading import read_data_file

    data = read_data_file(tmp_path / "my-exp.yaml")
    assert data["name"] == "my-exp"
    bad = run_cli("experiment", "new", "My_Exp", "--dest", str(tmp_path))
    assert bad.returncode == 2 and "name" in bad.stderr


# ---------------------------------------------------------------------- data is printed as text, not markup


def _rendered(renderable: object) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(renderable)
    return out.getvalue()


def test_status_and_summary_show_brackets_in_data(tmp_path: Path) -> None:
    from rlcloud import Experiment, ExperimentSpec
    from rlcloud.backend import ExperimentStatus, RoleStatus
    from rlcloud.display import status_table, summary_table

    message = "TensorFlow is not installed: pip install 'rlcloud[runner]'"
    status = ExperimentStatus(
        name="demo",
        state="failed",
        roles=[RoleStatus("agent", 0, "pending", reason="ErrImagePull: gcr.io/p/runner:[x]")],
        progress={"checkpoint": "ckpt/[x]"},
        message=message,
    )
    shown = _rendered(status_table(status))
    assert "gcr.io/p/runner:[x]" in shown
    assert message in shown
    spec = ExperimentSpec.from_file(Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml")
    summary = _rendered(summary_table(Experiment(spec, results=str(tmp_path / "[x]")), status, 60.0))
    assert message in summary and "ckpt/[x]" in summary and "[x]" in summary.split("results", 1)[1]


def test_status_figures_and_message_are_whole_lines_under_a_narrow_table() -> None:
    from rlcloud.backend import ExperimentStatus, RoleStatus
    from rlcloud.display import status_table

    message = "multi-0 failed (exit code 3: AttributeError: type object 'TensorforceError' has no attribute 'dtype')"
    status = ExperimentStatus(
        name="cartpole-ppo",
        state="failed",
        roles=[RoleStatus("multi", 0, "failed")],  # one short row: a table narrower than its figures
        progress={"timestep": 2016, "episode": 76, "mean_return": 24.25},
        message=message,
    )
    lines = [line.strip() for line in _rendered(status_table(status)).splitlines()]
    assert any(line.startswith("timesteps 2,016 · episodes 76 · ") and "mean return 24.2 · steps/s -" in line
               for line in lines), lines  # fmt: skip
    assert message in lines  # the reason it failed, on one line, not wrapped to the table's width


# ------------------------------------------------------------- global flags before or after the command


@pytest.mark.parametrize(
    "argv",
    [
        ["-o", "json", "experiment", "list"],
        ["experiment", "list", "-o", "json"],
        ["experiment", "list", "--output=json"],
        ["-v", "experiment", "list", "-o", "json"],
    ],
)
def test_output_flag_is_accepted_before_or_after_the_command(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--results", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.processes
def test_verbose_and_quiet_after_the_command(tmp_path: Path) -> None:
    from rlcloud.cli import build_parser

    spec = tmp_path / "exp.yaml"
    spec.write_text(
        "name: demo\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo, batch_size: 5}\nepisodes: 5\n"
    )
    for argv, verbose, quiet in (
        (["spec", "validate", str(spec), "-v"], 1, False),
        (["-vv", "spec", "validate", str(spec)], 2, False),
        (["run", str(spec), "-q"], 0, True),
        (["-q", "experiment", "attach", "demo"], 0, True),
    ):
        args = build_parser(argv).parse_args(argv)
        assert (args.verbose, args.quiet) == (verbose, quiet), argv
    result = run_cli("spec", "validate", str(spec), "-v")
    assert result.returncode == 0 and ": OK experiment demo" in result.stdout
    shown = run_cli("spec", "show", str(spec), "-o", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["name"] == "demo"
    assert yaml.safe_load(run_cli("-o", "yaml", "spec", "show", str(spec)).stdout)["name"] == "demo"


def test_every_command_help_lists_the_global_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["cluster", "list", "--help"])
    out = capsys.readouterr().out
    assert "global options:" in out and "--output" in out and "--quiet" in out and "--verbose" in out


# ---------------------------------------------------------------- errors caused by --set name the flag


@pytest.mark.processes
def test_a_bad_set_is_blamed_on_the_flag_not_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "exp.yaml"
    spec.write_text(
        "name: demo\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo, batch_size: 5}\nepisodes: 5\n"
    )
    result = run_cli("spec", "show", str(spec), "--set", "num_worker=8")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --set num_worker: unknown field")
    assert str(spec) not in result.stderr and "Traceback" not in result.stderr
    # experiment start/run fail before anything starts, the same way
    for command in (["experiment", "start"], ["run"]):
        assert main([*command, str(spec), "--set", "num_worker=8", "--results", str(tmp_path / "r")]) == 2
        assert capsys.readouterr().err.startswith("error: --set num_worker: unknown field")
    assert not (tmp_path / "r").exists()
    # a problem of the file itself is still the file's
    spec.write_text(spec.read_text() + "num_workers: 0\n")
    both = run_cli("spec", "show", str(spec), "--set", "run_mode=parallel")
    assert both.returncode == 2
    assert "  - --set run_mode: " in both.stderr
    assert f"  - {spec}: num_workers: " in both.stderr


# -------------------------------------------------------------------- CLI wording, not keyword arguments


def test_library_errors_reach_the_terminal_in_cli_terms(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    # no ~/.kube/config (the tests' HOME is empty): the library's "pass kubeconfig=PATH", exit 2 (bad input)
    assert main(["experiment", "list", "--context", "kind-x"]) == 2
    err = capsys.readouterr().err
    assert "pass --kubeconfig PATH" in err and "kubeconfig=" not in err


def test_every_translated_phrase_is_still_the_library_wording() -> None:
    # a phrase the library no longer says would leave its new wording untranslated: update _CLI_WORDING
    from rlcloud.cli._common import _CLI_WORDING, cli_wording

    src = Path(__file__).resolve().parents[1] / "src" / "rlcloud"
    library = "\n".join(p.read_text() for p in src.rglob("*.py") if "cli" not in p.relative_to(src).parts)
    for phrase, wording in _CLI_WORDING:
        assert phrase in library, phrase
        assert cli_wording(f"x {phrase} y") == f"x {wording} y"
        assert "=" not in wording.replace("'fallback_zones=", "")


def test_help_names_values_as_the_messages_do(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["experiment", "status", "--help"], ["init", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
    out = capsys.readouterr().out
    assert "--kubeconfig PATH" in out and "--credentials KEY.json" in out


# ------------------------------------------------------------------------- logs --role and --tail

LOG = [
    "agent-0 | starting",
    "env-server-0 | serving on 6025",
    "env-server-3 | serving on 6025",
    "agent-0 | episode 1",
    "env-server-3 | [x] reset",
    "agent-0 | episode 2",
]


class _LoggedExperiment:
    """Stands in for Experiment.attach(): logs() as a backend gives them (follow adds one new line), of
    the roles asked for (following: the learner's by default)."""

    def __init__(self) -> None:
        from rlcloud.specs import ExperimentSpec

        self.asked: list[tuple[bool, list[str] | None]] = []
        # what `--role` is checked against: agent-0 and env-server-0..3
        self.spec = ExperimentSpec.from_file(EXAMPLE, run_mode="distributed", num_workers=4)

    def logs(self, follow: bool = False, roles: list[str] | None = None) -> list[str]:
        from rlcloud.roles import role_selector

        self.asked.append((follow, roles))
        selected = role_selector(roles or (["learner"] if follow else None))
        lines = [*LOG, "agent-0 | episode 3"] if follow else list(LOG)
        return [line for line in lines if selected(line.partition(" | ")[0])]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], LOG),
        (["--role", "agent"], [LOG[0], LOG[3], LOG[5]]),
        (["--role", "env-server"], [LOG[1], LOG[2], LOG[4]]),
        (["--role", "env-server-3"], [LOG[2], LOG[4]]),
        (["--role", "env-server-3", "--role", "agent-0"], [LOG[0], LOG[2], LOG[3], LOG[4], LOG[5]]),
        (["--tail", "2"], LOG[-2:]),
        (["--tail", "0"], []),
        (["--role", "env-server", "--tail", "1"], [LOG[4]]),
        (["--tail", "1", "-f"], [LOG[5], "agent-0 | episode 3"]),
        (["--role", "env-server", "--tail", "1", "-f"], [LOG[4]]),
        (["-f"], [LOG[0], LOG[3], LOG[5], "agent-0 | episode 3"]),  # following: the learner's by default
        (["--role", "learner"], [LOG[0], LOG[3], LOG[5]]),
        (["-f", "--env-servers"], [*LOG, "agent-0 | episode 3"]),
        (["-f", "--role", "env-server-0"], [LOG[1]]),
    ],
)
def test_logs_filter_by_role_and_tail(
    flags: list[str], expected: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import rlcloud.cli.experiment

    monkeypatch.setattr(rlcloud.cli.experiment, "_experiment", lambda args: _LoggedExperiment())
    assert main(["experiment", "logs", "demo", *flags]) == 0
    assert capsys.readouterr().out.splitlines() == expected
    assert main(["logs", "demo", *flags]) == 0  # the shortcut takes the same flags
    assert capsys.readouterr().out.splitlines() == expected


def test_logs_follow_asks_the_backend_for_the_learner_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The selection reaches the backend (which then opens only those streams), not just a filter here."""
    import rlcloud.cli.experiment

    exp = _LoggedExperiment()
    monkeypatch.setattr(rlcloud.cli.experiment, "_experiment", lambda args: exp)
    assert main(["experiment", "logs", "demo", "-f"]) == 0
    assert main(["experiment", "logs", "demo", "-f", "--env-servers"]) == 0
    assert main(["experiment", "logs", "demo", "--env-servers", "--role", "agent"]) == 0
    assert main(["experiment", "logs", "demo"]) == 0
    capsys.readouterr()
    assert exp.asked == [
        (True, ["learner"]),
        (True, ["learner", "env-server"]),
        (False, ["agent", "env-server"]),
        (False, None),
    ]


@pytest.mark.parametrize("flags", [["--role", "learners"], ["--role", "env-server-x"], ["--tail", "-1"]])
def test_logs_bad_role_or_tail_exits_2(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "logs", "demo", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flags[0]}: ") and "Traceback" not in err


def test_tables_keep_every_column_when_piped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rlcloud experiment list | cat`: not a terminal, no COLUMNS: nothing is cut to 80 columns."""
    from rich.table import Table

    from rlcloud.cli._common import console

    monkeypatch.delenv("COLUMNS", raising=False)
    headers = [f"column-{i}-with-a-long-header" for i in range(12)]
    table = Table()
    for header in headers:
        table.add_column(header)
    table.add_row(*(f"value-{i}-" + "x" * 20 for i in range(12)))
    out = console()
    assert not out.is_terminal
    out.print(table)
    lines = capsys.readouterr().out.splitlines()
    assert all(h in lines[1] for h in headers)  # one header line, every column whole
    assert all(f"value-{i}-" + "x" * 20 in lines[3] for i in range(12))
    assert max(len(line) for line in lines) > 12 * 30 and len({len(line) for line in lines}) == 1


# ------------------------------------------------------------------ data never drives the terminal (issue 25)

#: Control sequences a hostile server, progress file or record may hold: a window title (OSC), clear screen
#: (CSI), BEL, a C1 CSI, a carriage return that would overwrite the line, DEL.
CONTROLS = ["\x1b]0;owned\x07", "\x1b[2J", "\x07", "\x9b31m", "hidden\rshown", "\x7f", "\x1bP+q\x1b\\"]


def _planted_run(root: Path, name: str, text: str) -> None:
    state_dir = root / name / ".rlcloud-local"
    (root / name / "logs").mkdir(parents=True)
    state_dir.mkdir()
    role = {"role": "single", "index": 0, "pid": 1, "started": 0, "host": f"host{text}"}
    (state_dir / "state.json").write_text(json.dumps({"name": name, "results": str(root), "roles": [role]}))
    from rlcloud.specs import ExperimentSpec

    spec = {
        "name": name,
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo"},
        "episodes": 5,
    }
    (root / name / "spec.yaml").write_text(ExperimentSpec.from_dict(spec).to_yaml())
    (root / name / "logs" / "single-0.log").write_text(f"one {text} line\nlast{text}\n")
    (root / name / "progress.json").write_text(json.dumps({"checkpoint": f"ckpt{text}", "timestep": 1}))


@pytest.mark.parametrize("control", CONTROLS)
def test_displayed_data_never_carries_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], control: str
) -> None:
    _planted_run(tmp_path, "evil", control)
    for argv in (
        ["experiment", "logs", "evil"],
        ["experiment", "logs", "evil", "--tail", "1"],
        ["experiment", "status", "evil"],
    ):
        assert main([*argv, "--results", str(tmp_path)]) == 0
        out, err = capsys.readouterr()
        for char in "\x1b\x07\x9b\r\x7f":
            assert char not in out + err, (argv, out)
        if argv[1] == "logs" and control != "hidden\rshown":
            assert "\\x" in out, (argv, out)  # shown, visibly, not dropped
    assert main(["experiment", "logs", "evil", "--raw", "--results", str(tmp_path)]) == 0
    assert control.replace("\r", "") in capsys.readouterr().out.replace("\r", "")


def test_the_console_shows_every_rendered_text_safely() -> None:
    """The CLI's console applies the one function to everything it renders (a rich upgrade must keep that)."""
    import io

    from rich.table import Table
    from rich.text import Text

    from rlcloud.cli._common import console, shown

    assert shown("a\x1b[2Jb\x9bc\td\ne\rf") == "a\\x1b[2Jb\\x9bc\td\nef"
    out = console()
    out.file = io.StringIO()
    table = Table()
    table.add_column("name")
    table.add_row(Text("x\x1b]0;t\x07y"))
    out.print(table)
    out.print("msg \x1b[31m", markup=False)
    assert "\x1b" not in out.file.getvalue() and "\\x1b]0;t" in out.file.getvalue()


def test_logs_and_download_never_follow_a_link_out_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    _planted_run(results, "linked", "")
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET KEY\n")
    log = results / "linked" / "logs" / "single-0.log"
    log.unlink()
    log.symlink_to(secret)
    (results / "linked" / "metrics.jsonl").symlink_to(secret)
    for argv in (
        ["experiment", "logs", "linked"],
        ["experiment", "logs", "linked", "--raw"],
        ["experiment", "status", "linked"],
    ):
        assert main([*argv, "--results", str(results)]) == 0
        out, err = capsys.readouterr()
        assert "SECRET" not in out + err
    dest = tmp_path / "dest"
    assert main(["experiment", "download", "linked", "--dest", str(dest), "--results", str(results)]) == 0
    capsys.readouterr()
    assert not any("SECRET" in p.read_text() for p in dest.rglob("*") if p.is_file())
    assert not (dest / "metrics.jsonl").exists()
    outside = tmp_path / "outside"
    outside.mkdir()
    other = tmp_path / "dest2"
    other.mkdir()
    (other / "logs").symlink_to(outside, target_is_directory=True)
    (results / "linked" / "logs" / "agent-0.log").write_text("a line\n")
    code = main(["experiment", "download", "linked", "--dest", str(other), "--results", str(results)])
    err = capsys.readouterr().err
    assert code == 1 and "symbolic link" in err and "Traceback" not in err
    assert list(outside.iterdir()) == []


# ------------------------------------------------------------- a kube-apiserver that is gone or dying (issue 25)


class _DyingApiServer:
    """A TCP server on 127.0.0.1 that answers every request the way a failing API server does: ``close``
    (accepts, then hangs up), ``garbage`` (200 with a body that is not JSON), ``half`` (a response cut short)."""

    def __init__(self, mode: str) -> None:
        import socket
        import threading

        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if self.mode == "garbage":
                    body = b"<html>\x1b[2J not json"
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(body), body)
                    )
                elif self.mode == "half":
                    conn.sendall(
                        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"kind": '
                    )

    def close(self) -> None:
        self.sock.close()


def _kubeconfig(path: Path, port: int) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.processes
@pytest.mark.parametrize("mode", ["refused", "close", "garbage", "half"])
def test_a_gone_or_dying_api_server_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    import socket

    from rlcloud.errors import RLCloudError
    from rlcloud.k8s.applier import Applier, RetryPolicy
    from rlcloud.k8s.client import api_client_from_kubeconfig
    from rlcloud.k8s.namespace_builders import build_namespace

    if mode == "refused":
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        server = None
    else:
        server = _DyingApiServer(mode)
        port = server.port
    try:
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", port)
        # what a start does first (create), and status / list from the CLI
        applier = Applier(api_client_from_kubeconfig(kubeconfig), retry=RetryPolicy(attempts=2, initial=0.01))
        with pytest.raises(RLCloudError):
            applier.create(build_namespace("rlcloud"))
        with pytest.raises(RLCloudError):
            applier.read("ConfigMap", "x-spec", "rlcloud")
        for argv in (["experiment", "status", "x"], ["experiment", "list"]):
            code = main([*argv, "--kubeconfig", str(kubeconfig)])
            err = capsys.readouterr().err
            assert code == 1 and "error:" in err and "Traceback" not in err and "\x1b" not in err, (argv, err)
    finally:
        if server is not None:
            server.close()


@pytest.mark.parametrize(
    "text",
    ["\x00\x01: [", "a: &a [*a]", "[" * 3000, "- just\n- a list\n", "contexts: 5\n", "x: " + "9" * 5000],
)
def test_a_garbage_kubeconfig_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert main(["experiment", "status", "x", "--kubeconfig", str(path)]) == 2
    err = capsys.readouterr().err
    assert "kubeconfig" in err and "Traceback" not in err


# ------------------------------------------------------------------------ every input, a clear error (issue 25)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml"

BAD_INPUTS = [
    # --grid values go through the bounded reader --set uses
    (["sweep", "validate", "{ex}", "--grid", "agent.learning_rate=["], "--grid agent.learning_rate"),
    (["sweep", "validate", "{ex}", "--grid", "agent.learning_rate={a: 1"], "--grid agent.learning_rate"),
    (["sweep", "validate", "{ex}", "--grid", "agent.learning_rate=" + "[" * 3000], "--grid agent.learning_rate"),
    (["sweep", "validate", "{ex}", "--grid", "agent.learning_rate=" + "[" * 3000 + "]" * 3000], "--grid"),
    (["sweep", "validate", "{ex}", "--grid", "agent.batch_size=" + "9" * 5000], "--grid agent.batch_size"),
    (["sweep", "validate", "{ex}", "--grid", "agent.batch_size=&a [*a]"], "--grid agent.batch_size"),
    (["sweep", "validate", "{ex}", "--set", "agent.batch_size=" + "9" * 5000], "--set agent.batch_size"),
    (["sweep", "validate", "{ex}", "--grid", "seed=1,2"], "--grid"),
    (["sweep", "validate", "{ex}", "--grid", "=1,2"], "--grid"),
    (["sweep", "validate", "{ex}", "--seeds", "0"], "--seeds"),
    (["sweep", "validate", "{ex}", "--seeds", "-4"], "--seeds"),
    (["sweep", "validate", "{ex}", "--seeds", "99999999999"], "--seeds"),
    (["sweep", "validate", "{ex}", "--max-parallel", "0"], "--max-parallel"),
    (["sweep", "validate", "{ex}", "--max-parallel", "-3"], "--max-parallel"),
    (["sweep", "validate", "{ex}", "--name", "Bad_Name"], "--name"),
    (["sweep", "validate", "{ex}", "--name", "-x"], "--name"),
    (["sweep", "validate", "{ex}", "--name", "a" * 200], "--name"),
    (["experiment", "logs", "x", "--tail", "1e23"], "--tail"),
    (["experiment", "logs", "x", "--tail", "-1"], "--tail"),
    (["experiment", "logs", "x", "--tail", "9" * 30], "--tail"),
    (["tensorboard", "x", "--port", "-1"], "--port"),
    (["tensorboard", "x", "--port", "65536"], "--port"),
    (["tensorboard", "x", "--port", "80.5"], "--port"),
    (["compare", "x", "--plot", "x.txt"], "--plot"),
    (["compare", "x", "--plot", "plot"], "--plot"),
    (["sweep", "results", "x", "--plot", "x.csv"], "--plot"),
    (["init", "--dir", "/proc/x"], "--dir"),
    (["init", "--dir", "/dev/null/x"], "--dir"),
]


@pytest.mark.parametrize(("argv", "flag"), BAD_INPUTS, ids=lambda v: " ".join(v)[:60] if isinstance(v, list) else v)
def test_every_bad_input_is_exit_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(EXAMPLE) if a == "{ex}" else a for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert flag in err and "Traceback" not in err, err
    assert len(err) < 2000


def test_file_urls_resolve_alike_for_sweeps_their_list_and_attach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud import Sweep, SweepSpec
    from rlcloud.local import LocalBackend

    monkeypatch.chdir(tmp_path)
    root = tmp_path / "root"
    spec = SweepSpec.from_dict({"name": "fs", "experiment": EXAMPLE.name, "seeds": 1}, base_dir=EXAMPLE.parent)
    sweep = Sweep(spec, results=f"file://{root}")
    assert sweep.results_root == str(root) and sweep.location == str(root / "fs")
    assert LocalBackend(f"file://{root}").results_root == str(root)
    statedir = root / "fs" / ".rlcloud-sweep"
    statedir.mkdir(parents=True)
    (statedir / "sweep.yaml").write_text(spec.to_yaml())
    (statedir / "state.json").write_text(json.dumps({"name": "fs", "results": str(root), "location": str(root / "fs")}))
    assert main(["sweep", "list", "--results", f"file://{root}"]) == 0
    assert capsys.readouterr().out.split() == ["fs"]
    assert Sweep.attach("fs", results=f"file://{root}").location == str(root / "fs")
    assert main(["sweep", "status", "fs", "--results", f"file://{root}"]) == 0
    capsys.readouterr()
    assert not (tmp_path / "file:").exists()


def test_local_parallelism_is_capped_by_the_machine(caplog: pytest.LogCaptureFixture) -> None:
    import os

    from rlcloud.local.sweeps import local_parallelism

    cpus = os.cpu_count() or 1
    assert local_parallelism(None, "s") == cpus and local_parallelism(1, "s") == 1
    with caplog.at_level("WARNING"):
        assert local_parallelism(cpus + 1000, "big") == cpus
    assert f"max_parallel {cpus + 1000} is more than this machine's {cpus} CPU(s)" in caplog.text


@pytest.mark.parametrize(
    "record",
    [
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
        "&a [*a]\n",
        "[" * 3000 + "]" * 3000,
        "x" * (300 * 1024),
    ],
    ids=["alias bomb", "cycle", "deep", "huge"],
)
def test_a_hostile_spec_of_record_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], record: str
) -> None:
    """`experiment start` and `compare` read the planted spec.yaml of record within bounds: exit 1 naming the
    file, at once, in bounded memory (an alias bomb there once grew past 1 GB)."""
    import tracemalloc

    results = tmp_path / "results"
    (results / "cartpole-ppo").mkdir(parents=True)
    (results / "cartpole-ppo" / "spec.yaml").write_text(record)
    tracemalloc.start()
    try:
        for argv in (
            ["experiment", "start", str(EXAMPLE), "--results", str(results)],
            ["compare", "cartpole-ppo", "--results", str(results)],
        ):
            assert main(argv) == 1
            err = capsys.readouterr().err
            assert "spec.yaml" in err and "Traceback" not in err, err
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 64 * 2**20
    assert not (results / "cartpole-ppo" / ".rlcloud-local").exists()  # nothing started


def test_command_descriptions_are_dedented_as_argparse_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    import inspect

    from rlcloud.cli import COMMANDS

    for cmd in COMMANDS:
        doc = getattr(cmd.handler, "__doc__", None)
        if doc:  # a docstring's continuation lines are indented in the source, never in --help
            assert cmd.description == inspect.cleandoc(doc), cmd
    with pytest.raises(SystemExit):
        main(["experiment", "run", "--help"])
    assert "a live progress bar on a terminal, a plain progress\nline every 30 s" in capsys.readouterr().out


def test_output_formats_are_honoured_or_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rlcloud.cli._common import print_data
    from rlcloud.errors import SpecError

    results = tmp_path / "results"
    (results / "lr" / ".rlcloud-sweep").mkdir(parents=True)  # what a local sweep leaves: its state
    (results / "lr" / ".rlcloud-sweep" / "state.json").write_text("{}")
    capsys.readouterr()
    assert main(["sweep", "list", "--results", str(results), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"name": "lr"}]  # JSON, not a bare name
    assert main(["sweep", "list", "--results", str(results), "-o", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["name", "lr"]
    print_data([{"check": "quota", "status": "ok"}], "csv")  # rows of a table: CSV
    assert capsys.readouterr().out.splitlines() == ["check,status", "quota,ok"]
    with pytest.raises(SpecError) as info:  # a status is nested: CSV cannot hold it, JSON was printed instead
        print_data({"name": "x", "roles": [{"role": "single"}]}, "csv")
    assert info.value.fields == ["-o"] and "use -o json or -o yaml" in str(info.value)
