"""Shell completion: the scripts `rlcloud completion bash|zsh|fish` prints, and the hidden
``rlcloud __complete SHELL WORD...`` they call on every TAB.

The scripts are thin: they pass the words typed so far (the last one is the word being completed, maybe
empty) and show what comes back, one candidate a line. The candidates come from the same argparse tree
the commands run with, so completion keeps working after positionals and flag values, and knows each
flag's choices. Names come from what is on this machine, never the network: experiment and sweep names
from the results root (``--results`` on the line, else rlcloud.yaml's, else ./rlcloud-results), cluster
names from the list the last `rlcloud cluster list` saw (:func:`remember_clusters`), kubeconfig contexts
from the kubeconfig file, spec files from the file system. A directory is offered with a trailing ``/``
(the shell then adds no space).

Loaded only for ``__complete`` and ``completion``, never for `rlcloud --help`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["SHELLS", "candidates", "complete_main", "completion_script", "remember_clusters"]

SHELLS = ("bash", "zsh", "fish")
#: What a spec file is named like (experiment, sweep, cluster, agent... specs).
SPEC_SUFFIXES = (".yaml", ".yml", ".json")
#: Commands whose NAME is an experiment (the shortcuts and tensorboard included).
_EXPERIMENT_COMMANDS = ("experiment", "run", "status", "logs", "attach", "tensorboard")


def complete_main(argv: Sequence[str]) -> int:
    """``rlcloud __complete SHELL WORD...``: print the candidates for the last WORD, one a line.

    Never fails loudly: a completion that goes wrong offers nothing rather than a traceback at the prompt.
    """
    if not argv:
        return 2
    words = list(argv[1:]) or [""]
    try:
        from rlcloud.cli import build_parser

        found = candidates(build_parser(), words)
    except Exception:  # a broken results root or config must not print into the user's prompt
        found = []
    sys.stdout.write("".join(f"{word}\n" for word in found))
    return 0


def candidates(parser: argparse.ArgumentParser, words: Sequence[str]) -> list[str]:
    """What may come at the last of ``words`` (the words after ``rlcloud``, the last one being typed).

    Walks the parser like argparse would: subcommand words move into their parser, an option that takes a
    value consumes the next word, anything else is the next positional.
    """
    *before, current = list(words) or [""]
    node, path, positionals, pending = parser, [], 0, None
    for word in before:
        if pending is not None:
            pending = None  # this word was the option's value
            continue
        if word.startswith("-") and word != "-":
            if word.startswith("--") and "=" in word:
                continue
            action = _option(node, parser, word)
            if action is not None and _takes_value(action):
                pending = action
            continue
        sub = _subcommands(node)
        if sub is not None and word in sub.choices:
            node, positionals = sub.choices[word], 0
            path.append(word)
        else:
            positionals += 1
    if pending is not None:
        return _values(pending, current, path, before)
    if current.startswith("-"):
        if current.startswith("--") and "=" in current:
            flag, _, value = current.partition("=")
            action = _option(node, parser, flag)
            if action is None or not _takes_value(action):
                return []
            return [f"{flag}={v}" for v in _values(action, value, path, before)]
        return sorted({o for o in _options(node) if o.startswith(current)})
    sub = _subcommands(node)
    if sub is not None:
        return [name for name in sub.choices if name.startswith(current) and not name.startswith("_")]
    slots = [a for a in node._actions if not a.option_strings]
    if not slots:
        return []
    # the last positional may take many values (spec validate PATH...)
    slot = slots[min(positionals, len(slots) - 1)]
    if positionals >= len(slots) and slot.nargs not in ("+", "*", argparse.REMAINDER):
        return []
    return _values(slot, current, path, before)


# ------------------------------------------------------------------------------------- the parser tree


def _subcommands(parser: argparse.ArgumentParser) -> Any:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _options(node: argparse.ArgumentParser) -> Iterable[str]:
    # every subcommand's parser repeats the global options, so its own actions are all there is
    for action in node._actions:
        if action.help != argparse.SUPPRESS:
            yield from action.option_strings


def _option(node: argparse.ArgumentParser, root: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    for parser in (node, root):
        for action in parser._actions:
            if flag in action.option_strings:
                return action
    if len(flag) > 2 and flag[0] == "-" and flag[1] != "-":  # -vv, -ojson: a short flag and its value
        short = _option(node, root, flag[:2])
        return None if short is None or _takes_value(short) else short
    return None


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


# ------------------------------------------------------------------------------------------- values


def _values(action: argparse.Action, current: str, path: Sequence[str], words: Sequence[str]) -> list[str]:
    """Candidates for ``action``'s value: its choices, or names and files by what the value is."""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return [str(c) for c in action.choices if str(c).startswith(current)]
    if action.type in (int, float):
        return []
    dest, metavar = action.dest, str(action.metavar or "")
    command = path[0] if path else ""
    if dest == "names" and command == "tensorboard":  # experiments and sweeps
        results = _results(words)
        return _prefixed(sorted({*experiment_names(results), *sweep_names(results)}), current)
    if dest == "name" and command in _EXPERIMENT_COMMANDS and path[-1:] != ["new"]:
        return _prefixed(experiment_names(_results(words)), current)
    if dest == "name" and command == "sweep":
        return _prefixed(sweep_names(_results(words)), current)
    if dest == "cluster":
        found = _prefixed(cached_clusters(), current)
        if "FILE" in metavar:
            found += _files(current, SPEC_SUFFIXES)
        return found
    if dest == "context":
        return _prefixed(kube_contexts(_flag_value(words, "--kubeconfig")), current)
    if dest == "template":
        return _prefixed(_bundled_experiments(), current)
    if dest == "role":
        from rlcloud.roles import Role

        return _prefixed([r.value for r in Role], current)
    if dest == "gpu_type":
        from rlcloud.specs.cluster import GPU_TYPE_ALIASES, GpuType

        return _prefixed([*GPU_TYPE_ALIASES, *(t.value for t in GpuType)], current)
    if dest in ("dest", "dir", "results") or metavar in ("DIR", "LOCATION"):
        return _files(current, dirs_only=True)
    if metavar.endswith((".json", ".png")):  # KEY.json, FILE.png
        return _files(current, ("." + metavar.rsplit(".", 1)[1],))
    if dest == "kubeconfig":
        return _files(current)
    if "FILE" in metavar or "PATH" in metavar or dest in ("file", "paths", "path"):
        return _files(current, SPEC_SUFFIXES)
    return []


