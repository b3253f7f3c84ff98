"""Trials side by side on one device: trial-steps per GPU-hour (on a GPU) or per core-hour (CPU), k = 1, 2, 4, 8.

    uv run --frozen python benchmarks/gpu_packing.py [--device auto|gpu|cpu] [--env cartpole|spaceinvaders|both]
        [--k 1,2,4,8] [--timesteps 6000] [--warmup 1000] [--cores N]

What a sweep's ``trials_per_gpu`` buys (issue 42): ``k`` trials of one environment train at once, each its own
process, as ``k`` pods sharing a GPU on a GKE time-sharing pool would (each pod one TensorFlow process). Each
trial is rlcloud's training loop (``rlcloud.runner.loop.Trainer``, single mode, one environment) on CartPole PPO
(examples/cartpole_ppo.yaml's agent) or Space Invaders DQN (examples/space_invaders_dqn.yaml's agent, replay
memory 10,000). Its first ``--warmup`` timesteps (TensorFlow tracing) are not measured.

* ``--device gpu``: every trial sees the GPU, with ``RLCLOUD_GPU_MEMORY_MB`` set as the sweep builder sets it
  for ``trials_per_gpu = k`` on the GPU type named by ``--gpu-type`` (default nvidia-l4): the per-process
  memory bound of runner/gpumem.py. Printed per k: steps/s of each trial, their sum (trial-steps/s of the
  GPU), trial-steps per GPU-hour, and the ratio to k = 1 (goal: >= 3x at k = 4 for CartPole). It refuses to run,
  saying so, when TensorFlow sees no GPU.
* ``--device cpu`` (the degraded mode, and what ``auto`` picks without a GPU): the trials share ``--cores`` CPU
  cores (default: every core this process may use; each trial pinned to them with sched_setaffinity, as a pod's
  CPU limit would hold them), and the figure is trial-steps per core-hour. This answers "trials per pod on CPU":
  k trials side by side in one pod of ``--cores`` cores.

A trial's rate is its post-warm-up timesteps over its own loop time. The device's rate is every trial's measured
timesteps over the span from the first measured start to the last end (trials start at different times under
load: a sum of their own rates would count what did not overlap twice); the script prints how much they overlapped.

Measured 2026-11-28 on the 2-core development VM (shared with seven other sessions), CPU mode only (no GPU
machine was available), CartPole PPO, one round each:

* load 3-5, 10,000 measured timesteps per trial, TensorFlow's default threads (``--timesteps 10000``):
  k = 1: 960 steps/s = 1,727,106 trial-steps per core-hour; k = 2: 1,309 steps/s, 1.36x (overlap 93%);
  k = 4: 1,384 steps/s, 1.44x (overlap 87%).
* the same with ``--threads split`` (each trial's TensorFlow gets cores / k threads), load rising 5 -> 9:
  k = 1: 869 steps/s; k = 2: 1,553, 1.79x (overlap 84%); k = 4: 621, 0.72x (overlap 92%; the load rose).
* at load 17-20, 2,000 timesteps, median of 3 rounds: 1.44x (k = 2), 1.62x (k = 4), but the trials overlapped
  only 25-33% (their imports compete with everything else): under such load one round proves nothing.

So on 2 cores two CartPole trials side by side give ~1.4-1.8x the trial-steps per core-hour of one (a trial
leaves a core partly idle between its Python steps and TensorFlow calls), and four no more than two. On a GPU
the question is different (the GPU idles between a small model's kernels); the goal there is >= 3x at k = 4
for CartPole, to be measured on a GKE GPU node.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPECS = {
    "cartpole": ROOT / "examples" / "cartpole_ppo.yaml",
    "spaceinvaders": ROOT / "examples" / "space_invaders_dqn.yaml",
}


def _child(env: str, timesteps: int, warmup: int, seed: int, threads: int) -> dict[str, Any]:
    """One trial in this process: its rate after the warm-up and its wall-clock window (for the overlap).
    ``threads`` > 0: TensorFlow's intra- and inter-op thread pools get that many threads (0: its default, one
    per core it sees, which is what a pod gets: a CPU limit does not change what TensorFlow sees)."""
    from rlcloud.runner.compat import prepare_tensorflow
    from rlcloud.runner.loop import Trainer
    from rlcloud.specs import ExperimentSpec

    if threads:
        tf = prepare_tensorflow()
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)

    spec = ExperimentSpec.from_file(
        SPECS[env],
        run_mode="single",
        num_workers=1,
        total_timesteps=warmup + timesteps,
        seed=seed,
        evaluation=None,
    )
    workdir = Path(tempfile.mkdtemp(prefix="rlcloud-packing-"))
    marks: list[tuple[float, int, float]] = []
    try:
        trainer = Trainer(spec, workdir)
        trainer.setup()

        class Mark:
            def on_tick(self) -> None:
                marks.append((trainer.counters["elapsed"], trainer.counters["timestep"], time.time()))

        trainer.hooks = Mark()
        result = trainer.run()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    t0, s0, w0 = next(((t, s, w) for t, s, w in marks if s >= warmup), marks[0])
    steps, seconds = result.timesteps - s0, result.elapsed - t0
    # the span (wall clock) runs from the first measured tick to the last: its steps are the ticks' own
    span_steps = marks[-1][1] - s0
    import tensorflow as tf

    return {
        "steps": steps,
        "span_steps": span_steps,
        "seconds": seconds,
        "rate": steps / seconds if seconds > 0 else 0.0,
        "start": w0,
        "end": marks[-1][2],
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "logical_gpus": len(tf.config.list_logical_devices("GPU")),
    }


def _probe_gpus() -> int:
    """How many GPUs TensorFlow sees here (in a subprocess: this process must not initialise TensorFlow)."""
    code = (
        "from rlcloud.runner.compat import prepare_tensorflow; "
        "print(len(prepare_tensorflow().config.list_physical_devices('GPU')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    try:
        return int(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def _run_batch(
    env: str, k: int, timesteps: int, warmup: int, *, device: str, cores: list[int], gpu_type: str, threads: str
) -> list[dict[str, Any]]:
    from rlcloud.runenv import GPU_MEMORY_MB, INPLACE_BUFFERS
    from rlcloud.specs.cluster import shared_gpu_memory_mb

    base = dict(os.environ)
    base.setdefault("PYTHONHASHSEED", "0")
    base.pop(INPLACE_BUFFERS, None)
    if device == "gpu":
        if k > 1:
            base[GPU_MEMORY_MB] = str(shared_gpu_memory_mb(gpu_type, k))
    else:
        base["CUDA_VISIBLE_DEVICES"] = ""  # the CPU mode never touches a GPU, even where one exists
    procs = []
    per_trial = 0 if threads == "tf" else max(1, len(cores) // k)
    for i in range(k):
        cmd = [sys.executable, __file__, "--child", env, str(timesteps), str(warmup), str(i + 1), str(per_trial)]
        preexec = (lambda: os.sched_setaffinity(0, cores)) if device == "cpu" else None
        procs.append(
            subprocess.Popen(cmd, env=base, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=preexec)
        )
    results = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a trial failed (exit {proc.returncode})")
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return results


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--child":
        env, timesteps, warmup, seed, threads = args[1], int(args[2]), int(args[3]), int(args[4]), int(args[5])
        print(json.dumps(_child(env, timesteps, warmup, seed, threads)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    parser.add_argument("--env", choices=("cartpole", "spaceinvaders", "both"), default="cartpole")
    parser.add_argument("--k", default="1,2,4,8", help="trials side by side, comma-separated")
    parser.add_argument("--timesteps", type=int, default=6000, help="measured timesteps per trial")
    parser.add_argument("--warmup", type=int, default=1000, help="timesteps not measured (tracing)")
    parser.add_argument("--cores", type=int, default=0, help="CPU mode: cores the trials share (0: all allowed)")
    parser.add_argument("--gpu-type", default="nvidia-l4", help="GPU mode: the GPU, for the per-trial memory bound")
    parser.add_argument(
        "--threads",
        choices=("tf", "split"),
        default="tf",
        help="TensorFlow threads per trial: its default (one per core), or the cores split among the k trials",
    )
    parser.add_argument("--rounds", type=int, default=1, help="repeat every k this often, interleaved; medians")
    opts = parser.parse_args(args)
    gpus = _probe_gpus()
    device = opts.device
    if device == "gpu" and not gpus:
        print(
            "gpu_packing: --device gpu needs a GPU that TensorFlow sees, and there is none here. Run it on a GPU "
            "machine (a GKE GPU node: the runner GPU image has TensorFlow with CUDA), or use --device cpu for the "
            "degraded CPU mode (trial-steps per core-hour).",
            file=sys.stderr,
        )
        return 2
    if device == "auto":
        device = "gpu" if gpus else "cpu"
        if device == "cpu":
            print("no GPU here: DEGRADED CPU MODE. The figures are trial-steps per CPU core-hour, not per GPU-hour.")
    allowed = sorted(os.sched_getaffinity(0))
    cores = allowed[: opts.cores] if opts.cores else allowed
    ks = [int(x) for x in opts.k.split(",") if x.strip()]
    envs = ["cartpole", "spaceinvaders"] if opts.env == "both" else [opts.env]
    unit = "GPU-hour" if device == "gpu" else f"core-hour ({len(cores)} cores)"
    print(
        f"device {device}; {opts.timesteps} measured timesteps per trial after {opts.warmup}; threads {opts.threads}; "
        f"{opts.rounds} round(s); load {os.getloadavg()}"
    )
    for env in envs:
        rounds: dict[int, list[tuple[float, list[dict[str, Any]], float]]] = {k: [] for k in ks}
        for _ in range(opts.rounds):  # interleaved, so that the machine's load falls on every k alike
            for k in ks:
                start = time.time()
                batch = _run_batch(
                    env,
                    k,
                    opts.timesteps,
                    opts.warmup,
                    device=device,
                    cores=cores,
                    gpu_type=opts.gpu_type,
                    threads=opts.threads,
                )
                span = max(r["end"] for r in batch) - min(r["start"] for r in batch)
                # the device's rate: every measured step over the span from the first trial's measured start to
                # the last one's end (a sum of the trials' own rates would count twice what did not overlap)
                rounds[k].append(
                    (sum(r["span_steps"] for r in batch) / span if span > 0 else 0.0, batch, time.time() - start)
                )
        base_rate = None
        for k in ks:
            total, results, wall = sorted(rounds[k], key=lambda r: r[0])[len(rounds[k]) // 2]  # the median round
            span = max(r["end"] for r in results) - min(r["start"] for r in results)
            common = max(0.0, min(r["end"] for r in results) - max(r["start"] for r in results))
            per_hour = total * 3600 / (1 if device == "gpu" else len(cores))
            base_rate = base_rate or per_hour
            rates = ", ".join(f"{r['rate']:.0f}" for r in results)
            seen = f"; GPUs seen {results[0]['gpus']}, logical {results[0]['logical_gpus']}" if device == "gpu" else ""
            print(
                f"{env} k={k}: per trial [{rates}] steps/s, together {total:.0f} steps/s = {per_hour:,.0f} trial-steps "
                f"per {unit}; {per_hour / base_rate:.2f}x k=1; overlap {common / span if span else 1:.0%}; "
                f"wall {wall:.0f} s{seen}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
