"""What the command handlers share at run time: the console, --set parsing, flag blame, data output.

Loaded when a handler runs, never for `rlcloud --help`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


# C0 controls but tab and newline, DEL, and the C1 controls: what a terminal acts on (ESC starts a sequence that
# can retitle the window, move the cursor, rewrite what was printed; BEL rings; CR overwrites the line). Shown
# as visible escapes; CR is dropped (a CRLF line end, a progress bar's redraw in a log).
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)] if c not in (0x09, 0x0A)}
_CONTROLS[0x0D] = ""


def shown(value: object) -> str:
    r"""``value`` as text that is safe to write to a terminal: C0 and C1 control characters (ESC, BEL, CR, ...)
    made visible (``\x1b``), tab and newline kept. The one function the CLI shows data through: names, log
    lines from servers, progress and status fields, messages (the console of :func:`console` applies it to
    everything it renders; plain prints of data call it)."""
    return str(value).translate(_CONTROLS)


def command_line(argv: Sequence[str]) -> str:
    """``rlcloud`` and ``argv`` as a shell would take them back (quoted where needed, control characters
    shown): the command to run again."""
    import shlex

    return shown(shlex.join(["rlcloud", *argv]))


def console(stderr: bool = False) -> Any:
    """A rich console for the CLI's own words; data goes through :func:`text` or ``markup=False``, and every
    text it renders through :func:`shown` (its own styling and cursor moves are kept).

    Piped or redirected (not a terminal) and with no ``COLUMNS`` set, it is as wide as its widest line:
    rich would otherwise cut tables to 80 columns, and ``rlcloud experiment list | grep NAME`` would miss a
    name that was wrapped or elided.
    """
    import os

    from rich.console import Console
    from rich.segment import Segment

    class _Console(Console):
        def _render_buffer(self, buffer: Any) -> str:
            # The last step before the terminal: segment texts are the data and our words; control segments
            # and styles (rich's own escape sequences) are added after this.
            return str(super()._render_buffer(s if s.control else Segment(shown(s.text), s.style) for s in buffer))

    out = _Console(stderr=stderr, highlight=False)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = _UNBOUNDED
    return out


_UNBOUNDED = 10_000  # columns: wider than any table the CLI prints


def text(value: object) -> str:
    """``value`` as rich markup that shows it verbatim: ``rlcloud[runner]`` and ``image:[tag]`` survive."""
    from rich.markup import escape

    return escape(shown(value))


#: What the bounded reader says when a value passes its bounds (not a mere YAML syntax error).
_OVER_BOUNDS = ("nested more than", "larger than", "number literal", "alias", "more than")


def parse_flag_value(raw: str, flag: str) -> Any:
    """A flag's value (``--set KEY=VALUE``, each of ``--grid FIELD=V1,V2``) read as YAML by the bounded reader
    of spec files (so "1e-3" is a float here as it is in a file). Text that is not YAML is taken as the text it
    is (``--set name=a:b``); a value past the reader's bounds (3,000 nested brackets, a 5,000-digit number, an
    alias cycle, 256 KiB) or a list or mapping that does not parse (``[``) is a SpecError naming the flag."""
    from rlcloud.errors import SpecError, SpecProblem
    from rlcloud.specs.loading import parse_data_text

    if not raw.strip():
        return None
    try:
        return parse_data_text(raw, source="", field=flag)
    except SpecError as exc:
        message = exc.problems[0].message if exc.problems else str(exc)
        # Past the bounds, or meant as a list or mapping ("[1, 2", "{a: 1"): an error, not a string.
        if any(bound in message for bound in _OVER_BOUNDS) or raw.lstrip()[:1] in ("[", "{"):
            raise SpecError([SpecProblem(flag, message, raw)]) from None
        return raw


def whole_flag(text: str | None, flag: str, low: int, high: int, what: str) -> int | None:
    """A flag's whole number from ``low`` to ``high`` (``what`` it counts, for the message); None when the
    flag was not given. ``1e23``, ``-1`` or 30 digits are a SpecError naming the flag (exit 2)."""
    from rlcloud.errors import SpecError, SpecProblem

    if text is None:
        return None
    try:
        value = int(text.strip()) if len(text) <= 20 else None
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise SpecError([SpecProblem(flag, f"{what}: a whole number from {low} to {high:,}", text)])
    return value


def parse_sets(items: Sequence[str] | None) -> dict[str, Any]:
    """--set KEY=VALUE pairs; VALUE is read as YAML (numbers, booleans, lists) so types come out right."""
    from rlcloud.errors import SpecError, SpecProblem

    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise SpecError([SpecProblem("--set", "expected KEY=VALUE, e.g. --set num_workers=8", item)])
        out[key.strip()] = parse_flag_value(raw, f"--set {key.strip()}")
    return out


@contextmanager
def blame_flags(flags: Mapping[str, str]) -> Iterator[None]:
    """Report a spec problem caused by a flag under the flag's name, not the spec file's.

    ``flags`` maps a spec field (dotted, as --set takes it) to the flag that set it: ``{"num_worker":
    "--set num_worker", "num_nodes": "--num-nodes"}``. `--set num_worker=8` then fails with
    "--set num_worker: unknown field ..." instead of "exp.yaml: num_worker: unknown field ...".
    """
    from rlcloud.errors import SpecError, SpecProblem

    try:
        yield
    except SpecError as exc:
        problems, blamed = [], False
        for problem in exc.problems:
            flag = _flag_of(problem.field, flags)
            if flag is None:
                problems.append(problem)
                continue
            blamed = True
            rest = problem.field[len(flag[0]) :]  # a deeper field under the one the flag set: ".type"
            problems.append(SpecProblem(flag[1] + rest, problem.message, problem.value))
        if not blamed:
            raise
        from_file = [p for p in problems if p.source]
        raise SpecError(problems, source=exc.source if from_file else None) from None


def _flag_of(field: str, flags: Mapping[str, str]) -> tuple[str, str] | None:
    for key, flag in flags.items():
        if field == key or field.startswith(key + "."):
            return key, flag
    return None


def set_flags(sets: Mapping[str, object]) -> dict[str, str]:
    """The flag each --set key came from, for :func:`blame_flags`."""
    return {key: f"--set {key}" for key in sets}


#: Library messages speak Python (keyword arguments); on the terminal they should speak the CLI's flags.
#: (library phrase, CLI phrase): the library's wording is kept for API users and translated here.
_CLI_WORDING = (
    ("pass kubeconfig=PATH", "pass --kubeconfig PATH"),
    ("project=..., set it in the cluster spec", "--project PROJECT, set it in the cluster spec"),
    ("pass credentials=", "run `rlcloud init --credentials KEY.json`"),
    ("(or create(fallback_zones=[...]))", "(or --set 'fallback_zones=[ZONE, ...]')"),
    ("stop() the experiment first", "stop the experiment first (rlcloud experiment stop NAME)"),
    ("resume() starts from", "resume starts from"),
)


def cli_wording(message: str) -> str:
    """``message`` with the library's Python wording (``pass kubeconfig=PATH``) in CLI terms (``--kubeconfig
    PATH``)."""
    for library, cli in _CLI_WORDING:
        message = message.replace(library, cli)
    return message


def output_format(args: argparse.Namespace, default: str = "table") -> str:
    """The -o/--output given (before or after the command words), else ``default``."""
    return getattr(args, "output", None) or default


def print_data(data: object, fmt: str) -> None:
    """JSON, YAML or CSV of plain data on stdout (for -o json|yaml|csv). CSV holds rows of a table only (a
    list of flat mappings); nested data (a status, with its roles or trials) raises SpecError naming -o: it
    was silently printed as JSON."""
    if fmt == "csv":
        from rlcloud.errors import SpecError, SpecProblem

        flat = isinstance(data, list) and all(
            isinstance(row, dict) and not any(isinstance(v, dict | list) for v in row.values()) for row in data
        )
        if not flat:
            raise SpecError(
                [
                    SpecProblem(
                        "-o",
                        "CSV holds rows of a table; this command's output is nested: use -o json or -o yaml",
                        "csv",
                    )
                ]
            )
        import csv

        rows: list[dict[str, Any]] = data  # type: ignore[assignment]
        fields = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(sys.stdout, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return
    if fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
        return
    import json

    print(json.dumps(data, indent=2, default=str))


# ---------------------------------------------------------------- flag values, checked as argparse reads them
# Each takes the text given and returns the value, or raises SpecError saying what would be valid; the
# argparse types of _parser.py (`checked("seconds")`) call them, so a bad value is refused before any handler
# runs, in one line naming the flag (exit 2), whatever the command.

#: Longest wait a --timeout takes: a week (a float past it, `1e400`, `inf` or `nan` is a typo, not a wait).
MAX_TIMEOUT_S = 7 * 24 * 3600.0
#: The domain of a domain-scoped project id (``example.com:my-project``).
_DOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _refuse(message: str, text: str) -> Any:
    from rlcloud.errors import SpecError, SpecProblem

    # the field is filled in by argparse ("argument --timeout: ..."): the problem carries the message only
    raise SpecError([SpecProblem("", message, text)])


def seconds_value(text: str) -> float:
    """A duration in seconds: a finite number above 0, at most a week (``-1``, ``nan``, ``1e400`` refused)."""
    import math

    try:
        value = float(text) if len(text) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        _refuse(f"a number of seconds above 0, at most {MAX_TIMEOUT_S:,.0f} (a week)", text)
    return value


def count_value(text: str) -> int:
    """A count of things (nodes, GPUs, seeds, trials): a whole number from 0 to 1,000,000."""
    value = int(text) if text.strip().isdigit() and len(text) <= 7 else -1
    if not 0 <= value <= 1_000_000:
        _refuse("a whole number from 0 to 1,000,000", text)
    return value


def run_name_value(text: str) -> str:
    """An experiment's or a sweep's name: a DNS-1123 label of at most 40 characters, as specs name them (a
    300-character name was sent on to Kubernetes and Cloud Storage)."""
    from rlcloud.specs._base import check_dns_label

    try:
        return check_dns_label(text)
    except ValueError as exc:
        return _refuse(str(exc), text)  # type: ignore[no-any-return]


def namespace_value(text: str) -> str:
    """A Kubernetes namespace: a DNS-1123 label of at most 63 characters."""
    if len(text) > 63 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", text):
        _refuse("a Kubernetes namespace: at most 63 lowercase letters, digits and '-'", text)
    return text


def project_value(text: str) -> str:
    """A Google Cloud project id: 6-30 lowercase letters, digits or '-', starting with a letter (a
    domain-scoped ``example.com:my-project`` too)."""
    from rlcloud.specs.cluster import PROJECT_RE

    domain, _, project = text.rpartition(":")
    if len(text) > 200 or not PROJECT_RE.match(project) or (domain and not _DOMAIN_RE.match(domain)):
        _refuse("a Google Cloud project id: 6-30 lowercase letters, digits or '-', starting with a letter", text)
    return text


def location_value(text: str) -> str:
    """A Compute Engine zone (``us-central1-a``) or region (``us-central1``)."""
    from rlcloud.specs.cluster import REGION_RE, ZONE_RE

    if len(text) > 64 or not (ZONE_RE.match(text) or REGION_RE.match(text)):
        _refuse("a zone (us-central1-a) or a region (us-central1)", text)
    return text


def results_value(text: str) -> str:
    """A results root: ``gs://bucket/prefix``, ``file:///dir`` or a directory (rlcloud.results' checks)."""
    from rlcloud.errors import SpecError
    from rlcloud.results import check_results_root

    try:
        check_results_root(text)
    except SpecError as exc:
        _refuse(exc.problems[0].message if exc.problems else str(exc), text)
    return text  # as given: the library normalises it where it resolves the root


