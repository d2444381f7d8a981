"""Who am I among the ranks, and how do ranks talk: ``World`` and the ``Comm`` protocol.

Every function that cares about ranks receives a ``World`` and a ``Comm``; nothing reads
globals. ``LocalComm`` is the single-process implementation (the embedded default);
``comm.mpi`` provides the MPI one, ``comm.torch`` the torch.distributed one, and
``comm.launch`` picks between them.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """This process's place among the ranks of one job."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    node_count: int = 1
    host: str = ""
    launcher: str = "none"  # what started the ranks: "slurm", "mpi", "torch" or "none"

    @classmethod
    def single(cls) -> World:
        """The one-process world of a run without an MPI launcher."""
        return cls(host=socket.gethostname())

    @property
    def is_root(self) -> bool:
        """True on rank 0, the rank that writes results."""
        return self.rank == 0


class Comm(Protocol):
    """The few collectives dliobench needs; implemented by LocalComm and MPIComm."""

    def barrier(self) -> None:
        """Block until every rank arrives."""

    def bcast(self, value: T, root: int = 0) -> T:
        """Return root's value on every rank."""

    def gather(self, value: Any, root: int = 0) -> list[Any] | None:
        """Collect one value per rank on root (None elsewhere)."""

    def allgather(self, value: Any) -> list[Any]:
        """Collect one value per rank on every rank."""

    def allreduce_buffer(self, buffer: np.ndarray) -> None:
        """Sum a numeric buffer over all ranks, in place."""

    def abort(self, code: int) -> None:
        """End the whole job with ``code`` (one rank failed)."""

    def dup(self) -> Comm:
        """A communicator of the same ranks for collectives issued from another thread
        (every rank calls ``dup`` once, in the same order)."""


class LocalComm:
    """Collectives of a one-rank world: each is the identity."""

    def barrier(self) -> None:
        """Nothing to wait for."""

    def bcast(self, value: T, root: int = 0) -> T:
        """The value itself."""
        return value

    def gather(self, value: Any, root: int = 0) -> list[Any] | None:
        """A list of this rank's value."""
        return [value]

    def allgather(self, value: Any) -> list[Any]:
        """A list of this rank's value."""
        return [value]

    def allreduce_buffer(self, buffer: np.ndarray) -> None:
        """The sum over one rank is the buffer itself."""

    def abort(self, code: int) -> None:
        """One rank: exiting is the caller's job."""

    def dup(self) -> LocalComm:
        """Another identity."""
        return LocalComm()


class ThreadGroup:
    """Shared state of ranks simulated as threads of one process (for tests and dry runs)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.barrier = threading.Barrier(size)
        self.slots: list[Any] = [None] * size
        self._children: list[ThreadGroup] = []
        self._lock = threading.Lock()

    def child(self, index: int) -> ThreadGroup:
        """The ``index``-th duplicate of this group (made by the first rank to ask)."""
        with self._lock:
            while len(self._children) <= index:
                self._children.append(ThreadGroup(self.size))
            return self._children[index]

    def comms(self) -> list[ThreadComm]:
        """One Comm per simulated rank."""
        return [ThreadComm(self, rank) for rank in range(self.size)]


class ThreadComm:
    """The Comm protocol between threads: each collective is a pair of barrier waits."""

    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self.group = group
        self.rank = rank
        self._dups = 0

    def barrier(self) -> None:
        """Block until every simulated rank arrives."""
        self.group.barrier.wait()

    def _exchange(self, value: Any) -> list[Any]:
        self.group.slots[self.rank] = value
        self.barrier()
        values = list(self.group.slots)
        self.barrier()
        return values

    def bcast(self, value: T, root: int = 0) -> T:
        """Root's value on every rank."""
        out: T = self._exchange(value)[root]
        return out

    def gather(self, value: Any, root: int = 0) -> list[Any] | None:
        """One value per rank on root."""
        values = self._exchange(value)
        return values if self.rank == root else None

    def allgather(self, value: Any) -> list[Any]:
        """One value per rank everywhere."""
        return self._exchange(value)

    def allreduce_buffer(self, buffer: np.ndarray) -> None:
        """Sum the ranks' buffers into each."""
        parts = self._exchange(buffer.copy())
        buffer[...] = np.sum(parts, axis=0)

    def abort(self, code: int) -> None:
        """Break the barrier: every other rank's next collective raises."""
        self.group.barrier.abort()

    def dup(self) -> ThreadComm:
        """This rank in a duplicate group (the n-th ``dup`` of every rank: the same group)."""
        group = self.group.child(self._dups)
        self._dups += 1
        return ThreadComm(group, self.rank)
