"""The ``rlcloud`` console script: a thin layer over the public API.

argparse (standard library) rather than a CLI framework: ``rlcloud --help`` must stay within 3x the start
time of a bare Python, so nothing heavy is imported before a command runs. Every command imports what it
needs itself. Bad input exits with code 2 and a message naming the field, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

TYPE_CHECKING = False  # not typing's: importing typing costs a sixth of `rlcloud --help`
if TYPE_CHECKING:
    from typing import Any

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse with examples kept verbatim in the help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)


class _Sink:
    """Swallows the argument set-up of commands that were not asked for: `rlcloud --help` and every command
    build only their own branch of the tree, so start-up stays near a bare Python's."""

    def __getattr__(self, name: str) -> Any:
        return self._swallow

    def _swallow(self, *args: Any, **kwargs: Any) -> _Sink:
        return self


_SINK = _Sink()


def _add(sub: Any, name: str, handler: Handler, help_: str, example: str, **kwargs: Any) -> Any:
    if isinstance(sub, _Sink):
        return sub
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help_, description=help_, epilog=f"example:\n  {example}", **kwargs
    )
    parser.set_defaults(handler=handler)
    selected = getattr(sub, "rlcloud_selected", None)
    if selected is not None and name != selected:
        return _SINK  # listed in the help, but its own arguments are never needed in this run
    return parser


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _parse_sets(items: Sequence[str] | None) -> dict[str, Any]:
    """--set KEY=VALUE pairs; VALUE is read as YAML (numbers, booleans, lists) so types come out right."""
    from rlcloud.errors import SpecError, SpecProblem

    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise SpecError([SpecProblem("--set", "expected KEY=VALUE, e.g. --set num_workers=8", item)])
        from rlcloud.specs.loading import parse_data_text

        try:
            # the spec files' own YAML reading, so "1e-3" is a float here as it is in a file
            out[key.strip()] = parse_data_text(raw, field=f"--set {key.strip()}") if raw.strip() else None
        except SpecError:
            out[key.strip()] = raw
    return out


def _output_json(args: argparse.Namespace) -> bool:
    return getattr(args, "output", "table") == "json"


def _print_json(data: Any) -> None:
    import json

    print(json.dumps(data, indent=2, default=str))


# ------------------------------------------------------------------------------------------ spec commands


def cmd_spec_validate(args: argparse.Namespace) -> int:
    """Validate each file (experiment, cluster, agent, network or environment): OK with key fields, or problems."""
    from rlcloud.specs.validation import validate_file

    failed = False
    for path in args.paths:
        report = validate_file(path, build=getattr(args, "build", False))
        for note in report.notes:
            print(f"{path}: note: {note}", file=sys.stderr)
        if report.ok:
            print(f"{path}: OK {report.summary}")
            continue
        failed = True
        print(f"{path}: INVALID", file=sys.stderr)
        for problem in report.problems:
            print(f"  - {str(problem).removeprefix(f'{path}: ')}", file=sys.stderr)
    return EXIT_USAGE if failed else EXIT_OK


def cmd_spec_show(args: argparse.Namespace) -> int:
    """Print the resolved spec (files referenced inline, defaults filled) as YAML or JSON."""
    from rlcloud.specs.loading import load_spec, spec_to_json, spec_to_yaml

    spec = load_spec(args.path, **_parse_sets(args.set))
    sys.stdout.write(spec_to_json(spec) + "\n" if args.output == "json" else spec_to_yaml(spec))
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """Make the directory an rlcloud project: rlcloud.yaml plus default specs in ./configs/."""
    from pathlib import Path

    from rlcloud.project import init_project

    report = init_project(
        Path(args.dir), project=args.project, credentials=args.credentials, results=args.results, force=args.force
    )
    for line in report:
        print(line)
    return EXIT_OK


# ------------------------------------------------------------------------------------ experiment commands


def _cluster_from_args(args: argparse.Namespace) -> Any:
    """The Cluster the flags name: --kubeconfig/--context for Kubernetes, -c/--cluster for GKE, else None."""
    from pathlib import Path

    from rlcloud.cluster import Cluster

    if getattr(args, "kubeconfig", None) or getattr(args, "context", None):
        return Cluster.kubernetes(kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace)
    cluster_ref = getattr(args, "cluster", None)
    if cluster_ref:
        if Path(cluster_ref).suffix in (".yaml", ".yml", ".json") or Path(cluster_ref).is_file():
            return Cluster.gke(cluster_ref, project=getattr(args, "project", None))
        return Cluster.get(cluster_ref, project=getattr(args, "project", None))
    return None


