"""Distributed mode, env-server side: the experiment's environment served over TCP to the agent (learner).

``python -m rlcloud.runner --role env-server --index N ...`` ends up in :func:`run_env_server`, which
builds the experiment's environment with the runner's adapter and serves it with :class:`EnvServer`
(protocol: :mod:`rlcloud.runner.protocol`). With ``envs_per_server`` (2 by default with ``execution:
overlapped``) a server hosts that many copies of the environment ("slots") and steps them in turn: with
overlapped execution, while it steps one the agent acts on another's last states, so a server whose steps
are expensive never waits for the agent.

Lifecycle, so that no env server runs forever:

- It listens from the start and waits for the agent (which may start later, or restart).
- One agent at a time. A new agent (a connection that says a valid hello) replaces the current one
  (the agent restarted: its old connection may not even have been closed by a dead host); the episode
  in progress is abandoned and the new agent resets the environment before stepping it. A connection
  that never says hello (a TCP readiness probe, a port scan) is closed and disturbs nothing.
- It keeps a heartbeat (``heartbeat``, :mod:`rlcloud.runner.watchdog`): the request loop sets the file's
  mtime each time round, so a server stuck in a step, stopped or starved leaves it old, and whoever runs the
  server (the local supervisor, the kubelet's liveness probe) replaces it; the agent reconnects.
- It exits 0 when the agent says the run is finished, and also 0 when no agent has been connected for
  ``idle_timeout`` seconds (the agent is gone for good). SIGTERM/SIGINT end it within about a second
  with exit code 143 (nothing to checkpoint on this side).

Environment variables: ``RLCLOUD_PORT`` (default 5000), ``RLCLOUD_BIND_HOST`` (default 0.0.0.0; the
local backend uses 127.0.0.1), ``RLCLOUD_IDLE_TIMEOUT`` (seconds, default 900).
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rlcloud.errors import SpecError, WorkloadError
from rlcloud.roles import Role, role_label
from rlcloud.runenv import RunnerEnv
from rlcloud.runner.protocol import (
    PROTOCOL_VERSION,
    ProtocolError,
    configure_socket,
    encode_spec,
    recv_message,
    send_message,
)
from rlcloud.runner.watchdog import beat, heartbeat_path

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_PORT",
    "EXIT_CONSTRUCTION",
    "EXIT_FINISHED",
    "EXIT_TERMINATED",
    "EnvServer",
    "ServedEnvironment",
    "run_env_server",
    "serve_environment",
]

logger = logging.getLogger(__name__)

DEFAULT_PORT = 5000
#: Exit when no agent has been connected for this long (it may take minutes to be scheduled on a cluster).
DEFAULT_IDLE_TIMEOUT = 900.0
EXIT_FINISHED = 0
EXIT_CONSTRUCTION = 3
EXIT_TERMINATED = 143
# Reading the rest of a message that has started arriving should never take long; a peer that stalls
# mid-message is treated as gone.
_MESSAGE_TIMEOUT = 60.0
# A new connection has this long to say hello before it is closed (probes send nothing and hang up).
_HELLO_TIMEOUT = 10.0
_POLL = 0.5  # how often the loop looks at the stop flag


class ServedEnvironment(Protocol):
    """What the server needs from an environment: the runner's ``EnvAdapter`` interface
    (:mod:`rlcloud.runner.envs`; terminal 0 running, 1 terminated, 2 truncated)."""

    states_spec: dict[str, Any]
    actions_spec: dict[str, Any]
    max_episode_timesteps: int | None

    def reset(self, seed: int | None = None) -> Any:
        """Start an episode; the first state."""

    def step(self, action: Any) -> tuple[Any, float, int]:
        """(state, reward, terminal 0/1/2) after ``action``."""

    def close(self) -> None:
        """Release the environment."""


class EnvServer:
    """Serve an environment (or several, one per slot) to one agent at a time over TCP (see the module
    docstring).

    ``environment`` is one environment or a sequence of them (slot 0, 1, ...; the same environment, built
    once per slot). ``seed`` seeds slot ``k``'s first episode with ``seed + k``. ``port=0`` picks a free port
    (read :attr:`port` after construction). :meth:`serve` runs until the agent finishes, the idle timeout
    passes, or :meth:`stop` is called, and returns the exit code.
    """

    def __init__(
        self,
        environment: ServedEnvironment | Sequence[ServedEnvironment],
        *,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        name: str = Role.ENV_SERVER.value,
        seed: int | None = None,
        heartbeat: Path | None = None,
    ) -> None:
        self.environments: list[ServedEnvironment] = (
            list(environment) if isinstance(environment, Sequence) else [environment]
        )
        if not self.environments:
            raise WorkloadError("EnvServer needs at least one environment")
        # Seed the first episode of each slot only: a reconnecting agent continues the random streams
        # rather than replaying the same episodes.
        self._seeds: list[int | None] = [None if seed is None else seed + k for k in range(len(self.environments))]
        self.idle_timeout = idle_timeout
        self.name = name
        #: the heartbeat file, touched by the request loop (None: none kept)
        self.heartbeat = heartbeat
        self._beat_at = 0.0
        self._listener = socket.create_server((host, port), reuse_port=False)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._conn: socket.socket | None = None
        self._pending: set[socket.socket] = set()  # accepted, hello not read yet
        self._needs_reset = set(range(len(self.environments)))  # slots not reset on this connection yet
        self._idle_since = time.monotonic()
        # Counters for the periodic log line; the agent keeps the real ones.
        self.steps = 0
        self.episodes = 0
        self.connections = 0
        self._episode_returns = [0.0] * len(self.environments)
        self._returns: list[float] = []

    def stop(self) -> None:
        """Ask :meth:`serve` to return (thread- and signal-safe)."""
        self._stop.set()

    def serve(self) -> int:
        """Serve until finished (0), idle for ``idle_timeout`` (0), or stopped (143)."""
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "listener")
        self._idle_since = time.monotonic()
        last_report = time.monotonic()
        logger.info("%s listening on port %d (idle timeout %g s)", self.name, self.port, self.idle_timeout)
        try:
            while not self._stop.is_set():
                self._beat()
                if self._conn is None and time.monotonic() - self._idle_since >= self.idle_timeout:
                    logger.info(
                        "%s: no agent for %g s, assuming it is gone for good; exiting",
                        self.name,
                        self.idle_timeout,
                    )
                    return EXIT_FINISHED
                for key, _ in selector.select(timeout=_POLL):
                    if key.data == "listener":
                        self._accept(selector)
                    elif key.data == "pending":
                        self._greet(selector, key.fileobj)  # type: ignore[arg-type]
                    elif self._handle(selector):
                        logger.info("%s: the agent finished the run; exiting", self.name)
                        return EXIT_FINISHED
                if time.monotonic() - last_report >= 60:
                    last_report = time.monotonic()
                    self._report()
            logger.info("%s stopped by a signal; exiting", self.name)
            return EXIT_TERMINATED
        finally:
            self._drop(selector)
            for sock in list(self._pending):
                self._discard(selector, sock)
            selector.close()
            self._listener.close()
            self._report()
            if self.heartbeat is not None:  # ended: nothing to watch (a new server starts its own)
                with contextlib.suppress(OSError):
                    self.heartbeat.unlink()

    def _beat(self) -> None:
        """Touch the heartbeat (at most once a second): this loop went round, so no request hangs."""
        now = time.monotonic()
        if self.heartbeat is not None and now - self._beat_at >= 1.0:
            self._beat_at = now
            beat(self.heartbeat)

    def _report(self) -> None:
        recent = self._returns[-20:]
        mean = f"{sum(recent) / len(recent):.1f}" if recent else "n/a"
        logger.info(
            "%s: %d steps, %d episodes, %d agent connections, mean return (last %d) %s",
            self.name,
            self.steps,
            self.episodes,
            self.connections,
            len(recent),
            mean,
        )

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            conn, _peer = self._listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(True)
        conn.settimeout(_HELLO_TIMEOUT)
        configure_socket(conn)
        self._pending.add(conn)
        selector.register(conn, selectors.EVENT_READ, "pending")

    def _discard(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        self._pending.discard(sock)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _greet(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        """Read a new connection's hello: an agent replaces the current one; anything else is closed."""
        try:
            header, _ = recv_message(sock)
        except (OSError, ProtocolError) as exc:
            logger.debug("%s: a connection closed without a hello (%s)", self.name, exc or type(exc).__name__)
            self._discard(selector, sock)
            return
        try:
            if header["type"] != "hello" or header.get("protocol") != PROTOCOL_VERSION:
                send_message(
                    sock,
                    {
                        "type": "error",
                        "message": (
                            f"expected hello with protocol {PROTOCOL_VERSION}, got {header['type']!r} "
                            f"with protocol {header.get('protocol')!r}: run the same rlcloud version on both"
                        ),
                    },
                )
                self._discard(selector, sock)
                return
            peer = sock.getpeername()[0]
            if self._conn is not None:
                logger.warning("%s: a new agent connected from %s; dropping the previous connection", self.name, peer)
                self._drop(selector)
            else:
                logger.info("%s: agent connected from %s", self.name, peer)
            self._pending.discard(sock)
            selector.modify(sock, selectors.EVENT_READ, "agent")
            sock.settimeout(_MESSAGE_TIMEOUT)
            self._conn = sock
            self._needs_reset = set(range(len(self.environments)))
            self.connections += 1
            self._send_spec(sock)
        except OSError as exc:
            logger.warning("%s: a new agent went away during its hello (%s)", self.name, exc or type(exc).__name__)
            if sock is self._conn:
                self._drop(selector)
            else:
                self._discard(selector, sock)

    def _send_spec(self, sock: socket.socket) -> None:
        env = self.environments[0]
        send_message(
            sock,
            {
                "type": "spec",
                "protocol": PROTOCOL_VERSION,
                "states_spec": encode_spec(env.states_spec),
                "actions_spec": encode_spec(env.actions_spec),
                "max_episode_timesteps": _optional_int(env.max_episode_timesteps),
                "name": self.name,
                "slots": len(self.environments),
            },
        )

    def _drop(self, selector: selectors.BaseSelector) -> None:
        if self._conn is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(self._conn)
        with contextlib.suppress(OSError):
            self._conn.close()
        self._conn = None
        self._idle_since = time.monotonic()
        self._episode_returns = [0.0] * len(self.environments)

    def _connection_lost(self, selector: selectors.BaseSelector, exc: BaseException) -> None:
        """The agent's connection broke: drop it and keep serving, the agent reconnects after a restart."""
        logger.warning(
            "%s: agent connection lost (%s); waiting for it to reconnect", self.name, exc or type(exc).__name__
        )
        self._drop(selector)

    def _handle(self, selector: selectors.BaseSelector) -> bool:
        """Answer one request. True when the agent said the run is finished."""
        conn = self._conn
        assert conn is not None
        try:
            header, values = recv_message(conn)
        except (OSError, ProtocolError) as exc:
            self._connection_lost(selector, exc)
            return False
        kind = header["type"]
        try:
            if kind == "hello":  # the same agent again on its connection: the spec, nothing else
                self._send_spec(conn)
            elif kind == "reset":
                slot = self._slot(header)
                states = self.environments[slot].reset(seed=self._seeds[slot])
                self._seeds[slot] = None
                self._needs_reset.discard(slot)
                self._episode_returns[slot] = 0.0
                send_message(conn, {"type": "states"}, {"states": states})
            elif kind == "step":
                slot = self._slot(header)
                if slot in self._needs_reset:
                    send_message(conn, {"type": "error", "message": "step before reset on this connection"})
                    return False
                if "actions" not in values:
                    raise ProtocolError("step without actions")
                env = self.environments[slot]
                states, reward, terminal = env.step(_to_env_actions(values["actions"]))
                terminal = int(terminal)
                reward = float(reward)
                self.steps += 1
                self._episode_returns[slot] += reward
                if terminal:
                    # Same-step autoreset: the agent gets the next episode's first states right away.
                    self.episodes += 1
                    self._returns.append(self._episode_returns[slot])
                    del self._returns[:-100]
                    self._episode_returns[slot] = 0.0
                    states = env.reset()
                send_message(conn, {"type": "result", "reward": reward, "terminal": terminal}, {"states": states})
            elif kind == "close":
                finished = bool(header.get("finished"))
                send_message(conn, {"type": "bye"})
                self._drop(selector)
                if not finished:
                    logger.info("%s: the agent disconnected for a restart; waiting for it", self.name)
                return finished
            else:
                raise ProtocolError(f"unknown request type {kind!r}")
        except (OSError, ProtocolError) as exc:
            self._connection_lost(selector, exc)
        except Exception as exc:
            # The environment itself failed: tell the agent (its error names this server) and crash, so
            # the process exit code says so too.
            logger.exception("%s: the environment failed on %r", self.name, kind)
            with contextlib.suppress(OSError):
                send_message(conn, {"type": "error", "message": f"{self.name}: {type(exc).__name__}: {exc}"})
            raise
        return False

    def _slot(self, header: Mapping[str, Any]) -> int:
        slot = header.get("slot", 0)
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < len(self.environments):
            raise ProtocolError(f"slot {slot!r} is not one of this server's {len(self.environments)} environment(s)")
        return slot


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _to_env_actions(actions: Any) -> Any:
    """Arrays from the wire are read-only views of the message buffer: give the environment its own
    writable copies (the adapter turns 0-d arrays into scalars where the environment wants them)."""
    if isinstance(actions, Mapping):
        return {key: _to_env_actions(value) for key, value in actions.items()}
    return np.array(actions)


