"""Allow ``python -m dliobench``."""

from dliobench.cli import main

raise SystemExit(main())
