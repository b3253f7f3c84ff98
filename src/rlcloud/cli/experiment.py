"""`rlcloud experiment ...` and `rlcloud tensorboard`: run, follow and manage experiments."""

from __future__ import annotations

import argparse

from rlcloud.cli._parser import EXIT_OK, SET, Arg, checked, command, echo, group

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from rlcloud.backend import ExperimentStatus
    from rlcloud.errors import RLCloudError

    #: one run of a listing: its name, its status or why there is none, and its results location
    Listed = tuple[str, ExperimentStatus | RLCloudError, str | None]

EXPERIMENT = group("experiment", "Run and manage experiments.", "rlcloud experiment run FILE")

#: Where an experiment runs and keeps its results: every experiment command takes these.
TARGET = (
    Arg(
        "--kubeconfig",
        metavar="PATH",
        type=checked("file"),
        help="kubeconfig file of the Kubernetes cluster to use",
    ),
    Arg("--context", metavar="NAME", type=checked("label"), help="kubeconfig context to use"),
    Arg(
        "--namespace",
        metavar="NAME",
        type=checked("namespace"),
        help="Kubernetes namespace, with --kubeconfig/--context (default: rlcloud)",
    ),
    Arg(
        "-c",
        "--cluster",
        metavar="NAME|FILE",
        type=checked("cluster"),
        help="GKE cluster: a name or a cluster spec file",
    ),
    Arg(
        "--project",
        metavar="PROJECT",
        type=checked("project"),
        help="Google Cloud project (default: rlcloud.yaml, then ADC)",
    ),
    Arg(
        "--results",
        metavar="LOCATION",
        type=checked("results"),
        help="results root: gs://bucket/prefix or a directory (default ./rlcloud-results)",
    ),
)
FILE = Arg("file", metavar="FILE", help="experiment spec (YAML/JSON)")
#: resume a run with other code: recorded in its history with both digests, not refused
NEW_CODE = Arg(
    "--accept-new-code",
    action="store_true",
    help="resume the run with other code (code: digest): recorded in its history with both digests",
)
NAME = Arg("name", metavar="NAME", type=checked("run_name"), help="experiment name")
#: --dest of the commands that download: a directory that can be written (not /proc/x, not under a file)
DEST = Arg("--dest", metavar="DIR", type=checked("directory"), help="directory (default ./rlcloud-results/NAME)")


def _cluster_from_args(args: argparse.Namespace) -> Any:
    """The Cluster the flags name: --kubeconfig/--context for Kubernetes, -c/--cluster for GKE, else None."""
    from rlcloud.cluster import Cluster

    namespace = getattr(args, "namespace", None)
    if getattr(args, "kubeconfig", None) or getattr(args, "context", None):
        return Cluster.kubernetes(kubeconfig=args.kubeconfig, context=args.context, namespace=namespace or "rlcloud")
    if namespace is not None:
        # a namespace of a kubeconfig's cluster: alone it was ignored and the run started on this machine (with
        # -c, in GKE's rlcloud namespace)
        from rlcloud.errors import SpecError, SpecProblem

        message = "a namespace of a kubeconfig's cluster: add --kubeconfig or --context"
        raise SpecError([SpecProblem("--namespace", message, namespace)])
    cluster_ref = getattr(args, "cluster", None)
    if cluster_ref:
        return Cluster.named(cluster_ref, project=getattr(args, "project", None))
    return None


def target_flags(args: argparse.Namespace) -> list[str]:
    """The TARGET flags as given (those left at their defaults left out): what another command on the same
    experiment needs."""
    flags = []
    for arg in TARGET:
        value = getattr(args, arg.flags[-1].lstrip("-"), None)
        if value is not None and value != arg.options.get("default"):
            flags += [arg.flags[-1], str(value)]
    return flags


def _experiment(args: argparse.Namespace) -> Any:
    """The experiment NAME on the target the flags name."""
    from rlcloud.experiment import Experiment

    return Experiment.attach(args.name, cluster=_cluster_from_args(args), results=getattr(args, "results", None))


