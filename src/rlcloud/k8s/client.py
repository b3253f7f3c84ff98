"""One ``kubernetes.client.ApiClient`` per cluster, from a kubeconfig, without global state.

``kubernetes.config.load_kube_config()`` writes into the client library's process-wide default
configuration, so two clusters in one process would overwrite each other; this module only ever
builds private ``Configuration`` objects (house rule 5).
"""

from __future__ import annotations

import os
from typing import Any

from rlcloud.errors import AuthError, NotFoundError, SpecError, SpecProblem

__all__ = ["api_client_from_kubeconfig", "check_kubeconfig", "kubeconfig_contexts"]


def _config_file(kubeconfig: str | os.PathLike[str] | None) -> str:
    if kubeconfig is not None:
        return os.fspath(kubeconfig)
    env = os.environ.get("KUBECONFIG", "")
    # $KUBECONFIG may list several files; the client library merges them when given the raw value
    return env or os.path.expanduser("~/.kube/config")


def check_kubeconfig(path: str) -> None:
    """Read every file of a kubeconfig path list with the bounded reader before the client library does (it
    uses plain ``yaml.safe_load``: an alias bomb would grow without bound, garbage would give a traceback): a
    SpecError naming the file and ``kubeconfig`` when one is not a kubeconfig (a YAML mapping)."""
    from pathlib import Path

    from rlcloud.errors import RLCloudError
    from rlcloud.stored import read_record_file

    for part in path.split(os.pathsep):
        if not part:
            continue
        try:
            data = read_record_file(Path(part).expanduser(), form="yaml", expect=None, follow_links=True)
        except FileNotFoundError:
            continue  # the client skips a missing file of a list; a missing only file is reported by the caller
        except RLCloudError as exc:
            raise SpecError([SpecProblem("kubeconfig", f"not a kubeconfig: {exc}")]) from None
        if data is not None and not isinstance(data, dict):
            raise SpecError([SpecProblem("kubeconfig", f"{part} is not a kubeconfig (a YAML mapping)")])
        for key in ("clusters", "contexts", "users"):
            if isinstance(data, dict) and not isinstance(data.get(key) or [], list):
                raise SpecError([SpecProblem("kubeconfig", f"{part}: {key!r} must be a list")])


def kubeconfig_contexts(kubeconfig: str | os.PathLike[str] | None = None) -> tuple[list[str], str | None]:
    """The context names in a kubeconfig and the current one (SpecError naming it when it is not one)."""
    from kubernetes import config

    path = _config_file(kubeconfig)
    check_kubeconfig(path)
    try:
        # the kubernetes client's config helpers are untyped
        contexts, current = config.list_kube_config_contexts(config_file=path)
        return [c["name"] for c in contexts], (current or {}).get("name")
    except (config.ConfigException, KeyError, TypeError, AttributeError, ValueError) as exc:
        first = path.split(os.pathsep)[0]
        raise SpecError([SpecProblem("kubeconfig", f"{first} is not a usable kubeconfig: {exc}")]) from None


def api_client_from_kubeconfig(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None) -> Any:
    """A new ``ApiClient`` for ``context`` (default: the current context) of ``kubeconfig`` (default:
    ``$KUBECONFIG``, else ``~/.kube/config``). The global default configuration is left untouched.

    Errors: :class:`NotFoundError` when the kubeconfig file does not exist, :class:`SpecError` naming
    the valid contexts when ``context`` is not one of them, :class:`AuthError` when the kubeconfig
    cannot produce credentials (e.g. a missing exec plugin).
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    path = _config_file(kubeconfig)
    first = path.split(os.pathsep)[0]
    if not os.path.exists(os.path.expanduser(first)):
        raise NotFoundError(
            f"no kubeconfig at {first}: pass kubeconfig=PATH, set $KUBECONFIG, or create one "
            "(e.g. `gcloud container clusters get-credentials`, `kind create cluster`)"
        )
    check_kubeconfig(path)
    if context is not None:
        names, _ = kubeconfig_contexts(path)
        if context not in names:
            raise SpecError(
                [SpecProblem("context", f"not a context of {first}; valid: {', '.join(names) or 'none'}", context)]
            )
    configuration = type.__call__(client.Configuration)  # a fresh one, not a copy of the global default
    try:
        config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
    except ConfigException as exc:
        raise AuthError(
            f"kubeconfig {first} (context {context or 'current'}) gives no usable credentials: {exc}"
        ) from exc
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a mapping of the wrong shape inside
        raise SpecError(
            [SpecProblem("kubeconfig", f"{first} (context {context or 'current'}) is not a usable kubeconfig: {exc!r}")]
        ) from None
    return client.ApiClient(configuration=configuration)