def _prefixed(names: Iterable[str], current: str) -> list[str]:
    return sorted(n for n in set(names) if n.startswith(current))


def _files(current: str, suffixes: Sequence[str] | None = None, *, dirs_only: bool = False) -> list[str]:
    """Paths that complete ``current``: directories (with a trailing /) and, unless ``dirs_only``, files
    (with one of ``suffixes`` when given). Hidden entries only when ``current`` asks for them."""
    head, _, tail = current.rpartition("/")
    directory = Path(os.path.expanduser(head + "/" if head or current.startswith("/") else "."))
    prefix = current[: len(current) - len(tail)]
    out: list[str] = []
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        if not name.startswith(tail) or (name.startswith(".") and not tail.startswith(".")):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if is_dir:
            out.append(f"{prefix}{name}/")
        elif not dirs_only and (suffixes is None or name.endswith(tuple(suffixes))):
            out.append(prefix + name)
    return out


def _flag_value(words: Sequence[str], flag: str) -> str | None:
    """The value given to ``flag`` on the line (``--flag VALUE`` or ``--flag=VALUE``), or None."""
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(flag + "="):
            return word.partition("=")[2]
    return None


def kube_contexts(kubeconfig: str | None = None) -> list[str]:
    """Context names of the kubeconfig (the one given, else $KUBECONFIG's files, else ~/.kube/config): read
    from the file, no cluster is asked."""
    from rlcloud.errors import RLCloudError
    from rlcloud.stored import read_record_file

    paths = [kubeconfig] if kubeconfig else (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
    names: list[str] = []
    for path in paths:
        try:
            # Bounded (an alias bomb must not hang a TAB): rlcloud.stored, links followed (the user's own file).
            config = read_record_file(Path(path).expanduser(), form="yaml", follow_links=True)
            names += [c["name"] for c in config.get("contexts") or () if isinstance(c.get("name"), str)]
        except (OSError, RLCloudError, AttributeError, TypeError, KeyError):
            continue  # a missing or odd kubeconfig offers no contexts
    return names


def _results(words: Sequence[str]) -> str:
    """The results root the line names (--results), else the project's, else the default."""
    given = _flag_value(words, "--results")
    if given:
        return given
    # rlcloud.config (pydantic: a third of a second) only where there is a project config to read; the
    # look-up is config.find_project_config's, without its import
    here = Path.cwd()
    if any((d / "rlcloud.yaml").is_file() for d in (here, *here.parents)):
        from rlcloud.results import results_root

        return results_root(None, None)
    from rlcloud.results import DEFAULT_RESULTS

    return DEFAULT_RESULTS


def experiment_names(results: str) -> list[str]:
    """Experiments under the results root, read from this machine's disk (as `experiment list` does)."""
    from rlcloud.local.state import STATE_DIR

    return _runs(results, STATE_DIR)


def sweep_names(results: str) -> list[str]:
    """Sweeps under the results root, read from this machine's disk (as `sweep list` does)."""
    from rlcloud.local.state import SWEEP_STATE_DIR

    return _runs(results, SWEEP_STATE_DIR)


def _runs(results: str, state_dir: str) -> list[str]:
    from rlcloud.results import local_workdir

    base = local_workdir(results, "x").parent
    if not base.is_dir():
        return []
    return sorted(p.parent.parent.name for p in base.glob(f"*/{state_dir}/state.json"))


def _bundled_experiments() -> list[str]:
    from importlib.resources import files

    folder = files("rlcloud") / "configs" / "experiments"
    return [p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith(SPEC_SUFFIXES)]


# -------------------------------------------------------------------------- cluster names, cached


def _cluster_cache() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rlcloud" / "clusters.json"


def remember_clusters(names: Iterable[str]) -> None:
    """Keep the cluster names `rlcloud cluster list` saw, for completion (which never asks GKE itself)."""
    path = _cluster_cache()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"names": sorted(set(names))}) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only home: completion just offers no cluster names
        pass