def _new_experiment(args: argparse.Namespace) -> Any:
    """An Experiment from FILE with the --set overrides, on the target the flags name (not started)."""
    from rlcloud.cli._common import blame_flags, parse_sets, set_flags
    from rlcloud.experiment import Experiment
    from rlcloud.specs import ExperimentSpec

    sets = parse_sets(args.set)
    cluster = _cluster_from_args(args)
    with blame_flags(set_flags(sets)):
        # loaded here, not by Experiment(file, **sets): a `--set cluster=` or `results=` override would collide
        # with Experiment's own keyword arguments of those names (an empty value means none: local, default)
        spec = ExperimentSpec.from_file(args.file, **sets)
        return Experiment(spec, results=args.results, cluster=cluster)


def _start(exp: Any, args: argparse.Namespace) -> None:
    """``exp.start()``, a problem its checks find in a --set value blamed on the flag (`--set
    agent.learning_rate`: Tensorforce's argument types are checked at start, after the spec was loaded)."""
    from rlcloud.cli._common import blame_flags, parse_sets, set_flags

    with blame_flags(set_flags(parse_sets(args.set))):
        exp.start(accept_new_code=args.accept_new_code)


@command(
    "experiment run",
    "Start an experiment and follow it to the end.",
    "rlcloud experiment run examples/cartpole_ppo.yaml --set run_mode=multi-threaded --set num_workers=8",
    args=[FILE, SET, NEW_CODE, *TARGET],
)
def run(args: argparse.Namespace) -> int:
    """Start an experiment and follow it until it ends: a live progress bar on a terminal, a plain progress
    line every 30 s without one (CI, nohup, a pod's log). Ctrl-C stops it cleanly."""
    from rlcloud.cli._common import command_line, console
    from rlcloud.cli.progress import follow_experiment

    exp = _new_experiment(args)
    _start(exp, args)
    again = command_line(args.argv)
    in_background = command_line(["experiment", "resume", exp.name, *target_flags(args)])
    return follow_experiment(exp, console=console(stderr=True), quiet=args.quiet, resume=(again, in_background))


@command(
    "experiment start",
    "Start an experiment in the background.",
    "rlcloud experiment start exp.yaml -c configs/clusters/t4.yaml",
    args=[FILE, SET, NEW_CODE, *TARGET],
)
def start(args: argparse.Namespace) -> int:
    """Start an experiment in the background and return."""
    exp = _new_experiment(args)
    _start(exp, args)
    if exp.already_running:
        echo(f"{exp.name} is already running ({exp.backend.kind}); nothing was started. results: {exp.location}")
    else:
        echo(f"started {exp.name} ({exp.backend.kind}); results: {exp.location}")
    from rlcloud.cli._common import command_line

    flags = target_flags(args)  # what finds it again: a --results or a cluster's flags
    status, logs = (command_line(["experiment", verb, exp.name, *flags]) for verb in ("status", "logs"))
    echo(f"follow it with: {status}   |   {logs} -f")
    return EXIT_OK


@command(
    "experiment new",
    "Write a new experiment spec from a template.",
    "rlcloud experiment new my-exp --template cartpole-ppo",
    args=[
        Arg("name", help="experiment name (also the file name)"),
        Arg(
            "--template",
            metavar="NAME",
            default="cartpole-ppo",
            help="one of the bundled experiments (default cartpole-ppo)",
        ),
        Arg(
            "--dest",
            metavar="DIR",
            default="configs/experiments",
            type=checked("directory"),
            help="directory to write to",
        ),
        Arg("--force", action="store_true", help="overwrite an existing file"),
    ],
)
def new(args: argparse.Namespace) -> int:
    """Write a new experiment spec file from a template, ready to edit and run."""
    from rlcloud.cli.project import new_experiment_file

    path = new_experiment_file(args.name, template=args.template, dest=args.dest, force=args.force)
    echo(f"wrote {path}; run it with: rlcloud experiment run {path}")
    return EXIT_OK


