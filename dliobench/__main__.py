"""Allow ``python -m dliobench``."""

from dliobench.cli.main import main

if __name__ == "__main__":  # not when a worker process started by "spawn" imports this module
    raise SystemExit(main())
