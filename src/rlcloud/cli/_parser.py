"""The machinery of the command table: a command declares its path, handler, help, example and arguments
in one place (:func:`command`), shortcuts reuse a command's declaration (:meth:`Command.alias`), and
:func:`build` turns the table into an argparse tree.

Only what ``rlcloud --help`` needs lives here: argparse and plain classes (no dataclasses, no typing, no
pydantic), so start-up stays near a bare Python's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence

TYPE_CHECKING = False  # not typing's: importing typing costs a sixth of `rlcloud --help`
if TYPE_CHECKING:
    from typing import Any

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

Handler = Callable[[argparse.Namespace], int]


class Arg:
    """One ``add_argument`` call, declared once and added to every command that takes it."""

    __slots__ = ("flags", "options")

    def __init__(self, *flags: str, **options: Any) -> None:
        self.flags = flags
        self.options = options

    def add_to(self, parser: Any, **changes: Any) -> None:
        parser.add_argument(*self.flags, **{**self.options, **changes})


class OneOf:
    """Arguments of which at most one may be given (exactly one when ``required``)."""

    __slots__ = ("args", "required")

    def __init__(self, *args: Arg, required: bool = False) -> None:
        self.args = args
        self.required = required

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_mutually_exclusive_group(required=self.required)
        for arg in self.args:
            arg.add_to(group)


class Command:
    """A command: its words (``("experiment", "run")``), handler, one-line help, example and arguments.

    A group (``rlcloud experiment``) is a Command without a handler: it prints its own help."""

    __slots__ = ("args", "example", "handler", "help", "path")

    def __init__(
        self,
        path: str,
        handler: Handler | None,
        help: str,
        example: str,
        args: Iterable[Arg | OneOf] = (),
    ) -> None:
        self.path = tuple(path.split())
        self.handler = handler
        self.help = help
        self.example = example
        self.args = tuple(args)

    def __call__(self, args: argparse.Namespace) -> int:
        assert self.handler is not None
        return self.handler(args)

    def __repr__(self) -> str:
        return f"Command({' '.join(self.path)!r})"

    @property
    def description(self) -> str:
        """The text at the top of the command's --help: its handler's docstring, else its help."""
        doc = getattr(self.handler, "__doc__", None)
        if not doc:
            return self.help
        # the docstring's continuation lines lose the source's indentation (as inspect.cleandoc, which costs an
        # import of inspect): the help is shown raw, and would print them indented
        first, *rest = doc.strip().splitlines()
        indent = min((len(line) - len(line.lstrip()) for line in rest if line.strip()), default=0)
        return "\n".join([first, *(line[indent:] for line in rest)])

    def alias(self, path: str) -> Command:
        """The same command under other words (``rlcloud run`` for ``rlcloud experiment run``): same handler,
        same arguments, so the flags of a shortcut cannot drift from the command's."""
        full, short = "rlcloud " + " ".join(self.path), "rlcloud " + path
        return Command(path, self.handler, f"Same as `{full[8:]}`.", self.example.replace(full, short), self.args)


def echo(text: object = "", *, file: Any = None, end: str = "\n", flush: bool = False) -> None:
    """``print`` for the CLI's lines, which carry data (names, paths, notes, messages of the library): through
    ``rlcloud.cli._common.shown``, so an ESC or BEL in a run's name or a note never reaches the terminal raw.
    The one way a handler prints text (tests/test_cli_bad_flags.py checks that no bare ``print`` of data is
    left); ``experiment logs --raw`` alone prints lines as written."""
    from rlcloud.cli._common import shown

    print(shown(text), file=file, end=end, flush=flush)


def command(path: str, help: str, example: str, args: Iterable[Arg | OneOf] = ()) -> Callable[[Handler], Command]:
    """Declare the function below as the handler of ``rlcloud PATH``; the name then holds the Command."""

    def declare(handler: Handler) -> Command:
        return Command(path, handler, help, example, args)

    return declare


def group(path: str, help: str, example: str) -> Command:
    """A command that only holds others (``rlcloud spec``); run alone it prints its help."""
    return Command(path, None, help, example)


# ------------------------------------------------------------------ arguments more than one command takes

#: --set KEY=VALUE: declared once for every command that takes it (spec show, experiment run/start, cluster create)
SET = Arg(
    "--set",
    action="append",
    metavar="KEY=VALUE",
    help="override a setting of the file (repeatable; VALUE is YAML; KEY may be dotted: agent.batch_size=32)",
)