@command(
    "experiment status",
    "Show an experiment's state and progress.",
    "rlcloud experiment status cartpole-ppo",
    args=[NAME, *TARGET],
)
def status(args: argparse.Namespace) -> int:
    """Show each role's state and the learner's progress."""
    from rlcloud.cli._common import console, output_format, print_data

    observed = _experiment(args).status()
    fmt = output_format(args)
    if fmt != "table":
        print_data(observed.to_dict(), fmt)
        return EXIT_OK
    from rlcloud.display import status_table

    console().print(status_table(observed))
    return EXIT_OK


@command(
    "experiment logs",
    "Print an experiment's logs.",
    "rlcloud experiment logs cartpole-ppo --role env-server --tail 50",
    args=[
        NAME,
        *TARGET,
        Arg(
            "-f",
            "--follow",
            action="store_true",
            help="keep streaming until every role ends (the learner's log; add --env-servers or --role for more)",
        ),
        Arg(
            "--tail",
            metavar="N",
            # read by whole_flag in the handler: a bad value is a SpecError naming --tail, as every bad input
            help="only the last N lines (then new ones with -f)",
        ),
        Arg(
            "--raw",
            action="store_true",
            help="the lines as written, control characters included (by default ESC, BEL, CR... are shown "
            "as \\x1b, \\x07: a log is data and must not drive the terminal)",
        ),
        Arg(
            "--role",
            action="append",
            metavar="ROLE",
            help="only this role's lines: a role (agent, env-server, single, multi), one instance of it "
            "(env-server-3) or learner; repeatable",
        ),
        Arg(
            "--env-servers",
            action="store_true",
            help="with -f, also stream every env server's log (one stream per pod: many for a large run)",
        ),
    ],
)
def logs(args: argparse.Namespace) -> int:
    """Print every role's logs as "ROLE-INDEX | line" (with -f, the learner's only, unless --env-servers or
    --role ask for more); --role keeps some roles, --tail the last N lines, -f follows them until every
    role has ended."""
    from rlcloud.cli._common import shown, whole_flag
    from rlcloud.roles import LEARNER, Role, role_selector

    args.tail = whole_flag(args.tail, "--tail", 0, 10_000_000, "a number of lines")

    roles = list(args.role or [])
    if args.env_servers:
        roles = [*(roles or [LEARNER]), Role.ENV_SERVER.value]
    elif args.follow and not roles:
        # One stream per pod: a distributed run's 1,000 env servers are not followed unless asked for.
        roles = [LEARNER]
    role_selector(roles, field="--role")  # a bad name is an error before anything is read
    exp = _experiment(args)
    if args.role:
        # a role this run does not have (single-999, env-server in a single run) printed nothing, exit 0
        from rlcloud.roles import check_roles_of

        check_roles_of(exp.spec, args.role, field="--role")
    selection = roles or None
    show = (lambda line: line) if args.raw else shown
    if args.tail is None:
        for line in exp.logs(follow=args.follow, roles=selection):
            print(show(line), flush=True)
        return EXIT_OK
    from collections import Counter, deque

    seen: Counter[str] = Counter()
    last: deque[str] = deque(maxlen=args.tail)
    for line in exp.logs(follow=False, roles=selection):
        seen[_label(line)] += 1
        last.append(line)
    for line in last:
        print(show(line), flush=True)
    if args.follow:
        # following starts each role from its first line again: skip, per role, the lines already read
        for line in exp.logs(follow=True, roles=selection):
            label = _label(line)
            if seen[label] > 0:
                seen[label] -= 1
                continue
            print(show(line), flush=True)
    return EXIT_OK


def _label(line: str) -> str:
    """The role instance of a log line ("env-server-3" of "env-server-3 | ..."; "" for a line without one)."""
    label, sep, _ = line.partition(" | ")
    return label if sep else ""


