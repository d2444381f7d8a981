"""Allow ``python -m dliobench``."""

from dliobench.cli import main  # sets OPENBLAS_NUM_THREADS before numpy loads

if __name__ == "__main__":  # not when a worker process started by "spawn" imports this module
    raise SystemExit(main())
