"""Distributed mode without TensorFlow: the wire protocol, env servers and RemoteVectorEnv over real TCP.

Servers run in threads here (fast); tests/runner/test_distributed.py runs them as real processes.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from rlcloud.errors import RLCloudError, WorkloadError
from rlcloud.runner.envs import make_env
from rlcloud.runner.envserver import EXIT_FINISHED, EXIT_TERMINATED, EnvServer
from rlcloud.runner.protocol import (
    PROTOCOL_VERSION,
    ProtocolError,
    decode_spec,
    encode_spec,
    recv_message,
    send_message,
)
from rlcloud.runner.remote import (
    EnvServerError,
    EnvServersUnreachableError,
    RemoteVectorEnv,
    ServerAddress,
    parse_env_servers,
)
from rlcloud.runner.vector import VectorEnv

CARTPOLE = {"type": "gym", "level": "CartPole-v1"}


class ThreadedServer:
    """An EnvServer running in a thread; ``result`` holds serve()'s exit code once it returns."""

    def __init__(
        self,
        port: int = 0,
        idle_timeout: float = 30.0,
        max_steps: int | None = None,
        environment: dict | None = None,
        slots: int = 1,
    ) -> None:
        envs = [make_env(environment or CARTPOLE, max_timesteps_per_episode=max_steps) for _ in range(slots)]
        self.server = EnvServer(envs, host="127.0.0.1", port=port, idle_timeout=idle_timeout, seed=1)
        self.port = self.server.port
        self.result: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.result = self.server.serve()

    def stop(self) -> int | None:
        self.server.stop()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()
        return self.result


@pytest.fixture
def servers() -> Iterator[list[ThreadedServer]]:
    started = [ThreadedServer(max_steps=20), ThreadedServer(max_steps=20)]
    yield started
    for s in started:
        s.stop()


@pytest.fixture
def two_slot_servers() -> Iterator[list[ThreadedServer]]:
    started = [ThreadedServer(max_steps=20, slots=2), ThreadedServer(max_steps=20, slots=2)]
    yield started
    for s in started:
        s.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _address(port: int) -> ServerAddress:
    return ServerAddress(name=f"127.0.0.1:{port}", host="127.0.0.1", port=port)


# ------------------------------------------------------------------------------------------- framing


def test_message_round_trip_keeps_dtypes_shapes_and_dicts() -> None:
    a, b = socket.socketpair()
    with a, b:
        values = {
            "states": {"image": np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "speed": np.float32(1.5)},
            "actions": np.array([True, False]),
        }
        send_message(a, {"type": "step", "reward": 1.25}, values)
        header, got = recv_message(b)
    assert header == {"type": "step", "reward": 1.25}
    assert got["states"]["image"].dtype == np.uint8 and got["states"]["image"].shape == (2, 3, 4)
    np.testing.assert_array_equal(got["states"]["image"], values["states"]["image"])
    assert got["states"]["speed"].shape == () and got["states"]["speed"] == np.float32(1.5)
    np.testing.assert_array_equal(got["actions"], [True, False])


def test_object_arrays_are_refused_on_both_ends() -> None:
    a, b = socket.socketpair()
    with a, b:
        with pytest.raises(ProtocolError, match="dtype object"):
            send_message(a, {"type": "x"}, {"states": np.array([object()])})
        # A hand-made message that claims an object array is refused before anything is interpreted.
        header = json.dumps({"type": "x", "arrays": [["states", "|O", [1]]]}).encode()
        a.sendall(struct.pack("!II", len(header), 8) + header + b"\0" * 8)
        with pytest.raises(ProtocolError, match="bad dtype"):
            recv_message(b)


def test_oversized_and_malformed_messages_are_protocol_errors() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("!II", 1 << 30, 0))
        with pytest.raises(ProtocolError, match="too large"):
            recv_message(b)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("!II", 5, 0) + b"nope!")
        with pytest.raises(ProtocolError, match="not JSON"):
            recv_message(b)
    a, b = socket.socketpair()
    with a, b:
        header = json.dumps({"type": "x", "arrays": [["s", "<f8", [4]]]}).encode()
        a.sendall(struct.pack("!II", len(header), 8) + header + b"\0" * 8)  # 8 bytes for 32 claimed
        with pytest.raises(ProtocolError, match="past the payload"):
            recv_message(b)


