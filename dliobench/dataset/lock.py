"""One writer or many readers per dataset folder: an advisory lock (``.dliobench.lock``).

A generation holds it exclusively. A run holds it shared from the start and takes it
exclusively only when it must write (files to generate, a manifest to fold journals into),
then shares it again while it reads. Any number of runs read one dataset at once; a
dliobench that must wait for the writer (or, to write, for the readers) says so in one line
naming the holder and waits, instead of mixing seeds or deleting files another one reads.
POSIX ``flock``: rank 0 of a job holds it for the job; an object store gets lock objects
with leases instead (``dataset.lease``).

A wait has a bound (``storage.lock_wait_s``, an hour unless set; 0: none): past it the
command ends with one sentence naming the holder, rather than sit in a batch job's allocation
behind a forgotten or hung dliobench.

Taking a shared ``flock`` exclusively is not atomic where it has to wait (the kernel drops
the shared lock first), so another writer may have written meanwhile: ``upgrade`` says
whether it waited, and the caller then checks again what is missing.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dliobench.base.errors import DatasetError
from dliobench.comm.world import Comm, World
from dliobench.dataset.lease import LeaseLock, gave_up
from dliobench.storage.backend import Backend

log = logging.getLogger(__name__)
LOCK_KEY = ".dliobench.lock"
WAIT_WRITER = "waiting for the writer"
LOCK_WAIT_S = 3600.0  # storage.lock_wait_s's default


class FolderLock:
    """The lock of one data folder, held by this process (rank 0 of a job)."""

    def __init__(self, backend: Backend, wait_s: float = LOCK_WAIT_S) -> None:
        self.backend = backend
        self.wait_s = wait_s
        self.exclusive = False
        self._fd: int | None = None
        self._lease: LeaseLock | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds the lock (rank 0 does; other ranks hold nothing)."""
        return self._fd is not None or self._lease is not None

    def acquire(self, exclusive: bool, doing: str) -> None:
        """Take the lock, waiting (said in one line) while another dliobench holds it in a
        way that excludes this one."""
        path = self.backend.local_path(LOCK_KEY)
        if path is None:  # an object store: lock objects with leases
            self._lease = LeaseLock(self.backend, LOCK_KEY, self.wait_s)  # released on failure
            self._lease.acquire(exclusive, doing)
        else:
            self.backend.make_room("")
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                self._flock(exclusive, doing)
            except BaseException:  # Ctrl-C while waiting
                os.close(self._fd)
                self._fd = None
                raise
        self.exclusive = exclusive

    def upgrade(self, doing: str, comm: Comm) -> bool:
        """Every rank: try to hold the lock exclusively (rank 0 takes it, the others wait
        for it, so no rank writes before). True on every rank when rank 0 had to wait: for
        readers (it then holds it exclusively) or for a writer (it then holds it shared
        again); either may have written meanwhile, so the caller checks again what it must
        write, and upgrades again if anything is left."""
        waited = False
        if self.held and not self.exclusive:
            if self._lease is not None:
                waited = self._lease.upgrade(doing)
                self.exclusive = self._lease.exclusive
            else:
                waited = self._upgrade_flock(doing)
        return comm.bcast(waited)

    def share(self) -> None:
        """Keep the lock, shared: others may read now (the writing is over)."""
        if not self.exclusive:
            return
        if self._lease is not None:
            self._lease.share()
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # it named the writer
            fcntl.flock(self._fd, fcntl.LOCK_SH)
        self.exclusive = False

    def release(self) -> None:
        """Let go."""
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self.exclusive = False

    def _flock(self, exclusive: bool, doing: str) -> None:
        """flock the open lock file, first without waiting, then saying what it waits for."""
        assert self._fd is not None
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("%s", _waiting(self._fd, self.backend.describe(), exclusive))
            fcntl.flock(self._fd, fcntl.LOCK_UN)  # what _waiting took to look
            self._wait(mode, exclusive)
        if exclusive:
            self._name_writer(doing)

    def _upgrade_flock(self, doing: str) -> bool:
        """Shared to exclusive, without waiting if it can; True when it had to wait. Where it
        cannot, the shared lock is let go first (Linux drops it anyway; where flock is
        emulated by fcntl locks, as on NFS, two runs upgrading would wait for each other),
        and a writer is waited for with a shared lock (its files may be all this run lacked),
        readers with an exclusive one."""
        assert self._fd is not None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            line = _waiting(self._fd, self.backend.describe(), True)
            log.warning("%s", line)
            self.exclusive = not line.startswith(WAIT_WRITER)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._wait(fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH, True)
            if self.exclusive:
                self._name_writer(doing)
            return True
        self.exclusive = True
        self._name_writer(doing)
        return False

    def _wait(self, mode: int, exclusive: bool) -> None:
        """flock in ``mode``, looking again a few times a second, for at most ``wait_s``;
        past it, a ``DatasetError`` naming the holder (the lock not held)."""
        assert self._fd is not None
        deadline = time.monotonic() + self.wait_s if self.wait_s > 0 else math.inf
        pause = 0.01
        while True:
            try:
                fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
            time.sleep(pause)
            pause = min(2 * pause, 0.25)
        line = _waiting(self._fd, self.backend.describe(), exclusive)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        raise DatasetError(gave_up(line, self.wait_s))

    def _name_writer(self, doing: str) -> None:
        """Say in the lock file who writes (what a waiting dliobench says)."""
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{doing} by pid {os.getpid()} on {socket.gethostname()} since "
                            f"{time.strftime('%H:%M:%S')}".encode(), 0)


def _waiting(fd: int, where: str, exclusive: bool) -> str:
    """The line said before waiting: for the writer (named in the lock file) or, to write,
    for the readers."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 512, 0).decode(errors="replace").strip() or "another dliobench"
        return f"{WAIT_WRITER} of the dataset in {where} to finish ({text})"
    if not exclusive:  # the writer let go meanwhile
        return f"waiting for the dataset in {where}"
    return (f"waiting for the dliobench runs reading the dataset in {where} to finish "
            "before writing it")


@contextmanager
def locked(backend: Backend, world: World, exclusive: bool, doing: str,
           wait_s: float = LOCK_WAIT_S) -> Iterator[FolderLock]:
    """The folder's lock for the duration (rank 0 holds it for the job), waited for at most
    ``wait_s`` (0: no limit)."""
    lock = FolderLock(backend, wait_s)
    try:
        if world.is_root:
            lock.acquire(exclusive, doing)
        yield lock
    finally:
        lock.release()
