"""dliobench: an I/O and data-pipeline benchmark for deep-learning training."""

# The one place the version lives (pyproject.toml reads it): importlib.metadata would cost
# ~80 ms of every command's start-up.
__version__ = "0.1.0"