def test_spec_encoding_round_trips_numpy_bounds_and_shapes() -> None:
    spec = {"type": "float", "shape": (4,), "min_value": np.array([-1.0, -2.0], dtype=np.float32), "x": np.int64(3)}
    back = decode_spec(json.loads(json.dumps(encode_spec(spec))))
    assert back["shape"] == (4,) and back["x"] == 3
    assert back["min_value"].dtype == np.float32
    np.testing.assert_array_equal(back["min_value"], [-1.0, -2.0])


def test_env_servers_and_host_map_are_parsed_with_clear_errors() -> None:
    servers = parse_env_servers(
        "exp-env-0.exp:5000, exp-env-1.exp:5000,10.0.0.3:7000",
        "exp-env-0.exp=127.0.0.1:41000,exp-env-1.exp:5000=127.0.0.1:41001",
    )
    assert [(s.host, s.port) for s in servers] == [("127.0.0.1", 41000), ("127.0.0.1", 41001), ("10.0.0.3", 7000)]
    assert str(servers[0]) == "exp-env-0.exp:5000 (127.0.0.1:41000)"
    with pytest.raises(WorkloadError, match="RLCLOUD_ENV_SERVERS is empty"):
        parse_env_servers("")
    with pytest.raises(WorkloadError, match="not host:port"):
        parse_env_servers("exp-env-0.exp")
    with pytest.raises(WorkloadError, match="RLCLOUD_HOST_MAP"):
        parse_env_servers("a:1", "a")


# ------------------------------------------------------------------------------ servers and the vector


def test_remote_vector_env_steps_all_servers_with_same_step_autoreset(servers: list[ThreadedServer]) -> None:
    venv = RemoteVectorEnv([_address(s.port) for s in servers], connect_timeout=10)
    try:
        assert isinstance(venv, VectorEnv)
        assert venv.num_envs == 2
        assert venv.states_spec["shape"] == (4,)
        assert venv.actions_spec == {"type": "int", "shape": (), "num_values": 2}
        assert venv.max_episode_timesteps == 20
        states = venv.reset()
        assert states.shape == (2, 4) and states.dtype == np.float32
        ends = np.zeros(2, dtype=int)
        for t in range(45):
            states, rewards, terminals = venv.step(np.array([t % 2, 1 - t % 2]))
            assert states.shape == (2, 4)
            assert rewards.tolist() == [1.0, 1.0]
            assert set(terminals.tolist()) <= {0, 1, 2}
            ends += terminals > 0
        # CartPole with alternating actions lasts the full 20 steps (truncated, terminal 2) and
        # resets on the same step, so both rows ended at least twice in 45 steps.
        assert (ends >= 2).all()
        assert servers[0].server.steps == 45 and servers[0].server.episodes >= 2
    finally:
        venv.close(finished=False)


def test_agent_finishing_ends_the_servers_and_a_restart_does_not(servers: list[ThreadedServer]) -> None:
    addresses = [_address(s.port) for s in servers]
    first = RemoteVectorEnv(addresses, connect_timeout=10)
    first.reset()
    first.step(np.array([0, 1]))
    first.close(finished=False)  # e.g. SIGTERM for a restart: the servers wait for the next agent
    assert all(s.thread.is_alive() for s in servers)
    second = RemoteVectorEnv(addresses, connect_timeout=10)
    second.reset()
    second.step(np.array([1, 0]))
    second.close()  # finished
    for s in servers:
        s.thread.join(timeout=10)
        assert s.result == EXIT_FINISHED
    assert [s.server.connections for s in servers] == [2, 2]


def test_a_new_agent_connection_replaces_a_stale_one(servers: list[ThreadedServer]) -> None:
    addresses = [_address(s.port) for s in servers]
    stale = RemoteVectorEnv(addresses, connect_timeout=10)
    stale.reset()
    # The old agent never said goodbye (its host vanished): the new one is served anyway, from a reset.
    fresh = RemoteVectorEnv(addresses, connect_timeout=10)
    states = fresh.reset()
    assert states.shape == (2, 4)
    fresh.step(np.array([0, 0]))
    fresh.close()
    stale.close(finished=False)  # the servers dropped its connections: the goodbye goes nowhere, quietly
    for s in servers:
        s.thread.join(timeout=10)
        assert s.result == EXIT_FINISHED