def _experiment(args: argparse.Namespace, *, attach: bool = True) -> Any:
    from rlcloud.experiment import Experiment

    cluster = _cluster_from_args(args)
    return Experiment.attach(args.name, cluster=cluster, results=getattr(args, "results", None))


def _spec_with_sets(args: argparse.Namespace) -> Any:
    """The spec file with its --set overrides (``--set cluster=`` / ``results=``: none, i.e. local / default)."""
    from rlcloud.specs import ExperimentSpec

    # loaded here, not by Experiment(file, **sets): a `cluster` or `results` override would collide with
    # Experiment's own keyword arguments of those names
    return ExperimentSpec.from_file(args.file, **_parse_sets(args.set))


def cmd_experiment_run(args: argparse.Namespace) -> int:
    """Start an experiment and follow it with a live progress bar until it ends; Ctrl-C stops it cleanly."""
    from rlcloud.experiment import Experiment

    exp = Experiment(_spec_with_sets(args), results=args.results, cluster=_cluster_from_args(args))
    exp.start()
    from rlcloud.progress import follow_experiment

    return follow_experiment(exp, console=_console(stderr=True), quiet=args.quiet)


def cmd_experiment_start(args: argparse.Namespace) -> int:
    """Start an experiment in the background and return."""
    from rlcloud.experiment import Experiment

    exp = Experiment(_spec_with_sets(args), results=args.results, cluster=_cluster_from_args(args))
    exp.start()
    print(f"started {exp.name} ({exp.backend.kind}); results: {exp.location}")
    print(f"follow it with: rlcloud experiment status {exp.name}   |   rlcloud experiment logs {exp.name} -f")
    return EXIT_OK


def cmd_experiment_new(args: argparse.Namespace) -> int:
    """Write a new experiment spec file from a template, ready to edit and run."""
    from rlcloud.project import new_experiment_file

    path = new_experiment_file(args.name, template=args.template, dest=args.dest, force=args.force)
    print(f"wrote {path}; run it with: rlcloud experiment run {path}")
    return EXIT_OK


def cmd_experiment_status(args: argparse.Namespace) -> int:
    """Show each role's state and the learner's progress."""
    exp = _experiment(args)
    status = exp.status()
    if _output_json(args):
        _print_json(status.to_dict())
        return EXIT_OK
    from rlcloud.progress import status_table

    _console().print(status_table(status))
    return EXIT_OK


def cmd_experiment_logs(args: argparse.Namespace) -> int:
    """Print every role's logs, prefixed by role; -f follows them."""
    exp = _experiment(args)
    for line in exp.logs(follow=args.follow):
        print(line, flush=True)
    return EXIT_OK


def cmd_experiment_pause(args: argparse.Namespace) -> int:
    """Checkpoint, then stop computing; resume continues from the checkpoint."""
    _experiment(args).pause()
    print(f"paused {args.name}; resume with: rlcloud experiment resume {args.name}")
    return EXIT_OK


def cmd_experiment_resume(args: argparse.Namespace) -> int:
    """Continue a paused experiment from its latest checkpoint."""
    _experiment(args).resume()
    print(f"resumed {args.name}")
    return EXIT_OK


def cmd_experiment_stop(args: argparse.Namespace) -> int:
    """Stop an experiment (download its results first unless --no-download). Idempotent."""
    exp = _experiment(args)
    exp.stop(download=not args.no_download, dest=args.dest)
    print(f"stopped {args.name}")
    return EXIT_OK


def cmd_experiment_list(args: argparse.Namespace) -> int:
    """List the experiments here (or on the cluster the flags name)."""
    from rlcloud.experiment import Experiment

    names = Experiment.list(cluster=_cluster_from_args(args), results=args.results)
    if _output_json(args):
        _print_json(names)
    else:
        for name in names:
            print(name)
    return EXIT_OK


def cmd_experiment_attach(args: argparse.Namespace) -> int:
    """Reconnect to an experiment (from another machine too) and follow it like `run` does."""
    exp = _experiment(args)
    from rlcloud.progress import follow_experiment

    return follow_experiment(exp, console=_console(stderr=True), quiet=args.quiet, stop_on_interrupt=False)


