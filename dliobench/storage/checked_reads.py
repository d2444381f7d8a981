"""Whole files read and checked in one C call: those that match a template of their headers
(and their CRC-32) come back as their data, with no Python per file.

A dataset's files of one size carry the same headers when one program wrote them all (numpy's
``.npy`` header; an npz's zip entry but for its CRC-32). The caller parses one file through its
format and keeps its bytes before the data as a template; ``read_checked`` then reads a list of
files and compares each with its template in C with the GIL released (``_readfiles.c``), and
checks the CRC-32 there too, so a matching file costs its read, its CRC-32, an array and a tuple.
A file that does not match comes back as its bytes, for its format to decode and word any error.

``ReadQueue`` (``_readqueue.h``) does the same work in threads that never take the GIL: the
caller submits a work item (``Pending``) and takes its results later, so no Python runs per
file or per item in the threads that read.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

import dliobench.storage.buffers as bufferpool
import dliobench.storage.posix_io as posix_io
from dliobench.storage.posix_io import Whole

_read_checked = getattr(posix_io._readfiles, "read_checked", None)  # None: a build before it
_ReadQueue = getattr(posix_io._readfiles, "ReadQueue", None)
_Names = getattr(posix_io._readfiles, "Names", None)

# a whole file's bytes before its data, that all files of its size hold alike but for a span,
# with where its CRC-32 and data lie (``formats._npyheader.Template``: head, skip_at,
# skip_len, crc_at, crc_start, data_start, data_end); a plain tuple: storage knows no format
Template = tuple[bytes, int, int, int, int, int, int]
Checked = tuple[np.ndarray, int]  # a file's data, checked against its template, and bytes read


def read_checked(paths: list[str], sizes: list[int], templates: list[Template | None],
                 pool: bufferpool.SampleBuffers | None = None,
                 ) -> tuple[list[Checked | Whole | None], int]:
    """``posix_io.read_wholes``, where a file that matches its template (none: None) comes back as
    its data, an array (``buffer[data_start:data_end]``), not as its bytes: one that filled
    its size, whose bytes before its data are the template's (its skipped span aside) and, for a
    checksummed template, whose CRC-32 matches. All of it in C with the GIL released once
    (``_readfiles.read_checked``), so a file read this way costs no Python but its array and
    tuple. Also returns how many did not match (their bytes, or None, as ``read_wholes``):
    the caller decodes those through their format, which names what is wrong; without the
    C extension, all of them."""
    if _read_checked is None or posix_io._read_files is None:  # none (or tests turned it off)
        return list(posix_io.read_wholes(paths, sizes, pool)), len(paths)
    buffers = posix_io.buffers_for(sizes, pool)
    got, misses = _read_checked(paths, buffers, templates)
    return _entries(buffers, got, templates, misses, pool), misses


def _entries(buffers: list[np.ndarray], got: list[Checked | int],
             templates: list[Template | None], misses: int,
             pool: bufferpool.SampleBuffers | None) -> list[Checked | Whole | None]:
    """The C call's results as ``read_checked`` returns them (``_entry`` of each, where a file
    missed or memory is pooled; else as they are)."""
    if not misses and pool is None:
        return got  # type: ignore[return-value]  # every one (array, bytes read)
    return [_entry(buf, entry, template)
            for buf, entry, template in zip(buffers, got, templates, strict=True)]


def _entry(buf: np.ndarray, entry: Checked | int, template: Template | None,
           ) -> Checked | Whole | None:
    """One file of ``read_checked``: its data, its bytes or None. A pool's block goes back
    when the array it lent dies, and a slice of an array keeps only the block alive (numpy
    skips views in ``base``): its data is a view through a memoryview of the lent array."""
    if isinstance(entry, int):
        return (buf.data[:entry], entry) if entry >= 0 else None
    if template is not None and buf.base is not None:
        return np.frombuffer(buf.data[template[5]:template[6]], dtype=np.uint8), entry[1]
    return entry


class ReadQueue(Protocol):
    """``_readfiles.ReadQueue`` (its docstrings say what each call does)."""

    def submit(self, paths: list[str], buffers: list[np.ndarray],
               templates: list[Template | None], chunk: int = 1) -> object: ...

    def submit_named(self, names: object, ids: list[int] | np.ndarray, size: int,
                     template: Template | None, chunk: int = 1) -> object: ...

    def serve(self) -> None: ...

    def wait(self, ticket: object) -> tuple[Any, ...]: ...  # as its ticket was submitted

    def cancel(self, ticket: object) -> None: ...

    def close(self) -> None: ...


def read_queue() -> ReadQueue | None:
    """A new ``_readfiles.ReadQueue``; None without the C extension (or with tests' turning
    ``read_files`` off): the caller reads in its own threads."""
    if _ReadQueue is None or posix_io._read_files is None:
        return None
    queue: ReadQueue = _ReadQueue()
    return queue


def names(prefix: str, stem: str, folders: int, extension: str) -> object | None:
    """``_readfiles.Names``: the path of file i made in C, ``prefix`` +
    ``f"{i % folders:04d}/"`` (folders > 0) + ``f"{stem}_{i:07d}.{extension}"``, for
    ``ReadQueue.submit_named``; None without the C extension or a build before it."""
    if _Names is None or posix_io._read_files is None:
        return None
    return _Names(prefix, stem, folders, extension)


class Pending:
    """Files submitted to a ``ReadQueue`` (a batch): ``read_checked`` of them, by the threads
    in ``queue.serve()``, each taking ``chunk`` files at a time; ``result`` waits for them."""

    __slots__ = ("buffers", "pool", "queue", "templates", "ticket")

    def __init__(self, queue: ReadQueue, paths: list[str], sizes: list[int],
                 templates: list[Template | None],
                 pool: bufferpool.SampleBuffers | None = None, chunk: int = 1) -> None:
        self.queue, self.templates, self.pool = queue, templates, pool
        self.buffers = posix_io.buffers_for(sizes, pool)
        self.ticket = queue.submit(paths, self.buffers, templates, chunk)

    def result(self) -> tuple[list[Checked | Whole | None], int]:
        """``read_checked``'s results (a file never read: None), once a thread read them."""
        entries, misses = self.queue.wait(self.ticket)
        buffers, self.buffers = self.buffers, []  # the results keep what they use
        return _entries(buffers, entries, self.templates, misses, self.pool), misses

    def cancel(self) -> None:
        """Skip the files no thread has started."""
        self.queue.cancel(self.ticket)
