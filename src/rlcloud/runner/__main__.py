"""``python -m rlcloud.runner``: see :mod:`rlcloud.runner.main`."""

from __future__ import annotations

import sys

from rlcloud.runner.main import main

if __name__ == "__main__":
    sys.exit(main())