def cached_clusters() -> list[str]:
    """The cluster names :func:`remember_clusters` kept (empty before the first `cluster list`)."""
    from rlcloud.errors import RLCloudError
    from rlcloud.stored import read_record_file

    try:
        names = read_record_file(_cluster_cache(), follow_links=True).get("names", [])
    except (OSError, RLCloudError, AttributeError):
        return []
    return [n for n in names if isinstance(n, str)]


# ------------------------------------------------------------------------------------------ scripts

_BASH = """\
# rlcloud bash completion: eval "$(rlcloud completion bash)" in ~/.bashrc
_rlcloud_complete() {
  local IFS=$'\\n' cur words cword
  # a word with ':' or '=' (gs://..., --set k=v) is one word to rlcloud: rebuild it from the line
  if declare -F _get_comp_words_by_ref >/dev/null; then
    _get_comp_words_by_ref -n =: cur words cword
  else
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  fi
  COMPREPLY=($(command rlcloud __complete bash "${words[@]:1:cword}" 2>/dev/null))
  if declare -F __ltrim_colon_completions >/dev/null; then __ltrim_colon_completions "${words[cword]}"; fi
  # a directory gets no space after it, so the path can go on
  [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == */ ]] && compopt -o nospace
}
complete -o filenames -F _rlcloud_complete rlcloud
"""

_ZSH = """\
# rlcloud zsh completion: eval "$(rlcloud completion zsh)" in ~/.zshrc (after compinit)
_rlcloud() {
  local -a found dirs
  found=("${(@f)$(command rlcloud __complete zsh "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  found=(${found:#})
  dirs=(${(M)found:#*/})
  found=(${found:#*/})
  (( ${#found} )) && compadd -f -- "${found[@]}"
  (( ${#dirs} )) && compadd -f -S '' -- "${dirs[@]}"
  return 0
}
if (( ${+functions[compdef]} )); then
  compdef _rlcloud rlcloud
else
  print -u2 "rlcloud completion: run 'autoload -U compinit && compinit' first"
fi
"""

_FISH = """\
# rlcloud fish completion: rlcloud completion fish > ~/.config/fish/completions/rlcloud.fish
function __rlcloud_complete
    set -l tokens (commandline -opc)
    set -l current (commandline -ct)
    # "$current" is one argument even when empty: the word being typed may be nothing yet
    command rlcloud __complete fish $tokens[2..-1] "$current" 2>/dev/null
end
complete -c rlcloud -f -a '(__rlcloud_complete)'
"""


def completion_script(shell: str) -> str:
    """The completion script for ``shell`` (bash, zsh or fish): it calls ``rlcloud __complete``."""
    return {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}[shell]
