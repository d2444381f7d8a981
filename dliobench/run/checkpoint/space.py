"""A checkpoint that does not fit, as one sentence: the folder, the space needed and free.

Every checkpoint writer (raw bytes, ``torch.save``, the training loop's shards) goes through
``files.checkpoint_writer``, which asks ``write_error`` what a failed write means. A
full disk or quota reaches Python as an OSError (ENOSPC, EDQUOT) from our own writes, or
wrapped in the chain of whatever the library raised. ``torch.save`` given a path writes from
C++ and raises without errno (``RuntimeError: [enforce fail at inline_container.cc]
unexpected pos`` or ``basic_ios::clear: iostream error``): ``c_writes`` reads the C errno the
failed write left, and where there is none, a write that failed while the storage had less
room than the file needs is taken as a full disk: errno and free space decide, not torch's
wording.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dliobench.base.errors import DatasetError
from dliobench.base.units import size_text
from dliobench.storage.backend import Backend

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


@dataclass(frozen=True)
class Room:
    """One checkpoint of this rank: its number, the bytes it needs, the bytes free before it
    began (None where the storage does not say), and the keys that make checkpoints smaller
    or fewer in this workflow (for the advice)."""

    index: int
    need: int
    free: int | None
    shrink: str

    @classmethod
    def measure(cls, backend: Backend, index: int, need: int, shrink: str) -> Room:
        """Note the free space now, before the checkpoint's timed writes."""
        return cls(index, need, _free(backend), shrink)

    def full(self, backend: Backend, reason: str) -> DatasetError:
        """The sentence for a checkpoint the storage had no room for."""
        free = "an unknown amount" if self.free is None else size_text(self.free)
        return DatasetError(
            f"the storage holding checkpoint.checkpoint_folder {backend.describe()} is full "
            f"({reason}): checkpoint {self.index} needs {size_text(self.need)} on this rank "
            f"and {free} was free when it began; free space there, choose another "
            f"checkpoint.checkpoint_folder, or make the checkpoints smaller or fewer "
            f"({self.shrink})")


def os_error(exc: BaseException) -> OSError | None:
    """The first OSError in ``exc``'s chain (itself, its cause, its context), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def is_full(exc: BaseException, backend: Backend, nbytes: int) -> bool:
    """Whether the failed write of a file of ``nbytes`` ran out of room: an ENOSPC/EDQUOT in
    the error's chain, or (no errno there) less free space now, while the partial file still
    holds its share, than the file needs."""
    cause = os_error(exc)
    if cause is not None and cause.errno is not None:
        return cause.errno in FULL_ERRNOS
    free = _free(backend)
    return free is not None and free < max(nbytes, 1) + backend.block_bytes()


def write_error(exc: BaseException, backend: Backend, key: str, room: Room,
                nbytes: int) -> DatasetError | None:
    """The sentence for checkpoint file ``key`` (``nbytes`` planned) that could not be
    written, or None for an error that is not about storage (an interrupt, a bug). Called
    before the partial file is dropped, so the free space it sees is what the write met."""
    if not isinstance(exc, (OSError, RuntimeError)):
        return None
    if is_full(exc, backend, nbytes):
        cause = os_error(exc)
        reason = (cause.strerror if cause is not None and cause.strerror
                  else "the write stopped part way with no room left")
        return room.full(backend, reason)
    cause = os_error(exc)
    if cause is not None:
        reason = cause.strerror or str(cause)
    else:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
    return DatasetError(f"cannot write checkpoint {backend.describe(key)}: {reason}; check "
                        "the storage or choose another checkpoint.checkpoint_folder")


@contextlib.contextmanager
def mapped(backend: Backend, key: str, room: Room) -> Iterator[None]:
    """Preparing checkpoint ``room.index`` (its folders): a storage error as one sentence."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        error = write_error(exc, backend, key, room, 0)
        if error is None:
            raise
        raise error from None


@contextlib.contextmanager
def c_writes() -> Iterator[None]:
    """Around a library's writes from C in this thread (``torch.save`` to a path): its
    RuntimeError is raised from an OSError of the C errno it left when that says the disk or
    quota is full (errno is cleared first, so an older one is not taken for it)."""
    where = _errno_location()
    if where is not None:
        where[0] = 0
    try:
        yield
    except RuntimeError as exc:
        code = where[0] if where is not None else 0
        if code in FULL_ERRNOS:
            raise OSError(code, os.strerror(code)) from exc
        raise


def _errno_location() -> ctypes._Pointer[ctypes.c_int] | None:
    """This thread's C errno (glibc's and musl's ``__errno_location``), None elsewhere."""
    function = _errno_function()
    if function is None:
        return None
    location: ctypes._Pointer[ctypes.c_int] = function()
    return location


@functools.cache
def _errno_function() -> Any:
    """libc's ``__errno_location`` (looked up once), or None where there is none."""
    try:
        function = ctypes.CDLL(None).__errno_location
    except (AttributeError, OSError):
        return None
    function.restype = ctypes.POINTER(ctypes.c_int)
    return function


def _free(backend: Backend) -> int | None:
    """The backend's free bytes, None where it cannot say (or the folder is unreachable)."""
    try:
        return backend.free_bytes()
    except OSError:
        return None
