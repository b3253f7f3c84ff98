"""One ``kubernetes.client.ApiClient`` per cluster, from a kubeconfig, without global state.

``kubernetes.config.load_kube_config()`` writes into the client library's process-wide default
configuration, so two clusters in one process would overwrite each other; this module only ever
builds private ``Configuration`` objects (house rule 5).
"""

from __future__ import annotations

import os
from typing import Any

from rlcloud.errors import AuthError, NotFoundError, SpecError, SpecProblem

__all__ = ["api_client_from_kubeconfig", "kubeconfig_contexts"]


def _config_file(kubeconfig: str | os.PathLike[str] | None) -> str:
    if kubeconfig is not None:
        return os.fspath(kubeconfig)
    env = os.environ.get("KUBECONFIG", "")
    # $KUBECONFIG may list several files; the client library merges them when given the raw value
    return env or os.path.expanduser("~/.kube/config")


def kubeconfig_contexts(kubeconfig: str | os.PathLike[str] | None = None) -> tuple[list[str], str | None]:
    """The context names in a kubeconfig and the current one."""
    from kubernetes import config

    # the kubernetes client's config helpers are untyped
    contexts, current = config.list_kube_config_contexts(config_file=_config_file(kubeconfig))
    return [c["name"] for c in contexts], (current or {}).get("name")


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
    if context is not None:
        try:
            names, _ = kubeconfig_contexts(path)
        except ConfigException as exc:
            raise AuthError(f"cannot read kubeconfig {first}: {exc}") from exc
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
    return client.ApiClient(configuration=configuration)
