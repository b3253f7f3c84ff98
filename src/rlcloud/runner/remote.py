"""Distributed mode, agent side: a vector of environments that live in env-server processes over TCP.

One agent (learner) process talks to ``num_workers`` env servers (:mod:`rlcloud.runner.envserver`) over
the wire protocol of :mod:`rlcloud.runner.protocol`.
:class:`RemoteVectorEnv` looks like any other vector environment to the training loop (``num_envs``,
``states_spec``, ``actions_spec``, ``max_episode_timesteps``, ``reset()``, ``step()``, ``close()``), so
episodes and timesteps are counted across all workers by the same loop that drives local environments.

Every server hosts ``slots`` environments (``envs_per_server``; 2 by default with ``overlap=True``, i.e.
``execution: overlapped``, else 1): rows ``0..S-1`` are slot 0 of servers ``0..S-1``, rows ``S..2S-1``
their slot 1, and so on, so the training loop's overlapped groups (runner/overlap.py) are one environment
of every server each, and a server steps one slot while the agent acts on another.

Fault handling: the agent waits (``connect_timeout``) until every server is reachable and raises
:class:`EnvServersUnreachableError` naming the ones that are not. A server that dies mid-run, or does not
answer a step within ``step_timeout`` (it hangs), is reconnected (same timeout); the episodes it was running
end as truncated (terminal 2, reward 0). A hung server is replaced meanwhile by whoever runs it (the local
supervisor, the kubelet's liveness probe: rlcloud.runner.watchdog); :func:`timeouts_for_stall` sizes both
timeouts so that the agent flags it within the spec's ``stall_timeout`` and waits long enough for the
replacement, and :attr:`RemoteVectorEnv.waiting_for_servers` tells the learner's stall watchdog that the
learner itself is not stalled meanwhile.

Environment variables (see docs/contracts.md): ``RLCLOUD_ENV_SERVERS`` "host:port,...",
``RLCLOUD_HOST_MAP`` "name=127.0.0.1:port,..." (tests: maps pod DNS names to local ports),
``RLCLOUD_CONNECT_TIMEOUT`` and ``RLCLOUD_STEP_TIMEOUT`` (seconds).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlcloud import runenv
from rlcloud.errors import WaitTimeoutError, WorkloadError
from rlcloud.runenv import HostPort, RunnerEnv
from rlcloud.runner.protocol import (
    PROTOCOL_VERSION,
    ProtocolError,
    configure_socket,
    decode_spec,
    recv_message,
    send_message,
)
from rlcloud.specs.experiment import OVERLAPPED_ENVS_PER_SERVER
from rlcloud.waiting import Backoff

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_STEP_TIMEOUT",
    "EnvServerError",
    "EnvServersUnreachableError",
    "RemoteVectorEnv",
    "ServerAddress",
    "parse_env_servers",
    "server_addresses",
    "timeouts_for_stall",
]

logger = logging.getLogger(__name__)

#: How long the agent waits for every env server to be reachable (at start and after one dies).
DEFAULT_CONNECT_TIMEOUT = 300.0
#: How long one reset/step may take on a server before the agent counts it as dead.
DEFAULT_STEP_TIMEOUT = 120.0


def timeouts_for_stall(stall_timeout: float) -> dict[str, float]:
    """The agent's default ``step_timeout`` and ``connect_timeout`` for a spec's ``stall_timeout``.

    A step unanswered for half the stall_timeout (at most :data:`DEFAULT_STEP_TIMEOUT`) counts as a hung
    server: flagged within stall_timeout, before the learner's own watchdog would judge it. The wait for
    it to come back covers the stall_timeout after which it is replaced (the server's heartbeat) plus a
    fresh start (:data:`DEFAULT_CONNECT_TIMEOUT`).
    """
    return {
        "step_timeout": min(DEFAULT_STEP_TIMEOUT, stall_timeout / 2),
        "connect_timeout": DEFAULT_CONNECT_TIMEOUT + stall_timeout,
    }


class EnvServerError(WorkloadError):
    """An env server reported a failure (its environment raised), or answered out of turn."""


class EnvServersUnreachableError(WorkloadError, WaitTimeoutError):
    """Some env servers could not be reached within the timeout. ``servers`` names them."""

    def __init__(self, message: str, servers: Sequence[str]) -> None:
        super().__init__(message)
        self.servers = list(servers)


# ---------------------------------------------------------------------------------------- addresses


@dataclass(frozen=True)
class ServerAddress:
    """Where one env server listens: ``name`` as configured (e.g. a pod DNS name), ``host``/``port``
    as actually dialled (after ``RLCLOUD_HOST_MAP``)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        dialled = f"{self.host}:{self.port}"
        return self.name if self.name == dialled else f"{self.name} ({dialled})"


def parse_env_servers(text: str | None, host_map: str | None = None) -> list[ServerAddress]:
    """Parse ``RLCLOUD_ENV_SERVERS`` ("host:port,...") and apply ``RLCLOUD_HOST_MAP`` to each entry."""
    env = RunnerEnv.from_env({runenv.ENV_SERVERS: text or "", runenv.HOST_MAP: host_map or ""})
    return server_addresses(env.env_servers, env.host_map)


def server_addresses(
    env_servers: Sequence[HostPort], host_map: Sequence[tuple[str, HostPort]] = ()
) -> list[ServerAddress]:
    """The env servers to dial: ``RLCLOUD_ENV_SERVERS`` with ``RLCLOUD_HOST_MAP`` applied to each entry (a
    map's name is a host or a host:port)."""
    mapping = dict(host_map)
    servers: list[ServerAddress] = []
    for host, port in env_servers:
        name = f"{host}:{port}"
        target = mapping.get(name) or mapping.get(host) or (host, port)
        servers.append(ServerAddress(name=name, host=target[0], port=target[1]))
    if not servers:
        raise WorkloadError(
            f"{runenv.ENV_SERVERS} is empty: the agent role in distributed mode needs the env servers' "
            "addresses as host:port,host:port"
        )
    return servers


# ------------------------------------------------------------------------------------------- client


class _Server:
    """One env server as seen by the agent: its address and the current connection (or None)."""

    def __init__(self, index: int, address: ServerAddress) -> None:
        self.index = index
        self.address = address
        self.sock: socket.socket | None = None
        self.spec: dict[str, Any] | None = None

    def try_connect(self, timeout: float) -> bool:
        """One attempt: connect and say hello. False (and no connection) if the server is not there."""
        try:
            sock = socket.create_connection((self.address.host, self.address.port), timeout=min(timeout, 5.0))
        except OSError:
            return False
        try:
            configure_socket(sock)
            # A server answers hello at once (its environment is built before it listens); a short
            # timeout keeps one silent listener from holding up the wait for the others, or a stop.
            sock.settimeout(min(timeout, 10.0))
            send_message(sock, {"type": "hello", "protocol": PROTOCOL_VERSION})
            header, _ = recv_message(sock)
            sock.settimeout(timeout)
        except (OSError, ProtocolError):
            # Listening but not answering (e.g. still building its environment): try again later.
            sock.close()
            return False
        if header["type"] == "error":
            sock.close()
            raise EnvServerError(f"env server {self.address} refused the agent: {header.get('message')}")
        if header["type"] != "spec" or header.get("protocol") != PROTOCOL_VERSION:
            sock.close()
            raise ProtocolError(
                f"env server {self.address} speaks protocol {header.get('protocol')!r}, "
                f"the agent {PROTOCOL_VERSION}: run the same rlcloud version on both"
            )
        self.sock = sock
        self.spec = header
        return True

    def drop(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


class RemoteVectorEnv:
    """A vector environment whose environments run in env servers reached over TCP.

    ``reset()`` returns a batch of states (an array of shape ``(num_envs, *shape)``, or a dict of such
    arrays for multi-state environments); ``step(actions)`` takes a batch of actions the same way and
    returns ``(states, rewards, terminals)`` with terminals 0 (running), 1 (terminated) or 2 (truncated),
    autoresetting on the same step. All servers step concurrently: the actions are sent to every server
    before any answer is read. :meth:`send_actions` and :meth:`receive` do the two parts of a step for
    some of the rows; ``overlap=True`` (:attr:`overlap`) asks the training loop to act on one environment
    of each server while the servers step another (see the module docstring), ``False`` (default) keeps
    every step synchronous. ``slots``: environments per server (default 2 overlapped, else 1).

    ``connect_timeout`` bounds the wait for every server at start and for a server that died to come
    back; ``step_timeout`` bounds one reset/step on a server before it counts as dead.

    ``watch_signals`` (the agent role) chains a SIGTERM/SIGINT handler in front of the runner's: a
    signal ends any wait for a server at once (the loop then checkpoints and stops), and tells
    :meth:`close` to leave the servers waiting for the restarted agent instead of finishing them.
    ``should_stop`` is polled during those waits too (e.g. the runner's "a signal came before this
    object existed"); when it returns true it counts as such a signal.
    """

    def __init__(
        self,
        servers: Sequence[ServerAddress | str],
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        step_timeout: float = DEFAULT_STEP_TIMEOUT,
        watch_signals: bool = False,
        should_stop: Callable[[], bool] | None = None,
        overlap: bool = False,
        slots: int | None = None,
    ) -> None:
        addresses = [s if isinstance(s, ServerAddress) else parse_env_servers(s)[0] for s in servers]
        if not addresses:
            raise WorkloadError("RemoteVectorEnv needs at least one env server address")
        self._servers = [_Server(i, a) for i, a in enumerate(addresses)]
        #: Environments per server (the servers must host as many: the same spec on both sides).
        self.slots = slots if slots is not None else (OVERLAPPED_ENVS_PER_SERVER if overlap else 1)
        if self.slots < 1 or (overlap and self.slots < 2):
            raise WorkloadError(f"{self.slots} environment(s) per server: overlapped stepping needs 2 or more")
        self.connect_timeout = connect_timeout
        self.step_timeout = step_timeout
        #: How many times a server had to be reconnected mid-run (each ended one episode as truncated).
        self.reconnects = 0
        #: True while a lost server is awaited (:meth:`_revive`): the learner waits, it is not stalled.
        self.waiting_for_servers = False
        self._closed = False
        self._interrupted = threading.Event()
        self._should_stop = should_stop
        self._last_states: list[Any] = [None] * self.num_envs
        # Rows whose actions were sent and whose result is not read yet: None, or why the send failed.
        self._pending: dict[int, str | None] = {}
        # Per server, the rows whose step request is on its connection, in the order sent: a server answers
        # in that order, so a receive out of it keeps the answers for earlier rows in `_early`.
        self._in_flight: list[deque[int]] = [deque() for _ in self._servers]
        self._early: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        # Rows of a server that was reconnected while the agent had them: the new episode's first states,
        # returned (as truncated) by their next receive instead of a step's result.
        self._fresh: dict[int, Any] = {}
        #: Whether the training loop should overlap acting with stepping (runner/overlap.py): the agent
        #: acts on one slot of every server while the servers step the other.
        self.overlap = overlap
        self._restore_signals: Callable[[], None] = self._watch_signals() if watch_signals else (lambda: None)
        try:
            self._connect(list(self._servers))
            first = self._servers[0].spec or {}
            # What every server (and any server that comes back) must match, as received on the wire.
            self._reference = {key: first[key] for key in ("states_spec", "actions_spec")}
            self.states_spec: dict[str, Any] = decode_spec(first["states_spec"])
            self.actions_spec: dict[str, Any] = decode_spec(first["actions_spec"])
            self.max_episode_timesteps: int | None = first.get("max_episode_timesteps")
            for server in self._servers:
                self._check_same_spec(server)
        except BaseException:
            # Leave the servers that did answer free for the next agent.
            for server in self._servers:
                server.drop()
            self._restore_signals()
            raise

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        should_stop: Callable[[], bool] | None = None,
        overlap: bool = False,
        slots: int | None = None,
        defaults: Mapping[str, float] | None = None,
    ) -> RemoteVectorEnv:
        """Build from ``RLCLOUD_ENV_SERVERS``, ``RLCLOUD_HOST_MAP``, ``RLCLOUD_CONNECT_TIMEOUT`` and
        ``RLCLOUD_STEP_TIMEOUT`` (the agent role in distributed mode); ``defaults``: the timeouts when those
        variables are not set (:func:`timeouts_for_stall`), else the module's defaults."""
        env = RunnerEnv.from_env(environ)
        servers = server_addresses(env.env_servers, env.host_map)
        given = defaults or {}
        connect_timeout = env.connect_timeout or given.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        step_timeout = env.step_timeout or given.get("step_timeout", DEFAULT_STEP_TIMEOUT)
        return cls(
            servers,
            connect_timeout=connect_timeout,
            step_timeout=step_timeout,
            watch_signals=True,
            should_stop=should_stop,
            overlap=overlap,
            slots=slots,
        )

    # -- properties the loop reads

    @property
    def num_envs(self) -> int:
        """How many environments (:attr:`slots` per env server)."""
        return len(self._servers) * self.slots

    @property
    def servers(self) -> list[ServerAddress]:
        """The env servers' addresses, in server order (row ``r`` is on server ``r % len(servers)``)."""
        return [s.address for s in self._servers]

    def _server_of(self, row: int) -> tuple[_Server, int]:
        """The server a row lives on, and its slot there."""
        count = len(self._servers)
        return self._servers[row % count], row // count

    def _rows_of(self, server: _Server) -> list[int]:
        return [server.index + slot * len(self._servers) for slot in range(self.slots)]

    # -- signals

    def _stopping(self) -> bool:
        if not self._interrupted.is_set() and self._should_stop is not None and self._should_stop():
            self._interrupted.set()
        return self._interrupted.is_set()

    def interrupt(self) -> None:
        """End any wait for a server now, and make :meth:`close` leave the servers waiting (thread-safe)."""
        self._interrupted.set()

    def _watch_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous: dict[int, Any] = {}

        def handler(signum: int, frame: Any) -> None:
            self.interrupt()
            chained = previous.get(signum)
            if callable(chained):
                chained(signum, frame)
            elif chained == signal.SIG_DFL:
                # Nobody else handles it: behave as if we were not here (SIGINT: KeyboardInterrupt,
                # SIGTERM: the default action, i.e. the process ends).
                if signum == signal.SIGINT:
                    raise KeyboardInterrupt
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, handler)

        def restore() -> None:
            for signum, old in previous.items():
                with contextlib.suppress(ValueError, TypeError):
                    if signal.getsignal(signum) is handler:
                        signal.signal(signum, old)

        return restore

    # -- connection management

    def _connect(self, servers: list[_Server]) -> None:
        """Connect to every given server, retrying until ``connect_timeout``; name those that never came."""
        deadline = time.monotonic() + self.connect_timeout
        pending = list(servers)
        # env servers start in parallel with the agent: ask often at first, then every half second
        pauses = Backoff(0.05, 0.5).pauses()
        while pending:
            pending = [s for s in pending if not s.try_connect(self.step_timeout)]
            if not pending:
                break
            if self._stopping():
                raise WorkloadError(
                    "interrupted while waiting for env servers " + ", ".join(str(s.address) for s in pending)
                )
            if time.monotonic() >= deadline:
                names = [str(s.address) for s in pending]
                raise EnvServersUnreachableError(
                    f"{len(names)} of {len(self._servers)} env servers not reachable after "
                    f"{self.connect_timeout:g} s: {', '.join(names)} (check that the env-server roles "
                    "are running and RLCLOUD_ENV_SERVERS / RLCLOUD_HOST_MAP point at them)",
                    names,
                )
            # an Event, not a sleep: a stop signal ends the pause at once
            self._interrupted.wait(min(next(pauses), max(0.0, deadline - time.monotonic())))

    def _check_same_spec(self, server: _Server) -> None:
        spec = server.spec or {}
        if spec.get("slots", 1) != self.slots:
            raise EnvServerError(
                f"env server {server.address} hosts {spec.get('slots', 1)} environment(s), the agent expects "
                f"{self.slots} (envs_per_server or execution differ between them): all env servers must run "
                "the experiment's spec"
            )
        if any(spec.get(key) != self._reference.get(key) for key in ("states_spec", "actions_spec")):
            raise EnvServerError(
                f"env server {server.address} runs a different environment than {self._servers[0].address} "
                "(states/actions specs differ): all env servers must run the experiment's spec"
            )

    def _revive(self, server: _Server, why: str) -> list[Any]:
        """Reconnect to a server that failed and reset it; return the first states of each of its slots.

        Interrupted by a signal, it returns the server's last states instead (the loop checkpoints and
        stops before acting on them) and leaves the server disconnected.
        """
        self.waiting_for_servers = True
        try:
            return self._reconnect(server, why)
        finally:
            self.waiting_for_servers = False

    def _reconnect(self, server: _Server, why: str) -> list[Any]:
        server.drop()
        self.reconnects += 1
        logger.warning("env server %s lost (%s); reconnecting, its episode ends as truncated", server.address, why)
        deadline = time.monotonic() + self.connect_timeout
        while True:
            try:
                self._connect([server])
                self._check_same_spec(server)
                assert server.sock is not None
                for slot in range(self.slots):
                    send_message(server.sock, {"type": "reset", "slot": slot})
                firsts = [self._expect(server, "states")[1]["states"] for _ in range(self.slots)]
            except OSError as exc:
                # Accepted the hello and died again (e.g. restarting twice): keep trying until the deadline.
                server.drop()
                if time.monotonic() >= deadline:
                    raise EnvServersUnreachableError(
                        f"env server {server.address} did not come back within {self.connect_timeout:g} s "
                        f"({exc or type(exc).__name__})",
                        [str(server.address)],
                    ) from exc
                continue
            except WorkloadError:
                last = [self._last_states[row] for row in self._rows_of(server)]
                if self._stopping() and all(states is not None for states in last):
                    logger.info("stopping while env server %s is away", server.address)
                    return last
                raise
            logger.info("env server %s is back", server.address)
            return firsts

    def _revive_row(self, row: int, why: str) -> Any:
        """Revive ``row``'s server (see :meth:`_revive`); its other rows' next receive comes back truncated
        with their new first states (whether their step was in flight on the lost connection or not sent
        yet). Returns ``row``'s new first states."""
        server, slot = self._server_of(row)
        self._in_flight[server.index].clear()
        firsts = self._revive(server, why)
        for other, states in zip(self._rows_of(server), firsts, strict=True):
            self._early.pop(other, None)
            if other != row:
                self._fresh[other] = states
        return firsts[slot]

    def _read_result(self, row: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The answer to ``row``'s step, reading (and keeping) the answers to steps sent before it."""
        if row in self._early:
            return self._early.pop(row)
        server, _slot = self._server_of(row)
        queue = self._in_flight[server.index]
        while True:
            first = queue[0]
            answer = self._expect(server, "result")
            queue.popleft()
            if first == row:
                return answer
            self._early[first] = answer

    def _expect(self, server: _Server, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
        assert server.sock is not None
        header, values = recv_message(server.sock)
        if header["type"] == "error":
            raise EnvServerError(f"env server {server.address} failed: {header.get('message')}")
        if header["type"] != kind:
            raise ProtocolError(f"env server {server.address} answered {header['type']!r}, expected {kind!r}")
        return header, values

    # -- the vector environment

    def reset(self) -> Any:
        """Reset every environment; return the batch of first states."""
        self._check_open()
        self._drain()
        self._fresh.clear()
        failed: dict[int, str] = {}
        for server in self._servers:
            try:
                if server.sock is None:
                    raise ConnectionResetError("not connected")
                for slot in range(self.slots):
                    send_message(server.sock, {"type": "reset", "slot": slot})
            except OSError as exc:
                failed[server.index] = f"send: {exc or type(exc).__name__}"
        states: list[Any] = [None] * self.num_envs
        for server in self._servers:
            rows = self._rows_of(server)
            why = failed.get(server.index)
            if why is None:
                try:
                    for row in rows:
                        states[row] = self._expect(server, "states")[1]["states"]
                    continue
                except OSError as exc:
                    why = f"receive: {exc or type(exc).__name__}"
            for row, first in zip(rows, self._revive(server, why), strict=True):
                states[row] = first
        self._last_states = states
        return _stack(states)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        """Send each environment its action, then gather ``(states, rewards, terminals)`` from all."""
        rows = np.arange(self.num_envs)
        self.send_actions(rows, actions)
        return self.receive(rows)

    def send_actions(self, rows: Sequence[int] | np.ndarray, actions: Any) -> None:
        """Send the environments ``rows`` their actions (a batch with one entry per row, in ``rows`` order)
        and return without waiting: :meth:`receive` collects the results.

        Together with :meth:`receive` this lets the agent act on some rows while others step (the
        training loop's overlapped stepping, see :attr:`overlap`). A row must be received before it is
        sent again.
        """
        self._check_open()
        rows = [int(r) for r in rows]
        per_row = _unstack(actions, len(rows))
        for row, action in zip(rows, per_row, strict=True):
            server, slot = self._server_of(row)
            if row in self._pending:
                raise WorkloadError(f"env server {server.address}: actions sent twice without a receive")
            self._pending[row] = None
            if row in self._fresh:
                continue  # its server was reconnected: the receive ends the episode, nothing to step
            try:
                if server.sock is None:
                    raise ConnectionResetError("not connected")
                send_message(server.sock, {"type": "step", "slot": slot}, {"actions": action})
                self._in_flight[server.index].append(row)
            except OSError as exc:
                self._pending[row] = f"send: {exc or type(exc).__name__}"

    def receive(self, rows: Sequence[int] | np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
        """Wait for the results of the environments ``rows`` (sent by :meth:`send_actions`):
        ``(states, rewards, terminals)`` batched in ``rows`` order. A server that died is reconnected and
        its row comes back truncated (terminal 2, reward 0) with the first states of a new episode."""
        self._check_open()
        rows = [int(r) for r in rows]
        states: list[Any] = [None] * len(rows)
        rewards = np.zeros(len(rows), dtype=np.float64)
        terminals = np.zeros(len(rows), dtype=np.int64)
        for i, row in enumerate(rows):
            server, _slot = self._server_of(row)
            if row not in self._pending:
                raise WorkloadError(f"env server {server.address}: receive without actions sent")
            why = self._pending.pop(row)
            if row in self._fresh:
                why = ""  # truncated by its server's reconnection, below
            elif why is None:
                try:
                    header, values = self._read_result(row)
                except OSError as exc:
                    why = f"receive: {exc or type(exc).__name__}"
                else:
                    states[i] = values["states"]
                    rewards[i] = float(header["reward"])
                    terminals[i] = int(header["terminal"])
                    self._last_states[row] = states[i]
                    continue
            states[i] = self._fresh.pop(row) if row in self._fresh else self._revive_row(row, why)
            terminals[i] = 2
            self._last_states[row] = states[i]
        return _stack(states), rewards, terminals

    def _drain(self) -> None:
        """Read the answers to steps still in flight, so that the next request's answer is its own."""
        self._pending.clear()
        self._early.clear()
        for server, queue in zip(self._servers, self._in_flight, strict=True):
            if queue and server.sock is not None:
                try:
                    server.sock.settimeout(min(self.step_timeout, 5.0))
                    for _ in queue:
                        self._expect(server, "result")
                    server.sock.settimeout(self.step_timeout)
                except (OSError, WorkloadError):
                    server.drop()  # answering late or gone: the next reset/close reconnects or skips it
            queue.clear()

    def close(self, finished: bool | None = None) -> None:
        """Disconnect from every server (idempotent).

        ``finished=True`` tells them the run is over, so they exit; ``finished=False`` leaves them waiting
        for the next agent (it stops for a restart, or crashed and will be retried). ``None`` decides:
        not finished when a signal was received (see ``watch_signals``) or an exception is on its way
        (close called from a ``finally`` or ``__exit__`` while the run fails), finished otherwise.
        """
        if self._closed:
            return
        self._closed = True
        if finished is None:
            finished = not self._stopping() and sys.exc_info()[0] is None
        self._restore_signals()
        self._drain()
        for server in self._servers:
            if server.sock is None:
                continue
            try:
                server.sock.settimeout(5.0)
                send_message(server.sock, {"type": "close", "finished": finished})
                recv_message(server.sock)
            except (OSError, WorkloadError):
                pass  # a server that is gone already needs no goodbye
            server.drop()

    def _check_open(self) -> None:
        if self._closed:
            raise WorkloadError("RemoteVectorEnv is closed")

    def __enter__(self) -> RemoteVectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(finished=exc[0] is None and not self._stopping())


def _stack(items: list[Any]) -> Any:
    first = items[0]
    if isinstance(first, dict):
        return {key: _stack([item[key] for item in items]) for key in first}
    return np.stack([np.asarray(item) for item in items])


def _unstack(batch: Any, n: int) -> list[Any]:
    if isinstance(batch, Mapping):
        parts = {key: _unstack(value, n) for key, value in batch.items()}
        return [{key: parts[key][i] for key in parts} for i in range(n)]
    array = np.asarray(batch)
    if array.ndim == 0 or array.shape[0] != n:
        raise WorkloadError(f"expected a batch of {n} actions, got an array of shape {array.shape}")
    return [array[i] for i in range(n)]
