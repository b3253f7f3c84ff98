"""GPU memory bounds for trials that share one GPU (a sweep's ``trials_per_gpu`` on a GKE GPU-sharing pool).

GKE's time-sharing and MPS give each container a slice of the GPU's time, not of its memory: GKE's "About GPU
sharing strategies" says time-shared containers are not isolated in memory, and TensorFlow's default is to map
nearly all of a GPU's memory at start-up, so the first trial would starve the others. The sweep builder writes
``RLCLOUD_GPU_MEMORY_MB`` (the GPU's memory divided among the trials that share it, with headroom), and the
runner gives TensorFlow one logical GPU of that size (``tf.config.set_logical_device_configuration`` with a
``memory_limit``: TensorFlow's "Limiting GPU memory growth" guide), before any op runs on the GPU.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["bound_gpu_memory"]

log = logging.getLogger("rlcloud.runner")


def bound_gpu_memory(tf: Any, megabytes: int | None = None) -> bool:
    """Cap TensorFlow's use of the first GPU at ``megabytes`` MiB (default: ``RLCLOUD_GPU_MEMORY_MB``).

    Returns True when a bound was set; False when none is asked for or this machine has no GPU (a CPU run of
    the same spec is unchanged). TensorFlow refuses the setting once the GPU is initialised: that is logged,
    not raised, since the run still works (unbounded).
    """
    if megabytes is None:
        from rlcloud.runenv import RunnerEnv

        megabytes = RunnerEnv.from_env().gpu_memory_mb
    if not megabytes:
        return False
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        log.info("GPU memory bound of %d MiB asked for, but no GPU here: nothing to bound", megabytes)
        return False
    try:
        for gpu in gpus:
            tf.config.set_logical_device_configuration(
                gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=megabytes)]
            )
    except RuntimeError as exc:  # the GPU was initialised before this call
        log.warning("could not bound GPU memory to %d MiB: %s", megabytes, exc)
        return False
    log.info("GPU memory bounded to %d MiB per GPU (RLCLOUD_GPU_MEMORY_MB)", megabytes)
    return True
