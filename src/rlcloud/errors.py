"""The rlcloud error tree.

Every error rlcloud raises on purpose derives from :class:`RLCloudError`, so a caller can catch one
class. Google API and Kubernetes ``ApiException`` errors are translated into this tree in one place
per backend (``raise ... from exc``), so the original stays reachable as ``__cause__``::

    RLCloudError
    ├── SpecError                  bad user input: every problem found, each with field, value, hint
    │   └── PreflightError         the project cannot run what was asked (rlcloud doctor's failed checks)
    ├── AuthError                  missing/invalid credentials, permission denied, API not enabled
    ├── ProvisioningError          a cluster or node pool could not be made
    │   ├── QuotaExceededError     a quota (e.g. GPUS_ALL_REGIONS) is too low
    │   └── CapacityError          the zone has no capacity (ZONE_RESOURCE_POOL_EXHAUSTED)
    ├── NotFoundError              a cluster, experiment, bucket or object does not exist
    ├── ConflictError              it exists already and differs from what was asked
    ├── StorageError               the results store failed (I/O, checksum, precondition)
    │   └── RecordError            a stored record is not one rlcloud reads: names the file
    ├── WorkloadError              the experiment's processes or pods failed
    ├── BackendError               an API call failed for another reason (after retries)
    ├── UnsupportedError           the backend lacks the capability asked for (e.g. sweeps)
    ├── MissingExtraError          an optional part is not installed (also an ImportError): names the extra
    └── WaitTimeoutError           a wait ran past its timeout (also a builtin TimeoutError)

:func:`require` and :func:`require_installed` are the one way a module asks for an optional dependency.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable

TYPE_CHECKING = False  # not typing's: `rlcloud --help` imports this module and must stay light
if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "AuthError",
    "BackendError",
    "CapacityError",
    "ConflictError",
    "MissingExtraError",
    "NotFoundError",
    "PreflightError",
    "ProvisioningError",
    "QuotaExceededError",
    "RLCloudError",
    "RecordError",
    "SpecError",
    "SpecProblem",
    "StorageError",
    "UnsupportedError",
    "WaitTimeoutError",
    "WorkloadError",
    "excerpt",
    "require",
    "require_installed",
]


class RLCloudError(Exception):
    """Root of every error rlcloud raises on purpose."""


#: Longest message a SpecProblem prints (the longest legitimate one, a list of valid fields, is ~400).
_MAX_MESSAGE = 1000


class SpecProblem:
    """One problem in a spec: where (dotted field path), what was given, and what would be valid."""

    # a plain class, not a dataclass: `rlcloud --help` must not pay for importing dataclasses/inspect
    __slots__ = ("field", "message", "source", "value")

    def __init__(self, field: str, message: str, value: object = None, source: str | None = None) -> None:
        self.field = field
        self.message = message
        self.value = value
        self.source = source

    def __repr__(self) -> str:
        return f"SpecProblem(field={self.field!r}, message={self.message!r}, value={self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpecProblem) and (self.field, self.message, self.value, self.source) == (
            other.field,
            other.message,
            other.value,
            other.source,
        )

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        where = f"{excerpt(self.source, 300, quote=False)}: " if self.source else ""
        shown = "" if self.value is None else f" (got {_short(self.value)})"
        field = f"{excerpt(self.field, 200, quote=False)}: " if self.field else ""
        # a message built from a value that slipped past excerpt() still cannot flood the terminal
        message = self.message if len(self.message) <= _MAX_MESSAGE else self.message[: _MAX_MESSAGE - 3] + "..."
        return f"{where}{field}{message}{shown}"


def _short(value: object, limit: int = 80) -> str:
    return excerpt(value, limit)


def excerpt(value: object, limit: int = 60, *, quote: bool = True) -> str:
    """A short, single-line rendering of ``value`` for an error message: its repr (or, with ``quote``
    false and a string, the string itself with line breaks escaped), cut to ``limit`` characters.

    Error messages quote what a user wrote, and what a user wrote may be the content of a file a spec
    named by mistake (a 5 MB log, a key file): never more than this excerpt of it.
    """
    plain = isinstance(value, str) and not quote
    text = str(value).replace("\r", "\\r").replace("\n", "\\n") if plain else repr(value)
    return text if len(text) <= limit else text[: max(limit - 3, 1)] + "..."


class SpecError(RLCloudError, ValueError):
    """A spec (cluster, experiment) or a CLI argument is invalid.

    ``problems`` lists every problem found, not only the first.
    """

    def __init__(self, problems: Iterable[SpecProblem] | str, *, source: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [SpecProblem(field="", message=problems, source=source)]
        self.problems: list[SpecProblem] = list(problems)
        self.source = source
        super().__init__(self._render())

    @property
    def fields(self) -> list[str]:
        """The dotted paths of the fields at fault, in order."""
        return [p.field for p in self.problems]

    def _render(self) -> str:
        if len(self.problems) == 1:
            return str(self.problems[0])
        head = f"{len(self.problems)} problems" + (f" in {self.source}" if self.source else "")
        return head + ":\n" + "\n".join(f"  - {p}" for p in self.problems)


class PreflightError(SpecError):
    """The Google Cloud project cannot run what was asked: the pre-flight checks (``rlcloud doctor``'s cheap
    ones) that failed, found before anything was created or billed.

    ``checks`` are the failed :class:`rlcloud.gke.doctor.Check` objects; each problem's field is a check's name
    and its message says what is wrong and the command that fixes it. ``how_to_skip`` ends the message with how
    to go on without the checks (e.g. ``--skip-doctor``). A SpecError, so the CLI exits with 2 as for bad input:
    the set-up must change, not the attempt be repeated.
    """

    def __init__(self, checks: Iterable[object], *, project: str, how_to_skip: str = "") -> None:
        self.checks = list(checks)
        self.project = project
        self.how_to_skip = how_to_skip
        problems = []
        for check in self.checks:
            fix = getattr(check, "fix", "")
            message = str(getattr(check, "detail", check)) + (f"; fix: {fix}" if fix else "")
            problems.append(SpecProblem(field=str(getattr(check, "name", "")), message=message))
        super().__init__(problems)

    def _render(self) -> str:
        lines = "\n".join(str(check) for check in self.checks)
        head = f"project {self.project} is not ready (nothing was created):"
        return f"{head}\n{lines}" + (f"\n{self.how_to_skip}" if self.how_to_skip else "")


class AuthError(RLCloudError):
    """Credentials are missing or invalid, a permission is denied, or an API is not enabled."""


class ProvisioningError(RLCloudError):
    """A cluster or node pool could not be created."""


class QuotaExceededError(ProvisioningError):
    """A project quota (such as ``GPUS_ALL_REGIONS``) is too low for the request."""

    def __init__(self, message: str, *, quota: str | None = None) -> None:
        super().__init__(message)
        self.quota = quota


class CapacityError(ProvisioningError):
    """The zone has no capacity for the machine or accelerator right now (a stockout)."""

    def __init__(self, message: str, *, zones_with_capacity: list[str] | None = None) -> None:
        super().__init__(message)
        self.zones_with_capacity = zones_with_capacity or []


class NotFoundError(RLCloudError, LookupError):
    """A cluster, experiment, bucket or object does not exist."""


class ConflictError(RLCloudError):
    """A resource exists already and differs from what was asked for."""


class StorageError(RLCloudError):
    """The results store failed: I/O, checksum mismatch, or a precondition."""


class RecordError(StorageError):
    """A stored record (a run's spec.yaml, history, progress or state, a sweep's record) is not one rlcloud
    reads: too large, nested too deep, an alias bomb, a cycle, not the type expected. The message names the
    file; the record is refused or skipped, never acted on."""


class WorkloadError(RLCloudError):
    """The experiment's processes or pods failed."""


