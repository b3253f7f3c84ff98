"""``python -m rlcloud``: the console script."""

from rlcloud.cli import main

raise SystemExit(main())
