"""The ``rlcloud`` console script: a thin layer over the public API.

argparse (standard library) rather than a CLI framework: ``rlcloud --help`` must stay within 3x the start
time of a bare Python, so nothing heavy is imported before a command runs. Each command module declares
its commands next to their handlers (``@command(path, help, example, args)``) and imports what a handler
needs inside it; :data:`COMMANDS` below is the one table the parser is built from. Bad input exits with
code 2 and a message naming the field, never a traceback.

Command modules (declarations and handlers; a run imports only the one declaring its first word, see INDEX):
    setup.py       init, completion          spec.py      spec validate|show
    experiment.py  experiment ..., the run|status|logs|attach shortcuts, tensorboard
    sweep.py       sweep validate|run|start|status|results|stop|list
    analysis.py    compare
    cluster.py     cluster create|list|delete|reap, doctor
What handlers import when they run (never for --help):
    _common.py     console, --set, output    progress.py  the live bar and tables of a run
    project.py     init's and experiment new's file work    gke.py  the cluster commands' GKE work
Machinery: _parser.py (Command, Arg, @command, the table -> argparse; ``checked(...)``, the argparse types that
refuse a bad flag value in one line before a handler runs; ``echo``, how a handler prints a line of data);
complete.py (shell completion: the scripts, and the hidden `rlcloud __complete SHELL WORD...` they call on TAB).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from rlcloud.cli._parser import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    build,
    command_words,
    echo,
    group,
)

TYPE_CHECKING = False  # not typing's: importing typing costs a sixth of `rlcloud --help`
if TYPE_CHECKING:
    import argparse
    import logging

__all__ = ["COMMANDS", "INDEX", "build_parser", "commands", "main"]

ROOT = group(
    "",
    "Run Tensorforce reinforcement-learning experiments in parallel, here or on GKE with GPUs.",
    "examples:\n  rlcloud experiment run examples/cartpole_ppo.yaml\n"
    "  rlcloud spec validate examples/*.yaml\n  rlcloud compare run-a run-b --plot runs.png\n"
    "  rlcloud cluster create -f configs/clusters/t4.yaml",
)

#: Every command as (module, name), in the order `rlcloud --help` lists them; a group comes before its
#: commands, and a name holding a tuple (the shortcuts) gives several.
_TABLE: tuple[tuple[str, str], ...] = (
    ("setup", "init"),
    ("spec", "SPEC"),
    ("spec", "validate"),
    ("spec", "show"),
    ("experiment", "EXPERIMENT"),
    ("experiment", "run"),
    ("experiment", "start"),
    ("experiment", "new"),
    ("experiment", "status"),
    ("experiment", "logs"),
    ("experiment", "pause"),
    ("experiment", "resume"),
    ("experiment", "stop"),
    ("experiment", "attach"),
    ("experiment", "download"),
    ("experiment", "export"),
    ("experiment", "video"),
    ("experiment", "list_"),
    ("experiment", "SHORTCUTS"),
    ("experiment", "tensorboard"),
    ("sweep", "SWEEP"),
    ("sweep", "validate"),
    ("sweep", "run"),
    ("sweep", "start"),
    ("sweep", "status"),
    ("sweep", "results"),
    ("sweep", "stop"),
    ("sweep", "extend"),
    ("sweep", "rerun"),
    ("sweep", "list_"),
    ("analysis", "compare"),
    ("cluster", "CLUSTER"),
    ("cluster", "create"),
    ("cluster", "list_"),
    ("cluster", "delete"),
    ("cluster", "reap"),
    ("cluster", "doctor"),
    ("setup", "completion"),
)

#: The first word of every command, in the order `rlcloud --help` lists them: the module declaring the
#: command(s) under it and their one-line help. A run imports only the module of the word it names, so
#: `rlcloud --help` compiles none of them (where no bytecode is cached, as under PYTHONDONTWRITEBYTECODE,
#: that was a third of its time); tests/test_cli.py checks this index against the declarations.
INDEX: tuple[tuple[str, str, str], ...] = (
    ("init", "setup", "Make this directory an rlcloud project."),
    ("spec", "spec", "Validate and show spec files."),
    ("experiment", "experiment", "Run and manage experiments."),
    ("run", "experiment", "Same as `experiment run`."),
    ("status", "experiment", "Same as `experiment status`."),
    ("logs", "experiment", "Same as `experiment logs`."),
    ("attach", "experiment", "Same as `experiment attach`."),
    ("tensorboard", "experiment", "Sync experiments' TensorBoard events and start one TensorBoard on all of them."),
    ("sweep", "sweep", "Run many trials of an experiment: seeds, grids, random search."),
    ("compare", "analysis", "Compare runs: the parameters that differ, the objective per run and over seeds."),
    ("cluster", "cluster", "Create, list and delete GKE clusters."),
    ("doctor", "cluster", "Check a Google Cloud project before anything is billed."),
    ("completion", "setup", "Print a shell completion script (bash, zsh, fish)."),
)


def commands(modules: Iterable[str] | None = None) -> tuple[Command, ...]:
    """The commands of the table, in order: all of them, or those declared in ``modules`` (only these are
    imported)."""
    import importlib

    wanted = None if modules is None else set(modules)
    found: list[Command] = []
    for module, name in _TABLE:
        if wanted is None or module in wanted:
            value = getattr(importlib.import_module(f"rlcloud.cli.{module}"), name)
            found.extend(value if isinstance(value, tuple) else (value,))
    return tuple(found)


def __getattr__(name: str) -> object:
    if name == "COMMANDS":  # every command (imports every command module)
        return commands()
    raise AttributeError(f"module 'rlcloud.cli' has no attribute {name!r}")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command tree; with ``argv`` only the branch of the command it names, and only the command module
    declaring it is imported (the other first words are listed from :data:`INDEX`). Without ``argv`` the
    whole tree (for completion scripts and tests)."""
    if argv is None:
        return build(commands(), ROOT, None)
    words = command_words(argv)
    first = words[0] if words else None
    table: list[Command] = []
    for word, module, help in INDEX:
        if word == first:
            table.extend(cmd for cmd in commands([module]) if cmd.path[0] == word)
        else:
            table.append(group(word, help, ""))  # listed in `rlcloud --help`, never built in this run
    return build(table, ROOT, argv)