@command(
    "experiment pause", "Checkpoint and pause an experiment.", "rlcloud experiment pause cartpole-ppo", [NAME, *TARGET]
)
def pause(args: argparse.Namespace) -> int:
    """Checkpoint, then stop computing; resume continues from the checkpoint."""
    exp = _experiment(args)
    if not exp.pause():
        echo(exp.nothing_to_do)
        return EXIT_OK
    echo(f"paused {args.name}; resume with: rlcloud experiment resume {args.name}")
    return EXIT_OK


@command("experiment resume", "Resume a paused experiment.", "rlcloud experiment resume cartpole-ppo", [NAME, *TARGET])
def resume(args: argparse.Namespace) -> int:
    """Continue a paused experiment from its latest checkpoint."""
    exp = _experiment(args)
    if not exp.resume():
        echo(exp.nothing_to_do)
        return EXIT_OK
    from rlcloud.cli._common import command_line

    attach = command_line(["attach", args.name, *target_flags(args)])
    echo(f"resumed {args.name} in the background; follow it with: {attach}")
    return EXIT_OK


@command(
    "experiment stop",
    "Stop an experiment and download its results.",
    "rlcloud experiment stop cartpole-ppo",
    args=[
        NAME,
        *TARGET,
        Arg("--no-download", action="store_true", help="leave the results in the store; download nothing"),
        Arg(
            "--dest",
            metavar="DIR",
            type=checked("directory"),
            help="download directory (default ./rlcloud-results/NAME)",
        ),
    ],
)
def stop(args: argparse.Namespace) -> int:
    """Stop an experiment (after a checkpoint), then download its results, as Experiment.stop() does: results
    in Cloud Storage go to --dest (default ./rlcloud-results/NAME); local results are already on this disk
    and are copied only to a --dest. --no-download skips it. Idempotent."""
    exp = _experiment(args)
    if not exp.stop(download=not args.no_download, dest=args.dest):
        echo(exp.nothing_to_do)
        return EXIT_OK
    where = exp.results_here
    echo(f"stopped {args.name}" + (f"; results in {where}" if where is not None else ""))
    return EXIT_OK


@command(
    "experiment list", "List experiments with their state and progress.", "rlcloud experiment list -o json", args=TARGET
)
def list_(args: argparse.Namespace) -> int:
    """One row per experiment here (or on the cluster the flags name): state, progress, return, last update,
    where it runs and its results."""
    from rlcloud.cli._common import output_format, print_data
    from rlcloud.experiment import Experiment

    cluster = _cluster_from_args(args)
    rows = experiment_rows(Experiment.list(cluster=cluster, results=args.results), cluster, args.results)
    fmt = output_format(args)
    if fmt == "csv":
        import csv
        import sys

        writer = csv.DictWriter(sys.stdout, fieldnames=list(_ROW_FIELDS))
        writer.writeheader()
        writer.writerows(rows)
    elif fmt != "table":
        print_data(rows, fmt)
    else:
        from rich.table import Table
        from rich.text import Text

        from rlcloud.cli._common import console

        table = Table()
        for column in _ROW_FIELDS.values():
            table.add_column(Text(column))
        for row in rows:
            table.add_row(*(Text(_show(row[key], key)) for key in _ROW_FIELDS))
        console().print(table)
    return EXIT_OK


_ROW_FIELDS = {
    "name": "name",
    "state": "state",
    "timestep": "timestep",
    "total_timesteps": "of",
    "percent": "%",
    "eta_s": "ETA",
    "episode": "episode",
    "mean_return": "return",
    "steps_per_second": "steps/s",
    "restarts": "restarts",
    "checkpoint_age_s": "checkpoint age",
    "cost_usd": "cost $",
    "budget_usd": "budget $",
    "updated_ago_s": "updated",
    "runs_on": "runs on",
    "results": "results",
}