def directory_value(text: str) -> str:
    """A directory to write into (``--dest``): one that exists or can be made, not in /proc, /sys or /dev and
    not under a file (the same checks as a results root)."""
    if "://" in text:
        _refuse("a local directory", text)
    return results_value(text)


def file_value(text: str) -> str:
    """A file to read (``--kubeconfig``): one that exists and is not a directory."""
    import os

    if not text or "\0" in text or len(text) > 4096:
        _refuse("the path of an existing file", text)
    try:
        if not os.path.isfile(os.path.expanduser(text)):
            _refuse("no such file" if not os.path.exists(os.path.expanduser(text)) else "not a file", text)
    except OSError as exc:
        _refuse(f"cannot read it ({exc.strerror or type(exc).__name__})", text)
    return text


def cluster_value(text: str) -> str:
    """``-c/--cluster``: a cluster spec file (an existing file, or a name ending in .yaml, .yml or .json), else
    a GKE cluster's name (a DNS-1123 label of at most 40 characters)."""
    import os

    if text.endswith((".yaml", ".yml", ".json")) or os.sep in text or os.path.isfile(text):
        return file_value(text)
    return run_name_value(text)


def label_value(text: str) -> str:
    """A name in a kubeconfig or a machine type: 1-253 printable characters without spaces."""
    if not text or len(text) > 253 or not text.isprintable() or any(c.isspace() for c in text):
        _refuse("1-253 printable characters without spaces", text)
    return text
