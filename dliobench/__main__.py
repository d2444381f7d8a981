"""Allow ``python -m dliobench``."""

from dliobench.cli.main import main  # the cli package sets OPENBLAS_NUM_THREADS first

if __name__ == "__main__":  # not when a worker process started by "spawn" imports this module
    raise SystemExit(main())
