"""`rlcloud init` and `rlcloud completion`: set up a project directory and the shell."""

from __future__ import annotations

import argparse

from rlcloud.cli._parser import EXIT_OK, Arg, command


@command(
    "init",
    "Make this directory an rlcloud project.",
    "rlcloud init --project my-project",
    args=[
        Arg("--project", metavar="PROJECT", help="Google Cloud project id to store as the default"),
        Arg("--credentials", metavar="KEY.json", help="service-account key file: checked, never copied or printed"),
        Arg("--results", metavar="LOCATION", help="default results root (gs://bucket/prefix or a directory)"),
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
        print(line)
    return EXIT_OK


@command(
    "completion",
    "Print a shell completion script.",
    'eval "$(rlcloud completion bash)"',
    args=[Arg("shell", choices=("bash", "zsh"))],
)
def completion(args: argparse.Namespace) -> int:
    """Print a shell completion script (bash or zsh): eval it in the shell's start-up file."""
    from rlcloud.cli import build_parser

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