#: Accepted before or after the command words (`rlcloud -o json experiment list`, `rlcloud experiment list
#: -o json`), as kubectl and gcloud do. A command that prints data reads -o; one that shows a bar reads -q.
GLOBAL_ARGS = (
    Arg("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)"),
    Arg("-q", "--quiet", action="store_true", default=False, help="no progress bars"),
    Arg(
        "-o",
        "--output",
        choices=("table", "json", "yaml", "csv"),
        default=None,
        help="output format of commands that print data (default: table; yaml for `spec show`)",
    ),
)
_GLOBAL_VALUE_FLAGS = ("-o", "--output")  # global options followed by a value, not by a command word


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing shutil (and with it bz2, lzma and zlib: a
    tenth of `rlcloud --help`): $COLUMNS, else the terminal on stdout, else 80."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Examples kept verbatim; the width measured as argparse does, without its shutil import."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _terminal_columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """argparse with examples kept verbatim in the help, and a usage error in one line naming the flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # argparse's NoReturn
        """One line, exit 2: ``rlcloud doctor: error: argument --timeout: ... (see rlcloud doctor --help)``.
        argparse's own prints the whole usage first, which buries the line that says what is wrong."""
        from rlcloud.cli._common import shown

        if len(message) > 400:  # argparse quotes what was typed: a 5,000-character word is not repeated whole
            message = message[:397] + "..."
        self.exit(EXIT_USAGE, f"{self.prog}: error: {shown(message)} (see {self.prog} --help)\n")


class checked:  # noqa: N801  (argparse shows a type's __name__; this is one)
    """An argparse ``type`` that checks a flag's value with ``rlcloud.cli._common.<name>_value``: a bad value
    is a usage error naming the flag before any handler runs (``argument --timeout: a number of seconds ...
    (got '-1')``). The checks are imported when a command's arguments are parsed, never for --help."""

    __slots__ = ("__name__", "check")

    def __init__(self, name: str) -> None:
        self.__name__ = name
        self.check = name + "_value"

    def __call__(self, text: str) -> Any:
        from rlcloud.cli import _common
        from rlcloud.errors import SpecError, excerpt

        try:
            return getattr(_common, self.check)(text)
        except SpecError as exc:
            message = exc.problems[0].message if exc.problems else str(exc)
            raise argparse.ArgumentTypeError(f"{message} (got {excerpt(text, 60)})") from None


def command_words(argv: Sequence[str]) -> list[str]:
    """The words of ``argv`` that are neither options nor a global option's value (the command path first)."""
    words: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in _GLOBAL_VALUE_FLAGS:
            skip = True
        elif word == "--":
            break
        elif not word.startswith("-"):
            words.append(word)
    return words


def _print_help(parser: argparse.ArgumentParser) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        parser.print_help()
        return EXIT_USAGE

    return handler


def build(table: Sequence[Command], root: Command, argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argparse tree of ``table`` (every command listed, parents before children).

    With ``argv``, only the commands on its path get their arguments and subcommands: the others are listed
    in the help but never needed in this run, so `rlcloud --help` stays cheap. Without it, the whole tree
    (for completion scripts and tests).
    """
    from rlcloud import __version__

    parser = _Parser(prog="rlcloud", description=root.help, epilog=root.example)
    parser.add_argument("--version", action="version", version=f"rlcloud {__version__}")
    for flag in GLOBAL_ARGS:
        flag.add_to(parser)
    words = None if argv is None else command_words(argv)
    parsers: dict[tuple[str, ...], argparse.ArgumentParser] = {(): parser}
    subparsers: dict[tuple[str, ...], Any] = {}
    for cmd in table:
        parent = cmd.path[:-1]
        if parent not in parsers:  # a parent that is not on argv's path: listed, not built
            continue
        if parent not in subparsers:
            title = f"{' '.join(parent)} commands".strip()
            subparsers[parent] = parsers[parent].add_subparsers(title=title, metavar="COMMAND")
        sub = subparsers[parent].add_parser(
            cmd.path[-1], help=cmd.help, description=cmd.description, epilog=f"example:\n  {cmd.example}"
        )
        if words is not None and list(cmd.path) != words[: len(cmd.path)]:
            continue  # listed in its parent's help; its own arguments are not needed in this run
        parsers[cmd.path] = sub
        sub.set_defaults(handler=cmd if cmd.handler is not None else _print_help(sub))
        for arg in cmd.args:
            arg.add_to(sub)
        global_options = sub.add_argument_group("global options")
        for flag in GLOBAL_ARGS:
            # SUPPRESS: a global flag not repeated after the command keeps the value given before it
            flag.add_to(global_options, default=argparse.SUPPRESS)
    return parser