def cmd_experiment_download(args: argparse.Namespace) -> int:
    """Download an experiment's results (incremental, checksums verified)."""
    exp = _experiment(args)
    dest = exp.download(args.dest)
    print(f"results of {args.name} in {dest}")
    return EXIT_OK


def cmd_tensorboard(args: argparse.Namespace) -> int:
    """Sync the TensorBoard event files locally and start TensorBoard on them."""
    from pathlib import Path

    from rlcloud.storage.client import sync_tensorboard

    exp = _experiment(args)

    if args.dest is None and not exp.location.startswith("gs://"):
        # a local experiment's event files are already on this disk: copying them into its own
        # directory would nest a second copy (summaries/summaries) that TensorBoard shows twice
        logdir = Path(exp.location) / "summaries"
    else:
        logdir = sync_tensorboard(exp._store(), Path(args.dest or Path("rlcloud-results") / exp.name))
    import shutil
    import subprocess

    exe = shutil.which("tensorboard")
    if exe is None or args.print_only:
        print(f"TensorBoard logdir: {logdir}")
        if exe is None:
            print("(tensorboard is not installed here: pip install tensorboard, then: tensorboard --logdir DIR)")
        return EXIT_OK
    return subprocess.call([exe, "--logdir", str(logdir), "--port", str(args.port)])


# --------------------------------------------------------------------------------------- cluster commands


def cmd_cluster_create(args: argparse.Namespace) -> int:
    """Create a GKE cluster from a file (flags override settings); shows the cost estimate and asks first."""
    from rlcloud.gke.cli import cluster_create

    return cluster_create(args, _parse_sets(args.set))


def cmd_cluster_list(args: argparse.Namespace) -> int:
    """List the GKE clusters of the project."""
    from rlcloud.gke.cli import cluster_list

    return cluster_list(args)


def cmd_cluster_delete(args: argparse.Namespace) -> int:
    """Delete a GKE cluster (or --all rlcloud clusters) after listing them and asking."""
    from rlcloud.gke.cli import cluster_delete

    return cluster_delete(args)


def cmd_cluster_reap(args: argparse.Namespace) -> int:
    """Delete rlcloud clusters past their expiry label."""
    from rlcloud.gke.cli import cluster_reap

    return cluster_reap(args)


def cmd_completion(args: argparse.Namespace) -> int:
    """Print a shell completion script (bash or zsh)."""
    print(completion_script(build_parser(), args.shell))
    return EXIT_OK


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """A static completion script for bash (zsh through bashcompinit) from the parser's commands."""
    tree: dict[str, list[str]] = {}

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        words: list[str] = []
        for action in p._actions:
            words += [o for o in action.option_strings if o.startswith("--")]
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    words.append(name)
                    walk(child, f"{prefix} {name}".strip())
        tree[prefix] = words

    walk(parser, "")
    cases = "\n".join(f'    "{k}") words="{" ".join(v)}" ;;' for k, v in sorted(tree.items()) if k)
    script = f"""# rlcloud {shell} completion: eval "$(rlcloud completion {shell})"
_rlcloud_complete() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" w words
  for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do [[ "$w" != -* ]] && path="${{path:+$path }}$w"; done
  case "$path" in
{cases}
    *) words="{" ".join(tree[""])}" ;;
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur") )
}}
"""
    if shell == "zsh":
        script += "autoload -U +X bashcompinit && bashcompinit\n"
    return script + "complete -F _rlcloud_complete rlcloud\n"


# -------------------------------------------------------------------------------------------- the parser


def _experiment_target_flags(p: argparse.ArgumentParser, *, results: bool = True) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file of the Kubernetes cluster to use")
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("--namespace", default="rlcloud", help="Kubernetes namespace (default: rlcloud)")
    p.add_argument("-c", "--cluster", help="GKE cluster: a name or a cluster spec file")
    p.add_argument("--project", help="Google Cloud project (default: rlcloud.yaml, then ADC)")
    if results:
        p.add_argument("--results", help="results root: gs://bucket/prefix or a directory (default ./rlcloud-results)")


def _output_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")