def experiment_rows(names: list[str], cluster: Any, results: str | None) -> list[dict[str, Any]]:
    """What `experiment list` shows of each experiment (its status read once; unknown fields None).

    On this machine each run's status comes from its state.json and progress.json alone
    (:meth:`~rlcloud.local.backend.LocalExperiments.listed`): no Experiment built, no spec parsed per run, the
    project config read once (issue 36: 2,000 runs in well under 2 s). On a cluster, each is attached.
    """
    from rlcloud.cluster import Cluster
    from rlcloud.errors import RLCloudError
    from rlcloud.experiment import Experiment
    from rlcloud.local.backend import LocalBackend
    from rlcloud.results import check_results_root

    target = cluster or Cluster.local(results=None if results is None else check_results_root(results))
    backend = target.backend()
    where = target.describe()
    rows = []
    read: Iterator[Listed]
    if isinstance(backend, LocalBackend):
        read = backend.listed(names)
    else:

        def attached() -> Iterator[Listed]:
            for name in names:
                try:
                    exp = Experiment.attach(name, cluster=target, results=results)
                    yield name, exp.status(), exp.location
                except RLCloudError as exc:
                    yield name, exc, None

        read = attached()
    for name, status, location in read:
        if isinstance(status, RLCloudError) or location is None:
            row: dict[str, Any] = dict.fromkeys(_ROW_FIELDS)
            row.update(name=name, state=f"unknown ({status})")
            rows.append(row)
        else:
            rows.append(_row(name, status, where, location))
    return rows


def _row(name: str, status: ExperimentStatus, runs_on: str, location: str) -> dict[str, Any]:
    """One row of `experiment list`: ``status`` with its goal, budget and price (as Experiment.status gives)."""
    import time

    from rlcloud.display import display_state

    row: dict[str, Any] = dict.fromkeys(_ROW_FIELDS)
    row["name"] = name
    prog = status.progress
    updated = prog.updated
    figures = status.vitals
    row.update(
        # "stalled" (with how long) rather than "running" for a learner without progress
        state=display_state(status),
        timestep=prog.timestep,
        total_timesteps=status.goal[1] if status.goal is not None and status.goal[0] == "timestep" else None,
        percent=figures["percent"],
        eta_s=figures["eta_s"],
        episode=prog.episode,
        mean_return=figures["mean_return"],
        steps_per_second=figures["steps_per_second"],
        restarts=figures["restarts"],
        checkpoint_age_s=figures["checkpoint_age_s"],
        cost_usd=figures["cost_usd"],
        budget_usd=figures["budget_usd"],
        updated_ago_s=round(time.time() - updated) if updated is not None else None,
        runs_on=runs_on,
        results=location,
    )
    return row


def _show(value: Any, key: str = "") -> str:
    if value is None:
        return "-"
    if key.endswith("_s") and isinstance(value, int | float):
        from rlcloud.display import span

        return span(value)
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@command(
    "experiment attach",
    "Follow an experiment started elsewhere.",
    "rlcloud experiment attach cartpole-ppo",
    args=[NAME, *TARGET],
)
def attach(args: argparse.Namespace) -> int:
    """Reconnect to an experiment (from another machine too) and follow it like `run` does."""
    from rlcloud.cli._common import console
    from rlcloud.cli.progress import follow_experiment

    exp = _experiment(args)
    return follow_experiment(exp, console=console(stderr=True), quiet=args.quiet, stop_on_interrupt=False)


@command(
    "experiment download",
    "Download an experiment's results.",
    "rlcloud experiment download cartpole-ppo",
    args=[NAME, *TARGET, DEST],
)
def download(args: argparse.Namespace) -> int:
    """Download an experiment's results (incremental, checksums verified)."""
    import sys

    # a bar on a terminal only: without one (CI, nohup) its redraws are one long line of noise; -q: none
    bar = not args.quiet and sys.stderr.isatty()
    dest = _experiment(args).download(args.dest, progress=bar)
    echo(f"results of {args.name} in {dest}")
    return EXIT_OK


CHECKPOINT = Arg("--checkpoint", metavar="NAME", help="a checkpoint (ckpt-...) instead of the latest complete one")


