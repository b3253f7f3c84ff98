"""The wire protocol between the distributed learner (:mod:`rlcloud.runner.remote`) and its env servers
(:mod:`rlcloud.runner.envserver`): message framing, the encoding of states/actions specs, the protocol
version, and the socket options and timeout settings both ends share.

The wire protocol is rlcloud's own and never unpickles anything from the network. A message is::

    !II                   header length, payload length (unsigned 32-bit, big-endian)
    header                UTF-8 JSON object: {"type": ..., ..., "arrays": [[name, dtype, shape], ...]}
    payload               the arrays' raw bytes (C order), one after another, in "arrays" order

Only numeric/boolean dtypes are accepted, and sizes are bounded, so a stray client cannot make a
process allocate without limit or run code. Conversation (the agent speaks first, the server answers
every request with exactly one message)::

    hello {protocol}                -> spec {states_spec, actions_spec, max_episode_timesteps, name, slots}
    reset {slot}                    -> states [states]
    step {slot} [actions]           -> result {reward, terminal} [states]   (same-step autoreset: after
                                                                               a terminal, the states
                                                                               are the next episode's)
    close {finished}                -> bye                                  (finished: the server exits)
    any request that fails          -> error {message}

A server hosts ``slots`` environments (1, or 2 for overlapped stepping), stepped one request at a time in
the order the requests arrive; ``slot`` (default 0) says which one a reset or step is for.
"""

from __future__ import annotations

import json
import math
import socket
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlcloud.errors import WorkloadError

__all__ = [
    "PROTOCOL_VERSION",
    "ProtocolError",
    "configure_socket",
    "decode_spec",
    "encode_spec",
    "recv_message",
    "send_message",
]

#: Sent in ``hello`` and ``spec``: both ends must speak the same version (2: environment slots).
PROTOCOL_VERSION = 2
_PREFIX = struct.Struct("!II")
_MAX_HEADER = 1 << 20  # 1 MiB of JSON is far more than any spec or step needs
_MAX_PAYLOAD = 1 << 30  # 1 GiB: a batch of Atari frames is a few hundred KiB
_ALLOWED_KINDS = frozenset("biuf")  # bool, signed, unsigned, float; never object/void/str


class ProtocolError(WorkloadError):
    """A peer sent something that is not a valid rlcloud env-server message."""


# --------------------------------------------------------------------------------------------- framing


def _array_entries(prefix: str, value: Any, out: list[tuple[str, np.ndarray]]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if "/" in str(key):
                raise ProtocolError(f"state/action name {key!r} must not contain '/'")
            _array_entries(f"{prefix}/{key}", item, out)
        return
    array = np.asarray(value, order="C")  # ascontiguousarray would turn a 0-d array into 1-d
    if array.dtype.kind not in _ALLOWED_KINDS:
        raise ProtocolError(f"{prefix}: dtype {array.dtype} cannot be sent (numeric or bool arrays only)")
    out.append((prefix, array))


def send_message(sock: socket.socket, header: Mapping[str, Any], values: Mapping[str, Any] | None = None) -> None:
    """Send one framed message: a JSON header plus named arrays (or dicts of arrays) as raw bytes."""
    entries: list[tuple[str, np.ndarray]] = []
    for name, value in (values or {}).items():
        _array_entries(name, value, entries)
    head = dict(header)
    head["arrays"] = [[name, array.dtype.str, list(array.shape)] for name, array in entries]
    head_bytes = json.dumps(head, separators=(",", ":")).encode()
    payload_len = sum(array.nbytes for _, array in entries)
    if len(head_bytes) > _MAX_HEADER or payload_len > _MAX_PAYLOAD:
        raise ProtocolError(f"message too large (header {len(head_bytes)} B, payload {payload_len} B)")
    parts: list[bytes] = [_PREFIX.pack(len(head_bytes), payload_len), head_bytes]
    parts.extend(array.tobytes() for _, array in entries if array.nbytes)
    # One sendall of the joined bytes: a step message is a few hundred bytes, and one segment per
    # message (with TCP_NODELAY) is what keeps the round trip short.
    sock.sendall(b"".join(parts))


def _recv_exact(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise ConnectionResetError("connection closed by the peer")
        got += n
    return buffer


def recv_message(sock: socket.socket) -> tuple[dict[str, Any], dict[str, Any]]:
    """Receive one framed message: ``(header, values)``; values are arrays or dicts of arrays.

    Raises ``ConnectionError`` when the peer is gone, :class:`ProtocolError` on malformed input.
    """
    head_len, payload_len = _PREFIX.unpack(_recv_exact(sock, _PREFIX.size))
    if head_len > _MAX_HEADER or payload_len > _MAX_PAYLOAD:
        raise ProtocolError(f"message too large (header {head_len} B, payload {payload_len} B)")
    # Header and payload in one read: one system call per message on the hot path (a step).
    body = memoryview(_recv_exact(sock, head_len + payload_len))
    try:
        header = json.loads(bytes(body[:head_len]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"message header is not JSON: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise ProtocolError("message header must be a JSON object with a string 'type'")
    payload = body[head_len:]
    values: dict[str, Any] = {}
    offset = 0
    try:
        for name, dtype_str, shape in header.pop("arrays", []):
            dtype = np.dtype(dtype_str)
            if dtype.kind not in _ALLOWED_KINDS or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ProtocolError(f"array {name!r}: bad dtype {dtype_str!r} or shape {shape!r}")
            nbytes = dtype.itemsize * math.prod(shape)
            if offset + nbytes > payload_len:
                raise ProtocolError(f"array {name!r} runs past the payload")
            array = np.frombuffer(payload, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
            offset += nbytes
            *parents, leaf = str(name).split("/")
            node = values
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = array
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"bad array table in message header: {exc}") from exc
    if offset != payload_len:
        raise ProtocolError(f"payload has {payload_len - offset} unexplained bytes")
    return header, values


# ------------------------------------------------------------------------------------- spec encoding


def encode_spec(value: Any) -> Any:
    """Make a Tensorforce states/actions spec JSON-safe (numpy arrays and scalars, tuples)."""
    if isinstance(value, Mapping):
        return {str(k): encode_spec(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return [encode_spec(v) for v in value]
    if isinstance(value, type):  # e.g. type=int in a hand-written spec
        return value.__name__
    return value


def decode_spec(value: Any) -> Any:
    """Inverse of :func:`encode_spec`: arrays come back as numpy arrays, ``shape`` as a tuple."""
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return np.asarray(value["__ndarray__"], dtype=np.dtype(value["dtype"]))
        return {k: (tuple(v) if k == "shape" and isinstance(v, list) else decode_spec(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_spec(v) for v in value]
    return value


# -------------------------------------------------------------------------------------------- sockets


def configure_socket(sock: socket.socket) -> None:
    """TCP_NODELAY (one small message per step) and keepalive (notice a peer whose host vanished)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