class BackendError(RLCloudError):
    """An API call failed for a reason not covered by a more specific error (after retries)."""


class UnsupportedError(RLCloudError):
    """The backend lacks the capability asked for (e.g. a backend that runs no sweeps, :class:`SweepCapable`).

    Named after the backend, with where the same thing can run instead.
    """


class WaitTimeoutError(RLCloudError, builtins.TimeoutError):
    """A wait ran past its timeout. Also an instance of the builtin ``TimeoutError``.

    It was called ``rlcloud.TimeoutError`` before, a name that shadowed the builtin wherever it was imported;
    that name still works, with a DeprecationWarning.
    """


class MissingExtraError(RLCloudError, ImportError):
    """An optional part of rlcloud is not installed here; the message says which extra brings it.

    ``extra`` is the extra's name (``analysis``, ``runner``), ``module`` the module that is missing.
    """

    def __init__(self, module: str, extra: str, feature: str) -> None:
        self.module = module
        self.extra = extra
        self.feature = feature
        super().__init__(
            f"{feature} needs {module}, which is not installed here: install rlcloud's {extra} extra "
            f"(pip install 'rlcloud[{extra}]', or uv sync --extra {extra} in a clone)",
            name=module,
        )


def require(module: str, extra: str, *, feature: str) -> ModuleType:
    """Import an optional dependency, or raise :class:`MissingExtraError` naming the extra that brings it.

    Args:
        module: the module to import, e.g. ``"matplotlib.figure"``.
        extra: the rlcloud extra that installs it, e.g. ``"analysis"``.
        feature: what needs it, for the message, e.g. ``"Experiment.plot()"``.

    Returns:
        The imported module.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if isinstance(exc, MissingExtraError):
            raise
        # a module that is installed but fails to import (a broken wheel) is not a missing extra
        missing = getattr(exc, "name", None)
        if missing is not None and module != missing and not module.startswith(missing + "."):
            raise
        raise MissingExtraError(module, extra, feature) from exc


def require_installed(modules: Iterable[str], extra: str, *, feature: str) -> None:
    """Raise :class:`MissingExtraError` unless every module is installed, without importing any of them.

    For checks before work starts that must stay cheap (finding tensorforce must not import TensorFlow).
    """
    import importlib.util

    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtraError(module, extra, feature)


def __getattr__(name: str) -> object:
    # the old name of WaitTimeoutError, kept for code written against rlcloud 0.1
    if name == "TimeoutError":
        import warnings

        warnings.warn(
            "rlcloud.errors.TimeoutError is now WaitTimeoutError (the old name shadowed the builtin)",
            DeprecationWarning,
            stacklevel=2,
        )
        return WaitTimeoutError
    raise AttributeError(f"module 'rlcloud.errors' has no attribute {name!r}")
