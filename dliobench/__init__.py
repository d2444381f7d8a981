"""dliobench: an I/O and data-pipeline benchmark for deep-learning training."""

# The one place the version lives (pyproject.toml reads it): importlib.metadata would cost
# ~80 ms of every command's start-up.
__version__ = "0.1.0"

from pathlib import Path as _Path

# The source checkout this package runs from, when it runs from one (an editable install or
# PYTHONPATH): it holds workloads/ and configs/, and an install hint names it.
CHECKOUT = _Path(__file__).resolve().parents[1]


def from_checkout() -> bool:
    """Whether dliobench runs from a source checkout (editable install or PYTHONPATH)."""
    return (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "dliobench").is_dir()