def _policy_run(args: argparse.Namespace) -> Any:
    """The run NAME names: an experiment, a sweep's trial (SWEEP/TRIAL), or a sweep (its best
    configuration's best trial)."""
    from rlcloud.errors import NotFoundError, UnsupportedError
    from rlcloud.sweep import Sweep

    name, _, trial = args.name.partition("/")
    if not trial:
        try:
            return _experiment(args)
        except NotFoundError:
            pass
    try:
        sweep = Sweep.attach(name, cluster=_cluster_from_args(args), results=args.results)
    except (NotFoundError, UnsupportedError):
        raise NotFoundError(f"no experiment or sweep named {name!r}") from None
    return sweep.trial(trial) if trial else sweep.best_trial()


@command(
    "experiment export",
    "Export a run's trained policy as a TensorFlow SavedModel.",
    "rlcloud experiment export cartpole-ppo ./cartpole-policy",
    args=[
        Arg("name", metavar="NAME", help="experiment name, SWEEP/TRIAL, or a sweep (its best trial)"),
        Arg("dest", metavar="DIR", help="a new directory for the SavedModel and rlcloud-policy.json"),
        CHECKPOINT,
        *TARGET,
    ],
)
def export(args: argparse.Namespace) -> int:
    """Restore the run's latest complete checkpoint (or --checkpoint) and write its policy as a SavedModel
    (Tensorforce's act function: loads with tf.saved_model.load, no rlcloud needed) plus rlcloud-policy.json
    (the spec of record, the checkpoint, the environment). Needs the runner extra (TensorFlow)."""
    saved = _policy_run(args).export(args.dest, checkpoint=args.checkpoint)
    echo(f"policy of {args.name} in {saved} (with {saved.parent / 'rlcloud-policy.json'})")
    return EXIT_OK


@command(
    "experiment video",
    "Render episodes of a run's trained policy to a GIF or an MP4.",
    "rlcloud experiment video cartpole-ppo cartpole.gif --episodes 2",
    args=[
        Arg("name", metavar="NAME", help="experiment name, SWEEP/TRIAL, or a sweep (its best trial)"),
        Arg("out", metavar="FILE", help="the video: .gif, or .mp4 (the video extra)"),
        Arg("--episodes", default="1", metavar="N", help="episodes to play one after another (default 1)"),
        Arg("--seed", metavar="N", help="the environment's seed (default: the run's evaluation seed)"),
        Arg("--fps", default="50", metavar="N", help="frames per second (default 50, CartPole's own)"),
        CHECKPOINT,
        *TARGET,
    ],
)
def video(args: argparse.Namespace) -> int:
    """Play the trained policy deterministically (as the run's evaluation does) and write the frames as one
    video. Prints each episode's return. At most 2,500 frames."""
    import sys

    from rlcloud.cli._common import whole_flag

    episodes = whole_flag(args.episodes, "--episodes", 1, 100, "episodes")
    seed = whole_flag(args.seed, "--seed", 0, 2**31 - 1, "a seed")
    fps = whole_flag(args.fps, "--fps", 1, 240, "frames per second")
    bar = not args.quiet and sys.stderr.isatty()
    result = _policy_run(args).video(
        args.out, episodes=episodes, seed=seed, fps=fps, checkpoint=args.checkpoint, progress=bar
    )
    returns = ", ".join(f"{r:g}" for r in result.returns)
    echo(f"{result.path}: {result.frames} frames, {len(result.returns)} episode(s), returns {returns}")
    return EXIT_OK


