"""MPI through mpi4py: the only module that imports it.

``detect()`` tells whether this process was started by an MPI launcher (mpiexec, mpirun,
srun) and, if so, returns the ``World`` and an ``MPIComm``; otherwise the caller runs as the
one-rank embedded default without importing MPI at all.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dliobench.base import leftovers
from dliobench.base.errors import MissingExtraError
from dliobench.comm.world import World

T = TypeVar("T")
# Variables launchers set in every rank's environment (MPICH/Hydra, Open MPI, PMIx, Slurm).
LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")
LAUNCHER_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
SHM_PREFIX = "/dev/shm/mpich_shm_"
SHM_LEFTOVER_AGE_S = 5  # another job's segment is mapped within moments of its creation
ABORT_GRACE_S = 0.3  # lets the launcher forward a failing rank's last message first
BARRIER_NAP_S = (20e-6, 1e-3)  # first and longest sleep between two tests of a barrier


def launched_by_mpi() -> bool:
    """True when an MPI launcher started this process."""
    return any(v in os.environ for v in (*LAUNCHER_SIZE_VARS, *LAUNCHER_RANK_VARS))


class MPIComm:
    """The Comm protocol over an mpi4py communicator."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm

    def barrier(self) -> None:
        """Block until every rank arrives, asleep: MPI_Barrier polls on the CPU (MPICH yields
        between polls), which on a host with more ranks than cores takes the CPU from the ranks
        still writing or reading; here a waiting rank sleeps between tests of an Ibarrier
        (20 us doubling to 1 ms), so it leaves at most 1 ms after the last rank arrives."""
        request = self._comm.Ibarrier()
        nap, longest = BARRIER_NAP_S
        while not request.Test():
            time.sleep(nap)
            nap = min(2 * nap, longest)

    def bcast(self, value: T, root: int = 0) -> T:
        """Root's value on every rank."""
        out: T = self._comm.bcast(value, root=root)
        return out

    def gather(self, value: Any, root: int = 0) -> list[Any] | None:
        """One value per rank on root."""
        out: list[Any] | None = self._comm.gather(value, root=root)
        return out

    def allgather(self, value: Any) -> list[Any]:
        """One value per rank everywhere."""
        out: list[Any] = self._comm.allgather(value)
        return out

    def allreduce_buffer(self, buffer: np.ndarray) -> None:
        """Sum a numeric buffer over all ranks in place (a real MPI_Allreduce)."""
        from mpi4py import MPI

        self._comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)

    def dup(self) -> MPIComm:
        """``MPI_Comm_dup``: collectives on it do not mix with this communicator's, so
        another thread may issue them (mpi4py initialises MPI_THREAD_MULTIPLE)."""
        return MPIComm(self._comm.Dup())

    def abort(self, code: int) -> None:
        """End every rank of the job now (used when one rank fails).

        The launcher forwards a rank's output asynchronously and an abort can overtake it
        (MPICH's mpiexec then exits with no message at all, about one failing job in ten
        here): the rank gives the forwarding ``ABORT_GRACE_S`` before it aborts.
        """
        sys.stdout.flush()
        sys.stderr.flush()
        _unlink_shared_segments()
        time.sleep(ABORT_GRACE_S)
        self._comm.Abort(code)
        os._exit(code)  # MPI_Abort returned: under srun --mpi=pmi2 in a step Slurm is ending
        # already (scancel, time limit) it does, and the rank would go on to say it twice


def library_version() -> str | None:
    """The MPI library's version string (its first line), when this process has loaded MPI
    already; never loads it (a one-process run stays free of MPI)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return None
    try:
        text = str(mpi.Get_library_version())
    except Exception:  # an MPI without the call, or finalized: the version is not known
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    return " ".join(first.split()) or None  # "MPICH Version: 5.0.2"


def _unlink_shared_segments() -> None:
    """Unlink the /dev/shm segments this job's MPICH mapped: MPI_Abort leaves them behind
    (2 MB each, until reboot). The mappings of every rank stay valid until they exit."""
    for path in leftovers.mapped_paths(SHM_PREFIX, [Path("/proc/self")]):
        with contextlib.suppress(OSError):
            os.unlink(path)


def detect() -> tuple[World, MPIComm]:
    """Initialise MPI and describe this rank's place: rank, size, node-local rank, nodes."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise MissingExtraError("mpi4py", "mpi") from exc
    comm = MPI.COMM_WORLD
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    host = socket.gethostname()
    hosts = comm.allgather(host)
    world = World(rank=comm.Get_rank(), size=comm.Get_size(), local_rank=node.Get_rank(),
                  local_size=node.Get_size(), node_count=len(set(hosts)), host=host,
                  launcher="mpi")
    node.Free()
    if world.local_rank == 0:  # segments of jobs on this node killed before their clean-up
        leftovers.sweep_unmapped(Path(SHM_PREFIX).name, min_age_s=SHM_LEFTOVER_AGE_S,
                                 folder=Path(SHM_PREFIX).parent)
    return world, MPIComm(comm)
