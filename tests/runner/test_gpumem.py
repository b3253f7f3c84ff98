"""Issue 42: RLCLOUD_GPU_MEMORY_MB reaches TensorFlow through the runner's compat layer (runner/gpumem.py)."""

from __future__ import annotations

import pytest

from tests.support.runner import _python

_CODE = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
from rlcloud.runner.compat import prepare_tensorflow
tf = prepare_tensorflow()
print("GPUS", len(tf.config.list_physical_devices("GPU")))
"""


@pytest.mark.processes
def test_the_memory_bound_is_read_before_tensorflow_runs_and_is_a_no_op_without_a_gpu() -> None:
    done = _python(_CODE, RLCLOUD_GPU_MEMORY_MB="3380", CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 0, done.stderr
    assert "GPUS 0" in done.stdout
    assert "GPU memory bound of 3380 MiB asked for, but no GPU here" in done.stdout
    # a value that is no MiB count is named, with its variable, before TensorFlow runs anything
    bad = _python(_CODE, RLCLOUD_GPU_MEMORY_MB="lots", CUDA_VISIBLE_DEVICES="")
    assert bad.returncode != 0 and "RLCLOUD_GPU_MEMORY_MB='lots'" in bad.stderr
