"""An experiment's log lines, as ``role-index | line``: from its pods, followed as they start, or from the
results store once the pods are gone.

:func:`follow` streams the log of every started pod it is asked for (``selected``: by default the
backend asks for the learner's only) in a thread of its own (one HTTP stream per pod) into one queue,
and polls the Jobs and Pods (through the ``observe`` callback, a list call each) for pods that start
later (env servers still Pending, retries) until every Job has finished or is suspended.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kubernetes import client as k8s

from rlcloud.k8s.applier import Applier, translate
from rlcloud.k8s.builders import LABEL_ROLE
from rlcloud.k8s.status import (
    JSON,
    Observed,
    get,
    is_started,
    is_suspended,
    job_finished,
    labels,
    name,
    pod_index,
    role_rank,
)
from rlcloud.roles import log_line, role_label

if TYPE_CHECKING:
    from rlcloud.storage import Store

__all__ = ["follow", "pod_label", "pod_lines", "pod_order", "stored_lines"]

logger = logging.getLogger(__name__)


def pod_label(pod: JSON) -> str:
    """The ``role-index`` prefix of the pod's log lines."""
    return role_label(labels(pod).get(LABEL_ROLE, "pod"), pod_index(pod))


def pod_order(pod: JSON) -> tuple[int, int, str]:
    """Sort key of pods for showing logs: learner first, then env servers by index, older pods first."""
    created = str(get(pod, "metadata", "creationTimestamp") or "")
    return role_rank(labels(pod).get(LABEL_ROLE, "")), pod_index(pod), created


def _every(label: str) -> bool:
    return True


def stored_lines(store: Store, selected: Callable[[str], bool] = _every) -> Iterator[str]:
    """The logs the runners saved in the results store (``logs/<role>-<index>.log``), role by role: those
    of the role instances ``selected`` accepts (by label, ``env-server-3``)."""
    from rlcloud.storage import read_logs

    for label, text in sorted(read_logs(store).items()):
        if not selected(label):
            continue
        for line in text.splitlines():
            yield log_line(label, line)


def pod_lines(
    applier: Applier, namespace: str, pods: list[JSON], selected: Callable[[str], bool] = _every
) -> Iterator[str]:
    """The logs so far of the pods that have started and that ``selected`` accepts (by label), one pod
    after the other (see :func:`pod_order`)."""
    for pod in sorted(pods, key=pod_order):
        if not is_started(pod) or not selected(pod_label(pod)):
            continue
        label = pod_label(pod)
        what = f"read the log of pod {name(pod)}"
        try:
            text = applier.pod_log(name(pod), namespace)
        except k8s.ApiException as exc:
            if exc.status in (400, 404):  # not started after all, or gone meanwhile
                continue
            raise translate(exc, what) from exc
        for line in str(text).splitlines():
            yield log_line(label, line)


def follow(
    applier: Applier,
    namespace: str,
    observed: Observed,
    observe: Callable[[], Observed],
    *,
    poll_interval: float,
    selected: Callable[[str], bool] = _every,
) -> Iterator[str]:
    """The log lines of the pods ``selected`` accepts (by label, ``env-server-3``) as they are written,
    pods that start later included, until every Job has finished or is suspended and every stream has
    ended (or the experiment's objects are gone). A pod not selected costs no request of its own.

    ``observed``: the experiment's Jobs and Pods now; ``observe`` reads them again, every
    ``poll_interval`` seconds. Closing the iterator closes the streams.
    """
    streams = _Streams(applier, namespace)
    try:
        while True:
            for pod in sorted(observed.pods, key=pod_order):
                if is_started(pod) and selected(pod_label(pod)):
                    streams.follow(pod)
            # hand lines on as they come for one poll interval, then look for new pods
            yield from streams.lines_for(poll_interval)
            ended = all(job_finished(j) or is_suspended(j) for j in observed.jobs.values())
            if ended and streams.idle():
                return
            observed = observe()
            if not observed.jobs and not observed.pods:
                return
    finally:
        streams.close()


class _Streams:
    """The log streams :func:`follow` reads: one thread per pod (an HTTP stream each) into one queue."""

    def __init__(self, applier: Applier, namespace: str) -> None:
        self.applier, self.namespace = applier, namespace
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.stop = threading.Event()
        self.followed: set[str] = set()
        self.active: set[str] = set()
        self.responses: list[Any] = []
        self.lock = threading.Lock()

    def follow(self, pod: JSON) -> None:
        """Stream the log of ``pod`` (started) in a thread of its own, unless it is streamed already."""
        pod_name = name(pod)
        with self.lock:
            if pod_name in self.followed:
                return
            self.followed.add(pod_name)
            self.active.add(pod_name)
        threading.Thread(
            target=self.stream, args=(pod_name, pod_label(pod)), name=f"logs-{pod_name}", daemon=True
        ).start()

    def stream(self, pod_name: str, label: str) -> None:
        """Queue the pod's log lines as ``(label, line)``; ``(pod_name, None)`` at the end of its stream."""
        lines, stop = self.lines, self.stop
        buffer = b""
        try:
            resp = self.applier.follow_log(pod_name, self.namespace).response
            with self.lock:
                self.responses.append(resp)
            for chunk in resp.stream(amt=None, decode_content=False):
                if stop.is_set():
                    break
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for raw in complete:
                    lines.put((label, raw.decode("utf-8", errors="replace")))
            if buffer and not stop.is_set():
                lines.put((label, buffer.decode("utf-8", errors="replace")))
            resp.release_conn()
        except Exception as exc:  # the pod went away, or the stream broke: the poll loop decides
            logger.debug("log stream of %s ended: %s", pod_name, type(exc).__name__)
            if isinstance(exc, k8s.ApiException) and exc.status == 400:
                with self.lock:
                    self.followed.discard(pod_name)  # not started after all: follow it again later
        finally:
            lines.put((pod_name, None))

    def lines_for(self, seconds: float) -> Iterator[str]:
        """The lines queued within ``seconds``, as they come (``role-index | line``)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                label, line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                with self.lock:
                    self.active.discard(label)  # a stream's end is signalled under its pod's name
            else:
                yield log_line(label, line)

    def idle(self) -> bool:
        """Every stream has ended and its lines are handed on."""
        with self.lock:
            idle = not self.active
        return idle and self.lines.empty()

    def close(self) -> None:
        """End the streams (their threads stop reading; the responses are closed)."""
        self.stop.set()
        with self.lock:
            for resp in self.responses:
                with contextlib.suppress(Exception):
                    resp.close()