def _install_signal_handlers(server: EnvServer) -> Callable[[], None]:
    """SIGTERM/SIGINT stop the server; returns a function that restores the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handler(signum: int, frame: Any) -> None:
        server.stop()

    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def serve_environment(
    environment: ServedEnvironment | Sequence[ServedEnvironment],
    *,
    index: int = 0,
    seed: int | None = None,
    environ: Mapping[str, str] | None = None,
    heartbeat: Path | None = None,
) -> int:
    """Serve ``environment`` (one, or one per slot) as env server ``index`` with settings from the
    environment variables (``RLCLOUD_PORT``, ``RLCLOUD_BIND_HOST``, ``RLCLOUD_IDLE_TIMEOUT``); return the
    exit code.

    SIGTERM/SIGINT stop it (143). The environments are closed when the server ends.
    """
    env = RunnerEnv.from_env(environ)
    server = EnvServer(
        environment,
        host=env.bind_host or "0.0.0.0",
        port=DEFAULT_PORT if env.port is None else env.port,
        idle_timeout=env.idle_timeout or DEFAULT_IDLE_TIMEOUT,
        name=role_label(Role.ENV_SERVER, index),
        seed=seed,
        heartbeat=heartbeat,
    )
    restore = _install_signal_handlers(server)
    try:
        return server.serve()
    finally:
        restore()
        for each in server.environments:
            try:
                each.close()
            except Exception:  # closing must not mask the exit code
                logger.warning("env-server-%d: closing the environment failed", index, exc_info=True)


def run_env_server(
    spec: ExperimentSpec,
    *,
    index: int = 0,
    workdir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """The env-server role: build the experiment's environment (same adapter, step limit and action
    repeat as every other run mode; once per slot: ``envs_per_server``) and serve it;
    return the process exit code.

    A SpecError propagates (the runner exits 2); any other error building the environment is logged and
    gives exit code 3 (do not retry).
    ``workdir``: where its heartbeat file is kept (``.heartbeat/env-server-<index>``); nothing else is
    written there.
    """
    from rlcloud.runner.envs import make_env

    environments: list[ServedEnvironment] = []
    try:
        for _ in range(spec.servers_envs):
            environments.append(
                make_env(
                    spec.environment,
                    repeat_actions=spec.repeat_actions,
                    max_timesteps_per_episode=spec.max_timesteps_per_episode,
                )
            )
    except SpecError:
        raise
    except Exception:
        # e.g. gymnasium.make() rejecting a keyword argument: retrying cannot help (docs/contracts.md).
        logger.exception("env-server-%d: could not build the environment %s", index, spec.environment)
        return EXIT_CONSTRUCTION
    seed = spec.seed
    # Distinct, reproducible streams per server (slot k: + k); far apart so that neighbouring seeds do not
    # overlap.
    heartbeat = None if workdir is None else heartbeat_path(workdir, role_label(Role.ENV_SERVER, index))
    return serve_environment(
        environments,
        index=index,
        seed=None if seed is None else seed + 1000 * (index + 1),
        environ=environ,
        heartbeat=heartbeat,
    )
