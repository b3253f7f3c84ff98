"""``code:``: the project code a run takes with it (custom environments, agents, wrappers), as data.

    code: .                         # the folder (relative to the spec file), every file but the secret ones
    code:
      path: ../myproject
      include: ["*.py", "configs"]  # a file is packed when it matches one of these (default: every file)
      exclude: ["data", "*.ckpt"]   # and none of these
      requirements: requirements.txt

Patterns are matched against a file's path relative to ``path`` (``/``-separated): a pattern without ``/``
matches any one part of it (a folder's or the file's name: ``data`` leaves out every folder named data,
``*.csv`` every CSV file), one with ``/`` the path or a folder it is in (``data/raw``). The packing and the
secret filter are :mod:`rlcloud.codepack`; this module is the spec, pure data.

``digest`` is not written by the user: the start packs the folder and sets it (``sha256:<hex>``), so the
spec of record pins the archive every role of the run unpacks (a resume with other code is refused).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlcloud.errors import excerpt
from rlcloud.specs._base import StrictModel

__all__ = ["DIGEST_RE", "CodeSpec"]

#: A code archive's name in a spec of record: its SHA-256, as the store names it (codepack.archive_name).
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")

#: Patterns are short globs; past this many a spec is better served by a folder of its own.
MAX_PATTERNS = 200


class CodeSpec(StrictModel):
    """The project folder a run packs and takes into every pod or process (see the module docstring)."""

    path: str = Field(
        ...,
        min_length=1,
        description="The folder to pack, relative to the spec file (or rlcloud.yaml); its files are importable "
        "by every role of the run (environment: {type: 'myenvs:Corridor'} finds <path>/myenvs.py).",
    )
    include: list[str] = Field(
        default_factory=lambda: ["*"],
        max_length=MAX_PATTERNS,
        description="Glob patterns of the files to pack (default: every file); see exclude for how they match.",
    )
    exclude: list[str] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Glob patterns of files or folders left out: without '/' a pattern matches any part of the "
        "path (data, *.csv), with '/' the path or a folder it is in (data/raw). .git, virtual environments, "
        "caches, results folders and files that look like keys or credentials are never packed.",
    )
    requirements: str | None = Field(
        None,
        description="A requirements file inside path (e.g. requirements.txt): packages the run needs beyond the "
        "runner image's, installed into an overlay of the image's environment when a role starts.",
    )
    digest: str | None = Field(
        None,
        description="Set by the start, not by hand: sha256:<hex> of the packed archive, which every role fetches, "
        "verifies and unpacks. A run resumes only with the same digest.",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data  # `code: .`

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip() or "\x00" in pattern or pattern.startswith("/"):
                raise PydanticCustomError(
                    "code_pattern",
                    "{v} is not a pattern: give a glob relative to the code folder, e.g. '*.py' or 'data/raw'",
                    {"v": excerpt(pattern)},
                )
        return value

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in value.split("/") or not value.strip()):
            raise PydanticCustomError(
                "code_requirements",
                "{v} must be a file inside the code folder, relative to it (e.g. requirements.txt)",
                {"v": excerpt(value)},
            )
        return value

    @field_validator("digest")
    @classmethod
    def _digest(cls, value: str | None) -> str | None:
        if value is not None and not DIGEST_RE.match(value):
            raise PydanticCustomError(
                "code_digest",
                "{v} is not a code archive's digest (sha256: and 64 hex digits); leave digest out: the start sets it",
                {"v": excerpt(value)},
            )
        return value
