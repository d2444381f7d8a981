"""dliobench: an I/O and data-pipeline benchmark for deep-learning training."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dliobench")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