def _selected_command(argv: Sequence[str]) -> str:
    """The top-level command word in ``argv`` ("" when there is none, e.g. `rlcloud --help`)."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return ""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command tree; with ``argv`` only the branch of the command it names (no command module is
    imported either way). Without ``argv`` the whole tree (for completion scripts and tests)."""
    from rlcloud import __version__

    parser = _Parser(
        prog="rlcloud",
        description="Run Tensorforce reinforcement-learning experiments in parallel, here or on GKE with GPUs.",
        epilog="examples:\n  rlcloud experiment run examples/cartpole_ppo.yaml\n"
        "  rlcloud spec validate examples/*.yaml\n  rlcloud cluster create -f configs/clusters/t4.yaml",
    )
    parser.add_argument("--version", action="version", version=f"rlcloud {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    top = parser.add_subparsers(title="commands", metavar="COMMAND")
    top.rlcloud_selected = None if argv is None else _selected_command(argv)  # type: ignore[attr-defined]

    p = _add(top, "init", cmd_init, "Make this directory an rlcloud project.", "rlcloud init --project my-project")
    p.add_argument("--project", help="Google Cloud project id to store as the default")
    p.add_argument("--credentials", help="service-account key file: checked, never copied or printed")
    p.add_argument("--results", help="default results root (gs://bucket/prefix or a directory)")
    p.add_argument("--dir", default=".", help="project directory (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")

    spec = _add(top, "spec", lambda a: _help(spec), "Validate and show spec files.", "rlcloud spec validate FILE")
    spec_sub = spec.add_subparsers(title="spec commands", metavar="COMMAND")
    p = _add(
        spec_sub,
        "validate",
        cmd_spec_validate,
        "Check spec files; exit 2 on problems.",
        "rlcloud spec validate a.yaml b.json",
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--build", action="store_true", help="also build each agent with Tensorforce (CPU, seconds)")
    p = _add(
        spec_sub,
        "show",
        cmd_spec_show,
        "Print a spec fully resolved.",
        "rlcloud spec show exp.yaml --set num_workers=8",
    )
    p.add_argument("path", metavar="PATH")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting (repeatable)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")

    exp = _add(top, "experiment", lambda a: _help(exp), "Run and manage experiments.", "rlcloud experiment run FILE")
    exp_sub = exp.add_subparsers(title="experiment commands", metavar="COMMAND")
    for name, handler, help_, example in (
        (
            "run",
            cmd_experiment_run,
            "Start an experiment and follow it to the end.",
            "rlcloud experiment run examples/cartpole_ppo.yaml --set run_mode=multi-threaded --set num_workers=8",
        ),
        (
            "start",
            cmd_experiment_start,
            "Start an experiment in the background.",
            "rlcloud experiment start exp.yaml -c configs/clusters/t4.yaml",
        ),
    ):
        p = _add(exp_sub, name, handler, help_, example)
        p.add_argument("file", metavar="FILE", help="experiment spec (YAML/JSON)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting (repeatable)")
        _experiment_target_flags(p)
        if name == "run":
            p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p = _add(
        exp_sub,
        "new",
        cmd_experiment_new,
        "Write a new experiment spec from a template.",
        "rlcloud experiment new my-exp --template cartpole-ppo",
    )
    p.add_argument("name")
    p.add_argument("--template", default="cartpole-ppo", help="one of the bundled experiments (default cartpole-ppo)")
    p.add_argument("--dest", default="configs/experiments", help="directory to write to")
    p.add_argument("--force", action="store_true")
    for name, handler, help_ in (
        ("status", cmd_experiment_status, "Show an experiment's state and progress."),
        ("logs", cmd_experiment_logs, "Print an experiment's logs."),
        ("pause", cmd_experiment_pause, "Checkpoint and pause an experiment."),
        ("resume", cmd_experiment_resume, "Resume a paused experiment."),
        ("stop", cmd_experiment_stop, "Stop an experiment (downloads results first)."),
        ("attach", cmd_experiment_attach, "Follow an experiment started elsewhere."),
        ("download", cmd_experiment_download, "Download an experiment's results."),
    ):
        p = _add(exp_sub, name, handler, help_, f"rlcloud experiment {name} cartpole-ppo")
        p.add_argument("name", metavar="NAME")
        _experiment_target_flags(p)
        if name == "status":
            _output_flag(p)
        if name == "logs":
            p.add_argument("-f", "--follow", action="store_true", help="keep streaming until every role ends")
        if name == "stop":
            p.add_argument("--no-download", action="store_true", help="do not download the results first")
            p.add_argument("--dest", help="download directory (default ./rlcloud-results/NAME)")
        if name == "download":
            p.add_argument("--dest", help="directory (default ./rlcloud-results/NAME)")
        if name == "attach":
            p.add_argument("-q", "--quiet", action="store_true")
    p = _add(exp_sub, "list", cmd_experiment_list, "List experiments.", "rlcloud experiment list -o json")
    _experiment_target_flags(p)
    _output_flag(p)

    # top-level shortcuts for the everyday verbs
    for name, handler in (("run", cmd_experiment_run),):
        p = _add(top, name, handler, "Same as `experiment run`.", "rlcloud run examples/cartpole_ppo.yaml")
        p.add_argument("file", metavar="FILE")
        p.add_argument("--set", action="append", metavar="KEY=VALUE")
        p.add_argument("-q", "--quiet", action="store_true")
        _experiment_target_flags(p)
    for name, handler in (
        ("status", cmd_experiment_status),
        ("logs", cmd_experiment_logs),
        ("attach", cmd_experiment_attach),
    ):
        p = _add(top, name, handler, f"Same as `experiment {name}`.", f"rlcloud {name} cartpole-ppo")
        p.add_argument("name", metavar="NAME")
        _experiment_target_flags(p)
        if name == "status":
            _output_flag(p)
        if name == "logs":
            p.add_argument("-f", "--follow", action="store_true")
        if name == "attach":
            p.add_argument("-q", "--quiet", action="store_true")

    p = _add(
        top,
        "tensorboard",
        cmd_tensorboard,
        "Sync an experiment's TensorBoard events and start TensorBoard.",
        "rlcloud tensorboard cartpole-ppo",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--dest", help="download directory; the logdir is its summaries/ (default ./rlcloud-results/NAME)")
    p.add_argument("--port", type=int, default=6006)
    p.add_argument("--print-only", action="store_true", help="only sync and print the logdir")
    _experiment_target_flags(p)

    cl = _add(top, "cluster", lambda a: _help(cl), "Create, list and delete GKE clusters.", "rlcloud cluster list")
    cl_sub = cl.add_subparsers(title="cluster commands", metavar="COMMAND")
    p = _add(
        cl_sub,
        "create",
        cmd_cluster_create,
        "Create a GKE cluster.",
        "rlcloud cluster create -f configs/clusters/t4.yaml -n my-t4 --yes",
    )
    p.add_argument("-f", "--file", required=True, help="cluster spec file")
    p.add_argument("-n", "--name", help="cluster name (overrides the file)")
    p.add_argument("--num-nodes", type=int)
    p.add_argument("--gpus-per-node", type=int)
    p.add_argument("--gpu-type")
    p.add_argument("--machine-type")
    p.add_argument("--location")
    p.add_argument("--spot", action="store_true", default=None)
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--project")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before creating (the cost estimate is shown)")
    p.add_argument("--no-wait", action="store_true", help="return once the request is accepted")
    p = _add(cl_sub, "list", cmd_cluster_list, "List GKE clusters.", "rlcloud cluster list -o json")
    p.add_argument("--project")
    p.add_argument("--all", action="store_true", help="also clusters not made by rlcloud")
    _output_flag(p)
    p = _add(cl_sub, "delete", cmd_cluster_delete, "Delete GKE clusters.", "rlcloud cluster delete -c my-t4")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-c", "--cluster", help="cluster name")
    group.add_argument("--all", action="store_true", help="every rlcloud-managed cluster of the project")
    p.add_argument("--project")
    p.add_argument("--location")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask")
    p.add_argument("--no-wait", action="store_true")
    p = _add(
        cl_sub, "reap", cmd_cluster_reap, "Delete rlcloud clusters past their expiry.", "rlcloud cluster reap --yes"
    )
    p.add_argument("--project")
    p.add_argument("-y", "--yes", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="only list what would be deleted")

    p = _add(top, "completion", cmd_completion, "Print a shell completion script.", 'eval "$(rlcloud completion bash)"')
    p.add_argument("shell", choices=("bash", "zsh"))
    return parser


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def _setup_logging(verbosity: int) -> None:
    import logging

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if verbosity >= 2:
        from rlcloud.logsafety import install_redaction

        install_redaction()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 failure, 2 bad input, 130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    _setup_logging(args.verbose)
    from rlcloud.errors import RLCloudError, SpecError

    try:
        return handler(args)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RLCloudError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
