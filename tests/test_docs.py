"""The README and docs/ stay true: their links resolve and the `rlcloud` commands they show parse.

Commands are checked with the CLI's own parser (nothing runs), so a renamed option or subcommand breaks
this test instead of a reader's first attempt.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from rlcloud.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```(\w*)\s*$")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]{2,}|`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a markdown page (headings inside code blocks excluded)."""
    found: set[str] = set()
    in_code = False
    for line in page.read_text().splitlines():
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(github_anchor(line.lstrip("#")))
    return found


def bash_lines(page: Path) -> list[str]:
    """Lines of ```bash blocks, continuation lines joined."""
    lines: list[str] = []
    lang: str | None = None
    pending = ""
    for line in page.read_text().splitlines():
        fence = _FENCE.match(line)
        if fence:
            lang = None if lang is not None else fence.group(1)
            continue
        if lang == "bash":
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            lines.append(pending + line)
            pending = ""
    return lines


def rlcloud_commands(page: Path) -> list[str]:
    """The `rlcloud ...` command lines a page tells the reader to run."""
    commands = []
    for line in bash_lines(page):
        code = line.split(" #", 1)[0].strip()
        if code.startswith("rlcloud "):
            commands.append(code)
    return commands


def test_anchor_rules() -> None:
    assert github_anchor("5. An identity for the pods: Workload Identity") == (
        "5-an-identity-for-the-pods-workload-identity"
    )
    assert github_anchor("Stockouts: ZONE_RESOURCE_POOL_EXHAUSTED") == "stockouts-zone_resource_pool_exhausted"
    assert github_anchor("Run modes: what runs where") == "run-modes-what-runs-where"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve(page: Path) -> None:
    broken = []
    for target in _LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_pages_show_commands() -> None:
    # the check below must have something to check: these pages walk the reader through the CLI
    for name in ("README.md", "gke-setup.md"):
        page = next(p for p in PAGES if p.name == name)
        assert len(rlcloud_commands(page)) >= 4, name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_rlcloud_commands_parse(page: Path) -> None:
    parser = build_parser()
    for command in rlcloud_commands(page):
        # a shell variable as a user would fill it in: $PROJECT is a project id such as "project"
        argv = shlex.split(re.sub(r"\$\{?([A-Z_]+)\}?", lambda m: m[1].lower().replace("_", "-"), command))[1:]
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{page.name}: `{command}` is not a valid rlcloud command (exit {exc.code})")
        assert callable(getattr(args, "handler", None)), command


def test_readme_keeps_exactly_two_commands_for_a_fresh_machine() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Two commands on a fresh machine", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    assert commands == ["./scripts/demo", "./scripts/check"]
    for script in commands:
        assert (ROOT / script).stat().st_mode & 0o111, f"{script} is not executable"
