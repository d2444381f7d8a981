"""The storage seam: backends (``backend.Backend``; POSIX in ``posix``), counted reads,
atomic commits, aligned buffers, Lustre striping."""

from __future__ import annotations

from dliobench.storage.backend import Backend
from dliobench.storage.posix import PosixBackend


def backend_for(location: str) -> Backend:
    """The backend of a data or checkpoint folder (a POSIX path today)."""
    return PosixBackend(location)


__all__ = ["Backend", "PosixBackend", "backend_for"]