def test_server_that_dies_mid_run_is_reconnected_and_its_episode_truncated() -> None:
    keep = ThreadedServer()
    dies = ThreadedServer()
    port = dies.port
    venv = RemoteVectorEnv([_address(keep.port), _address(port)], connect_timeout=20)
    try:
        venv.reset()
        venv.step(np.array([0, 1]))
        dies.stop()
        back: list[ThreadedServer] = []
        timer = threading.Timer(0.5, lambda: back.append(ThreadedServer(port=port)))
        timer.start()
        states, rewards, terminals = venv.step(np.array([1, 0]))
        timer.join()
        assert terminals.tolist()[1] == 2 and rewards.tolist()[1] == 0.0
        assert terminals.tolist()[0] == 0 and rewards.tolist()[0] == 1.0
        assert states.shape == (2, 4)
        assert venv.reconnects == 1
        for _ in range(5):
            _, rewards, _ = venv.step(np.array([0, 1]))
        assert rewards.tolist() == [1.0, 1.0]
        assert back[0].server.steps == 5
    finally:
        venv.close()
        keep.thread.join(timeout=10)
        back[0].thread.join(timeout=10)
    assert keep.result == EXIT_FINISHED and back[0].result == EXIT_FINISHED


def test_unreachable_servers_fail_with_an_error_naming_them() -> None:
    up = ThreadedServer()
    missing = _free_port()
    try:
        with pytest.raises(EnvServersUnreachableError) as info:
            RemoteVectorEnv(
                [_address(up.port), ServerAddress(f"exp-env-1.exp:{missing}", "127.0.0.1", missing)],
                connect_timeout=1.0,
            )
    finally:
        up.stop()
    error = info.value
    assert error.servers == [f"exp-env-1.exp:{missing} (127.0.0.1:{missing})"]
    assert "1 of 2 env servers not reachable after 1 s: exp-env-1.exp" in str(error)
    assert isinstance(error, RLCloudError) and isinstance(error, TimeoutError)


def test_env_server_exits_when_no_agent_comes_and_on_stop() -> None:
    idle = ThreadedServer(idle_timeout=0.3)
    idle.thread.join(timeout=10)
    assert idle.result == EXIT_FINISHED
    stopped = ThreadedServer(idle_timeout=60)
    assert stopped.stop() == EXIT_TERMINATED


def test_env_server_refuses_steps_before_reset_and_unknown_requests() -> None:
    srv = ThreadedServer()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            send_message(sock, {"type": "hello", "protocol": PROTOCOL_VERSION})
            assert recv_message(sock)[0]["type"] == "spec"
            send_message(sock, {"type": "step"}, {"actions": np.int64(0)})
            header, _ = recv_message(sock)
            assert header == {"type": "error", "message": "step before reset on this connection"}
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            # a slot the server does not host: the connection is dropped, the server keeps serving
            send_message(sock, {"type": "hello", "protocol": PROTOCOL_VERSION})
            assert recv_message(sock)[0]["slots"] == 1
            send_message(sock, {"type": "reset", "slot": 1})
            with pytest.raises((ConnectionError, ProtocolError)):
                recv_message(sock)
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            send_message(sock, {"type": "hello", "protocol": 99})
            header, _ = recv_message(sock)
            assert header["type"] == "error" and "with protocol 99" in header["message"]
        assert srv.thread.is_alive()
    finally:
        srv.stop()


def test_a_stop_request_ends_the_wait_for_servers_at_once() -> None:
    missing = _free_port()
    # Interrupted, not "not reachable after 600 s": the wait ended on the stop request.
    with pytest.raises(WorkloadError, match=r"^interrupted while waiting for env servers 127\.0\.0\.1:"):
        RemoteVectorEnv([_address(missing)], connect_timeout=600, should_stop=lambda: True)