@command(
    "tensorboard",
    "Sync experiments' TensorBoard events and start one TensorBoard on all of them.",
    "rlcloud tensorboard cartpole-ppo cartpole-ppo-2 cartpole-lr",
    args=[
        Arg(
            "names",
            nargs="+",
            metavar="NAME",
            type=checked("run_name"),
            help="experiment or sweep names (a sweep: all its trials)",
        ),
        Arg(
            "--dest",
            metavar="DIR",
            type=checked("directory"),
            help="download directory for runs in Cloud Storage (default ./rlcloud-results)",
        ),
        Arg("--port", default="6006", help="TensorBoard's port (default 6006)"),
        Arg("--print-only", action="store_true", help="only sync and print the logdirs"),
        *TARGET,
    ],
)
def tensorboard(args: argparse.Namespace) -> int:
    """Sync the TensorBoard event files of each run locally and start one TensorBoard on them, each run
    under its own name (a sweep's trials as SWEEP/TRIAL)."""
    from rlcloud.cli._common import shown, whole_flag

    args.port = whole_flag(str(args.port), "--port", 1, 65535, "a TCP port")  # before anything is synced
    runs = _tensorboard_runs(args)
    spec = ",".join(f"{name}:{logdir}" for name, logdir in runs)
    exe = tensorboard_executable()
    if exe is None or args.print_only:
        for name, logdir in runs:
            print(shown(f"{name}: {logdir}"))
        if exe is None:
            echo("(tensorboard is not installed here: pip install 'rlcloud[analysis]', then run it on these logdirs)")
        return EXIT_OK
    logdirs = ["--logdir", str(runs[0][1])] if len(runs) == 1 else ["--logdir_spec", spec]
    return _run_tensorboard([exe, *logdirs, "--port", str(args.port)], verbose=args.verbose)


def _run_tensorboard(command: list[str], *, verbose: int) -> int:
    """Run TensorBoard in the foreground, its TensorFlow start-up chatter (INFO lines written before absl's
    logging starts, CPU feature notes) left out of its stderr unless -v; its own lines pass as they come."""
    import os
    import subprocess
    import sys

    if verbose:
        return subprocess.call(command)
    from rlcloud.runner.compat import STARTUP_CHATTER

    env = {"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ}
    with subprocess.Popen(command, stderr=subprocess.PIPE, env=env, text=True, errors="replace") as proc:
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                if not STARTUP_CHATTER.match(line):
                    sys.stderr.write(line)
                    sys.stderr.flush()
        except KeyboardInterrupt:  # TensorBoard got the same SIGINT (one process group): let it finish
            pass
        return proc.wait()


def _tensorboard_runs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """``(run name, local logdir)`` of every experiment or sweep named, syncing event files from GCS."""
    from pathlib import Path

    from rlcloud.errors import NotFoundError, UnsupportedError
    from rlcloud.experiment import Experiment
    from rlcloud.layout import SUMMARIES
    from rlcloud.results import DEFAULT_RESULTS
    from rlcloud.storage.client import sync_tensorboard
    from rlcloud.sweep import Sweep

    cluster = _cluster_from_args(args)
    dest = Path(args.dest or DEFAULT_RESULTS)
    runs: list[tuple[str, Any]] = []
    for name in args.names:
        try:
            experiments = [(name, Experiment.attach(name, cluster=cluster, results=args.results))]
        except NotFoundError:
            try:
                sweep = Sweep.attach(name, cluster=cluster, results=args.results)
            except (NotFoundError, UnsupportedError):
                raise NotFoundError(f"no experiment or sweep named {name!r}") from None
            experiments = [(f"{name}/{exp.name}", exp) for exp in sweep.experiments(started=True)]
        for label, exp in experiments:
            if not exp.location.startswith("gs://"):
                # a local run's event files are already on this disk: copying them into its own directory
                # would nest a second copy (summaries/summaries) that TensorBoard shows twice
                runs.append((label, Path(exp.location) / SUMMARIES))
            else:
                runs.append((label, sync_tensorboard(exp._store(), dest / label)))
    return runs


def tensorboard_executable() -> str | None:
    """The ``tensorboard`` program: the one installed next to this Python first (a venv that is not on PATH,
    `uv run rlcloud`, pipx), else the first on PATH, else None."""
    import shutil
    import sys
    from pathlib import Path

    # sys.executable, not its resolved target: a venv's python is a symlink out of the venv's bin/
    here = Path(sys.executable).parent
    return shutil.which("tensorboard", path=str(here)) or shutil.which("tensorboard")


#: `rlcloud run|status|logs|attach`: the everyday verbs without `experiment`, same arguments
SHORTCUTS = tuple(cmd.alias(cmd.path[-1]) for cmd in (run, status, logs, attach))
