"""The storage seam: backends (``backend.Backend``; POSIX in ``posix``, S3 in ``s3``), counted
reads, atomic commits, aligned buffers, Lustre striping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dliobench.storage.backend import Backend
from dliobench.storage.location import is_url, parse_s3
from dliobench.storage.posix import PosixBackend

if TYPE_CHECKING:
    from dliobench.config.schema import StorageConfig


def backend_for(location: str, storage: StorageConfig | None = None,
                key: str = "dataset.data_folder") -> Backend:
    """The backend of a data or checkpoint folder: an ``s3://`` URL (reached with the
    ``storage`` keys and the AWS chain) or a POSIX path."""
    if is_url(location):
        from dliobench.storage.s3 import S3Backend
        from dliobench.storage.s3client import S3Settings

        return S3Backend(parse_s3(location, key), S3Settings.from_config(storage))
    return PosixBackend(location)


def timed(backend: Backend) -> Backend:
    """``backend`` recording its reads' latencies, where it can (an object store; here,
    beside the factory, so the latency recorder need not import the backends it times)."""
    import dataclasses

    from dliobench.storage.s3 import S3Backend

    return dataclasses.replace(backend, timed=True) if isinstance(backend, S3Backend) \
        else backend


__all__ = ["Backend", "PosixBackend", "backend_for", "timed"]
