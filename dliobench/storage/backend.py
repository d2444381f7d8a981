"""The storage seam: where a dataset or a checkpoint lives, behind one small interface.

Formats, loaders, the generator, the manifest and checkpoints never open paths themselves:
they ask the run's ``Backend`` for byte ranges into buffers and write through its streaming
``Writer``. POSIX is one backend (``storage.posix``); an object store is the next. Bytes read
are counted here (every read returns what it transferred), so every loader and format counts
the same way on every backend.

Objects are named by *keys*: '/'-separated names relative to the backend's root (a folder, a
bucket prefix), e.g. ``train/0003/img_0000003.npz``. The contract below is what callers may
rely on; ``tests/contract/test_backends.py`` checks it for every backend.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Writer(Protocol):
    """One object being written: ``write`` any number of times, then ``commit`` or ``abort``.

    Nothing of the object is visible under its key until ``commit``, which is atomic: the
    object appears complete or not at all (an object already there is replaced whole). Data
    is streamed: a 13 GB checkpoint shard never sits whole in memory. ``abort`` (also after a
    failed write) leaves nothing behind. A writer is used by one thread.
    """

    key: str

    def write(self, data: memoryview | bytes) -> None:
        """Append ``data``. With ``direct`` writes, every call but the last must hand whole
        4 KiB blocks from page-aligned memory (``storage.buffers.AlignedBuffer``)."""

    def spool_path(self) -> Path:
        """A local file the object's bytes may be written to by a library that insists on
        writing a file itself (h5py); ``commit`` then stores that file. Not mixed with
        ``write``."""

    def commit(self, durable: bool = False) -> None:
        """Make the object visible under its key, complete; durable at the next
        ``Backend.sync``, or at once with ``durable`` (a checkpoint's fsync)."""

    def abort(self) -> None:
        """Drop what was written; the key keeps whatever it held before."""


class Backend(Protocol):
    """A place objects are read from and written to (a POSIX folder, an object store).

    Picklable: loader worker processes receive it.
    """

    def describe(self, key: str = "") -> str:
        """Where ``key`` is, for messages (a path, a URL)."""

    def read_range(self, key: str, offset: int, length: int,
                   direct: bool = False) -> tuple[memoryview, int]:
        """``length`` bytes at ``offset`` (fewer at the end of the object) and the bytes the
        storage transferred for them (more than returned when ``direct`` reads whole
        aligned blocks). Raises FileNotFoundError for a missing key."""

    def open_read(self, key: str, direct: bool = False,
                  sequential: bool = False) -> CountingReader:
        """A seekable read-only file object over ``key`` that counts the bytes it reads, for
        libraries that read through a file object (h5py). ``sequential``: the caller reads
        it start to end (a checkpoint restore), so the storage may read ahead further."""

    def size(self, key: str) -> int | None:
        """The object's size in bytes, or None when there is no such object."""

    def stat(self, key: str) -> ObjectStat | None:
        """The object's size and version (changes when it is rewritten), or None."""

    def open_write(self, key: str, direct: bool = False, atomic: bool = True) -> Writer:
        """A writer for ``key`` (``direct``: bypass the page cache where the storage can).

        ``atomic=False`` lets the storage write the object under its own key as it goes
        (POSIX: no temporary name, no rename), for callers whose own record commits it (a
        generation's data files: the manifest's journal, written after a sync): the object
        may then be seen in part before ``commit`` or after a crash, and ``abort`` removes
        it. Storage that commits objects whole anyway (S3) ignores it."""

    def write_new(self, key: str, data: memoryview | bytes) -> None:
        """Write the small object ``key`` whole, as ``open_write(key, atomic=False)``,
        ``write`` and ``commit`` would, in as few calls as the storage allows (POSIX: open,
        write, close); on an error nothing is left under ``key``."""

    def put(self, key: str, data: bytes, replace: bool = True) -> bool:
        """Store a small object atomically. With ``replace=False`` an existing object is
        kept and False returned (the first writer wins)."""

    def append(self, key: str, data: bytes) -> None:
        """Append ``data`` durably to ``key`` (created when missing). A reader sees every
        append that returned; one interrupted by a crash may be seen in part, so records
        appended must let a reader recognise a torn tail."""

    def reserve(self, key: str, nbytes: int) -> None:
        """Set aside room for ``nbytes`` of later appends to ``key`` where the storage can,
        so a full disk cannot lose them (OSError ENOSPC when there is no such room)."""

    def delete(self, key: str) -> None:
        """Remove the object if it exists."""

    def sync(self) -> None:
        """Make every object committed so far durable (one call for a batch of objects)."""

    def evict(self, keys: list[str], flush: bool = True) -> None:
        """Drop these objects from the client's cache, so the next read reaches the storage
        (``flush=False``: the caller synced already)."""

    def make_room(self, prefix: str) -> None:
        """Prepare the namespace under ``prefix`` for new objects (folders, striping)."""

    def drop_leftovers(self, prefix: str = "") -> int:
        """Remove what writers killed part way left invisible under ``prefix`` (an object
        store's unfinished multipart uploads, stored and billed until aborted); how many."""

    def local_path(self, key: str) -> Path | None:
        """A local path of the object, for libraries that open files themselves (DALI's
        readers, tf.data), or None when the storage has none."""

    def facts(self) -> dict[str, Any]:
        """What the storage is (fs type, mount, device, free and total bytes), for results."""

    def free_bytes(self) -> int | None:
        """Bytes that may still be written, or None when the storage does not say."""

    def block_bytes(self) -> int:
        """The unit the storage allocates in (a file system block; 1 for an object store)."""

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under ``prefix``. Only the step that indexes an existing dataset lists; runs
        and generation name their objects from the manifest."""


class CountingReader(Protocol):
    """A read-only, seekable file object whose ``nbytes`` is what its reads transferred."""

    nbytes: int

    def readinto(self, buffer: Any) -> int:
        """Read at the current position into ``buffer``."""

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move the position."""

    def tell(self) -> int:
        """The position."""

    def close(self) -> None:
        """Release the object."""

    def forget(self) -> None:
        """Drop any bytes kept between reads, so the next read reaches the storage."""


@dataclass(frozen=True)
class ObjectStat:
    """An object's size and a version that changes when it is rewritten."""

    size: int
    version: tuple[int, ...]


def drop_leftovers(backend: Backend, prefix: str, left_by: str) -> None:
    """Abort what writers killed part way left under ``prefix`` (``Backend.drop_leftovers``)
    and say how many, and whose."""
    aborted = backend.drop_leftovers(prefix)
    if aborted:
        log.warning("aborted %d unfinished multipart upload(s) under %s left by %s", aborted,
                    backend.describe(prefix), left_by)
