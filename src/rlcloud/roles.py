"""The roles an experiment runs as, one vocabulary for every backend and the runner.

A run mode maps to the roles it starts (``roles_for``): ``single`` runs one ``single`` role,
``multi-threaded`` one ``multi`` role, ``distributed`` one ``agent`` plus ``num_workers`` ``env-server``
roles. The *learner* is the role that holds the agent and writes checkpoints (single, multi or agent).
Each role instance is ``<role>-<index>`` in logs and on disk (:func:`role_label`), and its log lines
are shown as ``"<role>-<index> | <line>"`` (:func:`log_line`); :func:`role_selector` picks role
instances by name (``env-server``, ``env-server-3``, ``learner``), e.g. which logs to read.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = [
    "LEARNER",
    "LEARNER_ROLES",
    "LOCAL_MAX_WORKERS",
    "Role",
    "check_local_capacity",
    "learner_role",
    "log_line",
    "role_label",
    "role_selector",
    "roles_for",
]


class Role(enum.StrEnum):
    """What one runner process (or pod) does."""

    SINGLE = "single"
    MULTI = "multi"
    AGENT = "agent"
    ENV_SERVER = "env-server"

    @property
    def is_learner(self) -> bool:
        """Whether this role holds the agent (trains, checkpoints, decides when the run ends)."""
        return self is not Role.ENV_SERVER

    @property
    def run_mode(self) -> str:
        """The run mode this role belongs to."""
        return _ROLE_MODES[self]


#: The learner role of each run mode.
_LEARNER_OF_MODE: dict[str, Role] = {"single": Role.SINGLE, "multi-threaded": Role.MULTI, "distributed": Role.AGENT}
_ROLE_MODES: dict[Role, str] = {
    Role.SINGLE: "single",
    Role.MULTI: "multi-threaded",
    Role.AGENT: "distributed",
    Role.ENV_SERVER: "distributed",
}
#: The roles that hold an agent, in no particular run mode.
LEARNER_ROLES: tuple[Role, ...] = (Role.SINGLE, Role.MULTI, Role.AGENT)


def learner_role(run_mode: str) -> Role:
    """The learner role of ``run_mode`` ("single" -> single, "multi-threaded" -> multi, "distributed" -> agent)."""
    try:
        return _LEARNER_OF_MODE[str(run_mode)]
    except KeyError:
        from rlcloud.errors import SpecError, SpecProblem

        raise SpecError([SpecProblem("run_mode", "must be single, multi-threaded or distributed", run_mode)]) from None


def roles_for(spec: ExperimentSpec) -> list[tuple[Role, int]]:
    """Every role instance ``spec`` runs, learner first: ``[(Role.AGENT, 0), (Role.ENV_SERVER, 0), ...]``."""
    learner = learner_role(spec.run_mode)
    instances = [(learner, 0)]
    if learner is Role.AGENT:
        instances += [(Role.ENV_SERVER, i) for i in range(spec.num_workers)]
    return instances


def role_label(role: str, index: int) -> str:
    """``role-index``, e.g. ``env-server-3``: the name of a role instance's log file and log prefix."""
    return f"{role}-{index}"


#: In a role selection (:func:`role_selector`): whichever role is the learner (single, multi or agent).
LEARNER = "learner"


def role_selector(roles: Sequence[str] | None, *, field: str = "roles") -> Callable[[str], bool]:
    """Whether a role instance's label (``"env-server-3"``) is among ``roles``: role names (every instance of
    it), instances (``"env-server-3"``) or ``"learner"`` (:data:`LEARNER`). None or empty selects every role.

    Raises ``SpecError`` (naming ``field``) for a name that is none of these.
    """
    if not roles:
        return lambda label: True
    import re

    names = "|".join(re.escape(r.value) for r in Role)
    for role in roles:
        if role != LEARNER and not re.fullmatch(rf"(?:{names})(?:-\d+)?", role):
            from rlcloud.errors import SpecError, SpecProblem

            valid = ", ".join(r.value for r in Role)
            raise SpecError(
                [SpecProblem(field, f"a role ({valid}), one instance of it (env-server-3), or {LEARNER}", role)]
            )
    wanted = set(roles)
    learners = {r.value for r in LEARNER_ROLES} if LEARNER in wanted else set()

    def selected(label: str) -> bool:
        role, _, index = label.rpartition("-")
        if not index.isdigit():
            return label in wanted
        return label in wanted or role in wanted or role in learners

    return selected


def check_roles_of(spec: ExperimentSpec, roles: Sequence[str], *, field: str = "roles") -> None:
    """Refuse (SpecError naming ``field``) a role selection of which an item selects no role instance of
    ``spec``'s run: ``single-999``, ``env-server`` in a single run."""
    labels = [role_label(role.value, index) for role, index in roles_for(spec)]
    for role in roles:
        if not any(role_selector([role], field=field)(label) for label in labels):
            from rlcloud.errors import SpecError, SpecProblem, excerpt

            shown = ", ".join(labels[:4]) + (", ..." if len(labels) > 4 else "")
            raise SpecError(
                [SpecProblem(field, f"no such role in this run; its roles: {excerpt(shown, 80, quote=False)}", role)]
            )


def log_line(label: str, line: str) -> str:
    """One log line as every backend shows it: ``"env-server-3 | text"``."""
    return f"{label} | {line}"


#: Most environment processes (distributed env servers, multi-threaded worker processes) one machine runs
#: for a local experiment: each is a Python process of ~100 MB once gymnasium loads, so 256 is ~25 GB.
LOCAL_MAX_WORKERS = 256
#: File descriptors a local run needs per worker (a socket or pipe each side, a log file) and in all besides.
_FDS_PER_WORKER, _FDS_BASE = 4, 64


def check_local_capacity(spec: ExperimentSpec) -> None:
    """Refuse a spec this machine cannot run as local processes, before anything is written: more than
    LOCAL_MAX_WORKERS environment processes, or more file descriptors than the open-file limit (``ulimit
    -n``) allows. A spec may ask for up to 1024 workers, which a cluster runs as pods; 100,000 local ones
    once exhausted the file descriptors halfway through starting."""
    if spec.run_mode == "single":
        return
    from rlcloud.errors import SpecError, SpecProblem

    workers = spec.num_workers
    if workers > LOCAL_MAX_WORKERS:
        message = (
            f"at most {LOCAL_MAX_WORKERS} workers run on this machine (each is a Python process of ~100 MB); "
            "run more on a cluster"
        )
        raise SpecError([SpecProblem("num_workers", message, workers)])
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX: no limit to compare with
        return
    needed = _FDS_BASE + _FDS_PER_WORKER * workers
    if soft != resource.RLIM_INFINITY and needed > soft:
        message = (
            f"{workers} local workers need about {needed} open files, over this machine's limit of {soft} "
            f"(`ulimit -n`): raise the limit, or use at most {(soft - _FDS_BASE) // _FDS_PER_WORKER} workers"
        )
        raise SpecError([SpecProblem("num_workers", message, workers)])