def test_connections_without_a_hello_do_not_disturb_the_agent(servers: list[ThreadedServer]) -> None:
    addresses = [_address(s.port) for s in servers]
    venv = RemoteVectorEnv(addresses, connect_timeout=10)
    try:
        venv.reset()
        # A TCP readiness probe connects and hangs up; another client connects and says nothing.
        socket.create_connection(("127.0.0.1", servers[0].port), timeout=5).close()
        with socket.create_connection(("127.0.0.1", servers[0].port), timeout=5):
            for _ in range(5):
                _, rewards, _ = venv.step(np.array([0, 1]))
                assert rewards.tolist() == [1.0, 1.0]
        assert venv.reconnects == 0
        assert [s.server.connections for s in servers] == [1, 1]
    finally:
        venv.close()


# ------------------------------------------------------------------------------- overlapped stepping


def test_overlap_gives_every_server_two_environments_stepped_independently(
    two_slot_servers: list[ThreadedServer],
) -> None:
    venv = RemoteVectorEnv([_address(s.port) for s in two_slot_servers], connect_timeout=10, overlap=True)
    try:
        assert venv.overlap is True and venv.slots == 2 and venv.num_envs == 4
        first = venv.reset()
        # rows 0, 1: slot 0 of servers 0, 1; rows 2, 3: their slot 1 (seeded seed + 1: other episodes)
        assert first.shape == (4, 4) and not np.array_equal(first[0], first[2])
        venv.send_actions([2, 3], np.array([0, 0]))
        venv.send_actions([0, 1], np.array([1, 1]))
        with pytest.raises(WorkloadError, match="twice"):
            venv.send_actions([0], np.array([1]))
        states, rewards, terminals = venv.receive([0, 1])
        assert states.shape == (2, 4) and rewards.tolist() == [1.0, 1.0] and terminals.tolist() == [0, 0]
        assert states[0][1] > first[0][1]  # action 1 pushed the cart right: its velocity grew
        states, _, _ = venv.receive([2, 3])
        assert states[0][1] < first[2][1]
        with pytest.raises(WorkloadError, match="without actions"):
            venv.receive([1])
        ended = np.zeros(4, dtype=np.int64)
        for _ in range(25):  # past the 20-step limit: each environment ends its episodes on its own
            _, _, terminals = venv.step(np.zeros(4, dtype=np.int64))
            ended += terminals > 0
        assert (ended >= 1).all()
        venv.send_actions([0, 1, 2, 3], np.zeros(4, dtype=np.int64))  # left in flight: close reads them first
    finally:
        venv.close()
    for s in two_slot_servers:
        s.thread.join(timeout=10)
        assert s.result == EXIT_FINISHED
    assert [s.server.steps for s in two_slot_servers] == [27 * 2, 27 * 2]  # each slot: 1 + 25 + 1 steps
    assert [s.server.episodes for s in two_slot_servers] == [ended[0] + ended[2], ended[1] + ended[3]]


def test_servers_and_agent_must_agree_on_the_environments_per_server(
    servers: list[ThreadedServer], two_slot_servers: list[ThreadedServer]
) -> None:
    with pytest.raises(EnvServerError, match=r"hosts 1 environment\(s\), the agent expects 2"):
        RemoteVectorEnv([_address(s.port) for s in servers], connect_timeout=10, overlap=True)
    with pytest.raises(EnvServerError, match=r"hosts 2 environment\(s\), the agent expects 1"):
        RemoteVectorEnv([_address(two_slot_servers[0].port)], connect_timeout=10)


class _OneOfTwoDies:
    """Two env servers of two environments each and an overlapped agent on them; the second server can be
    stopped (:attr:`dies`) and brought back on its port half a second after :meth:`restart_soon`. On exit
    the agent finishes the run and the server that came back must have exited by itself."""

    def __enter__(self) -> _OneOfTwoDies:
        self.keep = ThreadedServer(slots=2)
        self.dies = ThreadedServer(slots=2)
        self.back: list[ThreadedServer] = []
        self.venv = RemoteVectorEnv(
            [_address(self.keep.port), _address(self.dies.port)], connect_timeout=20, overlap=True
        )
        self.venv.reset()
        return self

    def restart_soon(self) -> threading.Timer:
        port = self.dies.port
        timer = threading.Timer(0.5, lambda: self.back.append(ThreadedServer(port=port, slots=2)))
        timer.start()
        return timer

    def __exit__(self, *exc: object) -> None:
        self.venv.close()
        self.keep.thread.join(timeout=10)
        if self.back:
            self.back[0].thread.join(timeout=10)
        if exc[0] is None:
            assert self.back and self.back[0].result == EXIT_FINISHED


