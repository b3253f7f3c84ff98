"""`rlcloud init` and `rlcloud completion`: set up a project directory and the shell."""

from __future__ import annotations

import argparse

from rlcloud.cli._parser import EXIT_OK, Arg, checked, command, echo


@command(
    "init",
    "Make this directory an rlcloud project.",
    "rlcloud init --project my-project",
    args=[
        Arg(
            "--project",
            metavar="PROJECT",
            type=checked("project"),
            help="Google Cloud project id to store as the default",
        ),
        Arg("--credentials", metavar="KEY.json", help="service-account key file: checked, never copied or printed"),
        Arg(
            "--results",
            metavar="LOCATION",
            type=checked("results"),
            help="default results root (gs://bucket/prefix or a directory)",
        ),
        Arg("--dir", metavar="DIR", default=".", help="project directory (default: .)"),
        Arg("--force", action="store_true", help="overwrite existing files"),
    ],
)
def init(args: argparse.Namespace) -> int:
    """Make the directory an rlcloud project: rlcloud.yaml plus default specs in ./configs/."""
    from pathlib import Path

    from rlcloud.cli.project import init_project

    report = init_project(
        Path(args.dir), project=args.project, credentials=args.credentials, results=args.results, force=args.force
    )
    for line in report:
        echo(line)
    return EXIT_OK


@command(
    "completion",
    "Print a shell completion script (bash, zsh, fish).",
    'eval "$(rlcloud completion bash)"',
    args=[Arg("shell", choices=("bash", "zsh", "fish"))],
)
def completion(args: argparse.Namespace) -> int:
    """Print a shell completion script. bash: add `eval "$(rlcloud completion bash)"` to ~/.bashrc; zsh: the
    same with zsh in ~/.zshrc, after compinit; fish: `rlcloud completion fish >
    ~/.config/fish/completions/rlcloud.fish`. It completes commands, flags and their values, experiment and
    sweep names (from the results root), cluster names (those the last `rlcloud cluster list` saw) and spec
    files."""
    from rlcloud.cli.complete import completion_script

    print(completion_script(args.shell), end="")
    return EXIT_OK
