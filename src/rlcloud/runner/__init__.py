"""The runner: what a pod or local process executes (Tensorforce agent + environments).

``python -m rlcloud.runner --role ... --spec ... --workdir ...`` (see :mod:`rlcloud.runner.main`). Nothing
here is imported by ``import rlcloud``; TensorFlow and tensorforce load inside the functions that need
them (:func:`rlcloud.runner.compat.import_tensorforce`).
"""