def test_a_server_that_dies_with_both_its_environments_in_flight_truncates_both() -> None:
    with _OneOfTwoDies() as pair:
        venv = pair.venv
        pair.dies.stop()
        venv.send_actions([0, 1], np.array([1, 1]))
        venv.send_actions([2, 3], np.array([0, 0]))
        _, rewards, terminals = venv.receive([0])
        assert terminals.tolist() == [0] and rewards.tolist() == [1.0]
        timer = pair.restart_soon()
        states, rewards, terminals = venv.receive([1, 2, 3])
        timer.join()
        # row 1 (its slot 0) and row 3 (its slot 1, whose step was lost with the connection too) end
        # truncated with new first states; row 2 on the other server is untouched
        assert terminals.tolist() == [2, 0, 2] and rewards.tolist() == [0.0, 1.0, 0.0]
        assert states.shape == (3, 4) and venv.reconnects == 1
        venv.send_actions([0, 1], np.array([1, 1]))
        venv.send_actions([2, 3], np.array([1, 1]))
        assert venv.receive([0, 1, 2, 3])[1].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert pair.back[0].server.steps == 2  # one step for each slot after its reset: nothing was stepped twice


def test_a_server_that_dies_between_its_two_environments_steps_comes_back_truncated() -> None:
    with _OneOfTwoDies() as pair:
        venv = pair.venv
        venv.send_actions([0, 1], np.array([1, 1]))
        venv.receive([0, 1])  # both slot 0 stepped; now slot 1 is not in flight and the server dies
        pair.dies.stop()
        timer = pair.restart_soon()
        venv.send_actions([2, 3], np.array([0, 0]))
        venv.send_actions([0, 1], np.array([0, 0]))
        _, rewards, terminals = venv.receive([2, 3])
        timer.join()
        assert terminals.tolist() == [0, 2] and rewards.tolist() == [1.0, 0.0]
        # its slot 0's step went to the lost connection too (or was never delivered): truncated as well
        _, rewards, terminals = venv.receive([0, 1])
        assert terminals.tolist() == [0, 2] and venv.reconnects == 1


class _RecordingAgent:
    """Not a Tensorforce agent: AgentCalls drives it through the public act/observe, which record the rows."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def act(self, states: np.ndarray, parallel: np.ndarray) -> np.ndarray:
        self.calls.append(("act", parallel.tolist()))
        return np.ones(len(parallel), dtype=np.int64)

    def observe(self, reward: np.ndarray, terminal: np.ndarray, parallel: np.ndarray) -> int:
        self.calls.append(("observe", parallel.tolist()))
        return 0


def test_three_environments_per_server_step_in_turn_with_the_agent_on_one_group() -> None:
    from rlcloud.runner.overlap import OverlappedStepper

    servers = [ThreadedServer(slots=3), ThreadedServer(slots=3)]
    venv = RemoteVectorEnv([_address(s.port) for s in servers], connect_timeout=10, overlap=True, slots=3)
    agent = _RecordingAgent()
    try:
        assert venv.num_envs == 6
        stepper = OverlappedStepper(agent, venv, venv.reset())
        stepped = [stepper.step()[0].tolist() for _ in range(6)]
        # groups are one environment of every server each, completed in a fixed round
        assert stepped == [[0, 1], [2, 3], [4, 5]] * 2
        assert agent.calls[:3] == [("act", [0, 1]), ("act", [2, 3]), ("act", [4, 5])]
        assert agent.calls[3:7] == [("observe", [0, 1]), ("act", [0, 1]), ("observe", [2, 3]), ("act", [2, 3])]
    finally:
        venv.close()
    for s in servers:
        s.thread.join(timeout=10)
        assert s.result == EXIT_FINISHED
        assert s.server.steps == 3 + 6  # the first step of every slot, then two rounds
    with pytest.raises(WorkloadError, match="needs 2 or more"):
        RemoteVectorEnv([_address(servers[0].port)], connect_timeout=1, overlap=True, slots=1)
