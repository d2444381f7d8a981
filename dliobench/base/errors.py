"""Exceptions a user can act on. The CLI turns each into one line and an exit code."""

from __future__ import annotations

import os
from typing import Any


class DlioBenchError(Exception):
    """Base of all errors whose message is meant for the user (exit code 1).

    Picklable whatever a subclass's constructor takes, so an error raised in a loader's
    worker process reaches the run whole: its class, message and fields.
    """

    exit_code = 1

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), str(self), dict(self.__dict__))


class ConfigError(DlioBenchError):
    """A workload file or override is wrong: unknown key, wrong type, impossible value."""

    exit_code = 2


class InputError(DlioBenchError):
    """A file or folder handed to a command is not what it must be (not a run folder, not a
    dliobench result)."""

    exit_code = 2


class DatasetError(DlioBenchError):
    """The dataset is missing, incomplete or does not match the configuration."""


def _rebuild(cls: type[DlioBenchError], message: str, state: dict[str, Any]) -> DlioBenchError:
    """An unpickled DlioBenchError: its class and message, its fields restored."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


def unreadable(path: str, exc: OSError, where: str = "") -> DatasetError:
    """A DatasetError for an OSError met reading a data file (gone, not a regular file, an
    I/O error): one sentence naming the file (``exc.filename`` when it names another one, a
    side file) and ``where`` in it (e.g. "sample 3 at byte offset 4096")."""
    name = os.fsdecode(exc.filename) if exc.filename else path
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        reason = "it is gone (No such file or directory)"
    return DatasetError(f"cannot read {name}{f' ({where})' if where else ''}: {reason}; "
                        "check the file system, or regenerate the dataset with "
                        "`dliobench generate`")


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
        from dliobench import CHECKOUT, from_checkout

        how = (f"`pip install -e '{CHECKOUT}[{extra}]'` (this checkout)" if from_checkout()
               else f"`pip install 'dliobench[{extra}]'`")
        super().__init__(f"{package} is not installed; install it with {how}")


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (a batch system's time limit, a preemption): handled like Ctrl-C, so
    what was measured is written as a partial result, then the command exits with 143.
    ``kept``: what the command kept and where, when it knows better than the default
    (``comm.abort.terminated_line``: "generated files are kept", a training run's dataset)."""

    exit_code = 143
    kept: str | None = None