def _setup_logging(verbosity: int) -> None:
    import logging

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_cli_wording_filter)
    if verbosity >= 2:
        from rlcloud.logsafety import install_redaction

        install_redaction()


def _cli_wording_filter(record: logging.LogRecord) -> bool:
    """Library warnings in CLI terms, control characters shown (a logging filter)."""
    from rlcloud.cli._common import cli_wording, shown

    if isinstance(record.msg, str):
        # The message is formatted here so that its data (a file's name, a server's text) is shown safely too.
        record.msg = shown(cli_wording(record.getMessage()))
        record.args = None
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 failure, 2 bad input, a name that names nothing included,
    130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["__complete"]:  # what the completion scripts call on TAB: hidden, not a command
        from rlcloud.cli.complete import complete_main

        return complete_main(argv[1:])
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code in (0, None):  # --help, --version
            raise
        return EXIT_USAGE  # a usage error, said in one line naming the flag (_parser._Parser.error)
    args.argv = argv  # the command as typed: what to run again to resume an interrupted run or sweep
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    _setup_logging(args.verbose)
    from rlcloud.errors import NotFoundError, RLCloudError, SpecError

    try:
        return int(handler(args))
    except RLCloudError as exc:
        from rlcloud.cli._common import cli_wording

        echo(f"error: {cli_wording(str(exc))}", file=sys.stderr)
        # A name that names nothing (a run, a sweep, a cluster, a file) is bad input as a misspelt flag is: 2.
        return EXIT_USAGE if isinstance(exc, SpecError | NotFoundError) else EXIT_FAILURE
    except KeyboardInterrupt:
        echo("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
