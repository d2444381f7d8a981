"""Exceptions a user can act on. The CLI turns each into one line and an exit code."""

from __future__ import annotations


class DlioBenchError(Exception):
    """Base of all errors whose message is meant for the user (exit code 1)."""

    exit_code = 1


class ConfigError(DlioBenchError):
    """A workload file or override is wrong: unknown key, wrong type, impossible value."""

    exit_code = 2


class InputError(DlioBenchError):
    """A file or folder handed to a command is not what it must be (not a run folder, not a
    dliobench result)."""

    exit_code = 2


class DatasetError(DlioBenchError):
    """The dataset is missing, incomplete or does not match the configuration."""


class CorruptSampleError(DlioBenchError):
    """A sample could not be decoded: the file is truncated or its bytes are damaged."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(
            f"corrupt sample in {path} at byte offset {offset}: {reason}; "
            "regenerate the dataset with `dliobench generate`"
        )
        self.path = path
        self.offset = offset
        self.reason = reason


class MissingExtraError(DlioBenchError):
    """An optional dependency (torch, DALI, mpi4py) is not installed."""

    def __init__(self, package: str, extra: str) -> None:
        from dliobench.config.shipped import CHECKOUT, from_checkout

        how = (f"`pip install -e '{CHECKOUT}[{extra}]'` (this checkout)" if from_checkout()
               else f"`pip install 'dliobench[{extra}]'`")
        super().__init__(f"{package} is not installed; install it with {how}")


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (a batch system's time limit, a preemption): handled like Ctrl-C, so
    what was measured is written as a partial result, then the command exits with 143."""

    exit_code = 143
