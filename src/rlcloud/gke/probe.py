"""``python -m rlcloud.gke.doctor probe``: the program ``rlcloud doctor --smoke`` runs in a pod of the cluster
(:mod:`rlcloud.smoke`): it writes and reads back an object in the results store with the pod's own identity
(Workload Identity), and, when it was given a GPU, asks TensorFlow to see it and compute on it; one line per
step, ``rlcloud-smoke {json}``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from rlcloud.gke.checks import _describe
from rlcloud.runenv import RunnerEnv

__all__ = ["PROBE_LINE", "PROBE_OBJECT", "main", "probe"]

#: how the probe's lines start in the pod's log
PROBE_LINE = "rlcloud-smoke "
#: the object the probe writes in its results location (the smoke reads it back from outside, then deletes it)
PROBE_OBJECT = "smoke/probe.json"


# ------------------------------------------------------------------------------ the smoke test's in-pod probe


def _probe_gpu(gpus: int) -> tuple[str, str]:
    if not gpus:
        return "SKIP", "no GPU in this pool"
    import tensorflow as tf

    found = tf.config.list_physical_devices("GPU")
    if not found:
        return "FAIL", (
            f"TensorFlow sees no GPU ({gpus} requested): the node's NVIDIA driver is missing or too old for the "
            "image's CUDA, or the image has no CUDA libraries"
        )
    names = [str(tf.config.experimental.get_device_details(d).get("device_name") or d.name) for d in found]
    # a kernel must run, not just be listed: on Hopper TensorFlow JIT-compiles PTX with the node's driver
    with tf.device("/GPU:0"):
        value = float(tf.reduce_sum(tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]))))
    if value != 64.0**3:
        return "FAIL", f"TensorFlow sees {', '.join(names)}, but a 64x64 matmul on it gave {value:g}"
    return "OK", f"TensorFlow sees {len(found)} GPU(s) ({', '.join(names)}) and computed on /GPU:0"


def _probe_store(results: str, token: str) -> tuple[str, str]:
    from rlcloud.storage import open_store

    body = json.dumps({"token": token, "written": time.time()})
    with open_store(results) as store:
        store.write_text(PROBE_OBJECT, body)
        back = store.read_text(PROBE_OBJECT)
    if back != body:
        return "FAIL", f"{results}/{PROBE_OBJECT} read back differs from what was written"
    return "OK", f"wrote and read back {results}/{PROBE_OBJECT} with the pod's identity"


def probe(results: str, *, token: str, gpus: int, emit: Callable[[dict[str, Any]], None] | None = None) -> int:
    """The smoke test's work inside a pod: the results store (write, read back), then the GPU (TensorFlow sees
    and computes on it; SKIP when ``gpus`` is 0). Each step is ``emit``-ted as ``{"step", "status", "detail",
    "seconds"}`` (default: printed as a ``rlcloud-smoke {json}`` line). Returns 0, or 1 when a step failed."""

    def printed(step: dict[str, Any]) -> None:
        print(PROBE_LINE + json.dumps(step), flush=True)

    out = emit or printed
    statuses = []
    steps: tuple[tuple[str, Callable[[], tuple[str, str]]], ...] = (
        ("results-store", lambda: _probe_store(results, token)),
        ("gpu", lambda: _probe_gpu(gpus)),
    )
    for name, work in steps:
        started = time.monotonic()
        try:
            status, detail = work()
        except Exception as exc:  # the step's answer: a denied write, no TensorFlow, a CUDA error
            status, detail = "FAIL", _describe(exc)
        out({"step": name, "status": status, "detail": detail, "seconds": round(time.monotonic() - started, 3)})
        statuses.append(status)
    return 1 if "FAIL" in statuses else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlcloud.gke.doctor probe [--results URL] --token T [--gpus N]``: the smoke test's pod program."""
    parser = argparse.ArgumentParser(prog="python -m rlcloud.gke.doctor")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("probe", help="the in-pod half of `rlcloud doctor --smoke`")
    run.add_argument("--results", default=RunnerEnv.from_env().results, help="default: $RLCLOUD_RESULTS")
    run.add_argument("--token", required=True, help="written to the store, for the caller to read back")
    run.add_argument("--gpus", type=int, default=0, help="GPUs this pod was given (0: skip the GPU step)")
    args = parser.parse_args(argv)
    if not args.results:
        parser.error("no --results and no $RLCLOUD_RESULTS")
    return probe(args.results, token=args.token, gpus=args.gpus)
