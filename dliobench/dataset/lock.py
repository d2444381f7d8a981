"""One writer or many readers per dataset folder: an advisory lock (``.dliobench.lock``).

A generation holds it exclusively; a run holds it shared while it reads (exclusively while it
may still generate). A second dliobench that would write into a folder being written or read,
or read a folder being written, is refused with a sentence naming the holder, instead of
mixing seeds or deleting the other's files in flight. POSIX ``flock``: rank 0 of a job holds
it for the job; an object store gets a lock object with a lease instead (``dataset.lease``).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dliobench.comm.world import World
from dliobench.dataset.lease import LeaseLock
from dliobench.errors import DatasetError
from dliobench.storage.backend import Backend

LOCK_KEY = ".dliobench.lock"


class FolderLock:
    """The lock of one data folder, held by this process."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._fd: int | None = None
        self._lease: LeaseLock | None = None

    def acquire(self, exclusive: bool, doing: str) -> None:
        """Take the lock (without waiting) or raise DatasetError naming who holds it."""
        path = self.backend.local_path(LOCK_KEY)
        if path is None:  # an object store: a lock object with a lease
            self._lease = LeaseLock(self.backend, LOCK_KEY)
            self._lease.acquire(exclusive, doing)
            return
        self.backend.make_room("")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            where = self.backend.describe()
            raise DatasetError(
                f"the dataset in {where} is {holder}; wait until it has finished or use "
                "another dataset.data_folder") from None
        if exclusive:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{doing} by pid {os.getpid()} on {socket.gethostname()} since "
                          f"{time.strftime('%H:%M:%S')}".encode(), 0)
        self._fd = fd

    def share(self) -> None:
        """Keep the lock, shared: others may read now (the writing is over)."""
        if self._lease is not None:
            self._lease.share()
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)

    def release(self) -> None:
        """Let go."""
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _holder(fd: int) -> str:
    """Who holds a lock we could not take: a writer (named in the file) or readers."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 512, 0).decode(errors="replace").strip()
        return f"being written: {text}" if text else "being written by another dliobench"
    fcntl.flock(fd, fcntl.LOCK_UN)
    return "being read by another dliobench run"


@contextmanager
def locked(backend: Backend, world: World, exclusive: bool, doing: str) -> Iterator[FolderLock]:
    """The folder's lock for the duration (rank 0 holds it for the job)."""
    lock = FolderLock(backend)
    if world.is_root:
        lock.acquire(exclusive, doing)
    try:
        yield lock
    finally:
        lock.release()
