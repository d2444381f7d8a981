"""Write one data file: fill its samples, frame them in its format, write it atomically.

Formats that lay their files out themselves (npz, npy, indexed_binary, tfrecord:
``AssembledFormat``) are assembled in one page-aligned buffer per thread, reused from file
to file, with the samples filled in place, and handed to the backend's writer at once
(O_DIRECT on POSIX); the CRC-32C comes from the bytes in memory. Parquet
(``StreamedFormat``) is filled, encoded and written a slice of rows at a time, its CRC-32C
kept as the bytes pass. Other formats (hdf5, images) write their file themselves into the
writer's spool file, or build it in memory, and are checksummed from there.
"""

from __future__ import annotations

import errno
import functools
import os
import threading
from dataclasses import dataclass

import crc32c
import numpy as np

import dliobench.storage.posix_io as storage
from dliobench.base.errors import DatasetError
from dliobench.config.schema import DatasetConfig
from dliobench.dataset import fill as datafill
from dliobench.dataset.layout import DataFile
from dliobench.formats.base import (
    AssembledFormat,
    EncodedFormat,
    FileFormat,
    Format,
    StreamedFormat,
)
from dliobench.storage.backend import Backend, Writer
from dliobench.storage.buffers import AlignedBuffer

_buffers = threading.local()  # one reused AlignedBuffer per writer thread
# Smaller files are written buffered: a synchronous device write per file then costs more
# than the page-cache copy (2 threads: 256 KiB files 0.48 GB/s buffered vs 0.42 O_DIRECT;
# 1 MiB files 0.72 vs 1.04).
DIRECT_MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class Fill:
    """What decides the bytes of every file: the base buffer, the seed, the compressibility."""

    base: np.ndarray
    seed: int
    compressibility: float
    direct: bool  # O_DIRECT writes where the format allows
    sample_crcs: bool = False  # record each sample's CRC-32C too

    @classmethod
    def for_dataset(cls, dataset: DatasetConfig) -> Fill:
        """The fill of ``dataset``'s files (its seed, compressibility and write mode)."""
        return cls(datafill.base_buffer(dataset.generation_seed), dataset.generation_seed,
                   dataset.compressibility, dataset.write_odirect, dataset.sample_checksums)

    def samples(self, fmt: Format | FileFormat, f: DataFile, out: np.ndarray,
                crcs: list[int], first: int = 0) -> None:
        """Fill file ``f``'s (num_samples, bytes) array ``out`` (or its rows from ``first``
        on, at a byte offset that is a multiple of ``datafill.STAMP_EVERY``); with
        ``sample_crcs`` append the CRC-32C of what the format keeps of each sample to
        ``crcs``."""
        datafill.fill(out, self.base, self.seed, f.index, self.compressibility,
                      first * f.sample_bytes)
        if self.sample_crcs:
            crcs.extend(crc32c.crc32c(np.ascontiguousarray(fmt.stored_bytes(row)).data)
                        for row in out)


@dataclass(frozen=True)
class Written:
    """A file just written: its size and CRC-32C, and those of its side files (in the
    format's ``side_suffixes`` order)."""

    size: int
    crc: int
    sides: tuple[tuple[int, int], ...] = ()
    sample_crcs: tuple[int, ...] = ()  # with ``Fill.sample_crcs``


def write_file(fmt: Format, backend: Backend, key: str, f: DataFile, fill: Fill) -> Written:
    """Write one file and its side files through the backend (durable at the next sync).

    Written in place (no temporary name): the manifest's journal record, appended after the
    next sync, is what commits the set; until then, or after a crash, the files are not part
    of the dataset, and the next generation writes them anew. Any error removes them.
    """
    writers: list[Writer] = []
    crcs: list[int] = []
    try:
        assembled = fmt if isinstance(fmt, AssembledFormat) else None
        bound = assembled.assembled_size(f.num_samples, f.sample_bytes) if assembled else None
        if assembled is not None and bound is not None:
            size, crc, sides = _write_assembled(assembled, backend, key, f, fill, bound,
                                                writers, crcs)
        elif isinstance(fmt, StreamedFormat) and not fmt.side_suffixes:
            size, crc, sides = _write_streamed(fmt, backend, key, f, fill, writers, crcs)
        else:
            size, crc, sides = _write_spooled(fmt, backend, key, f, fill, writers, crcs)
        side_entries = []
        for suffix in fmt.side_suffixes:
            data = sides[suffix]
            side = backend.open_write(key + suffix, atomic=False)
            writers.append(side)
            side.write(data)
            side.commit()
            side_entries.append((len(data), crc32c.crc32c(data)))
        writers[0].commit()
    except OSError as exc:
        for writer in writers:
            writer.abort()
        raise write_error(backend, key, exc) from None
    return Written(size, crc, tuple(side_entries), tuple(crcs))


def write_error(backend: Backend, key: str, exc: OSError) -> DatasetError:
    """The one sentence for a data file that could not be written."""
    if exc.errno == errno.ENOSPC:
        return DatasetError(
            f"the storage holding {backend.describe()} is full; free space or choose "
            "another dataset.data_folder (complete files are kept; `dliobench generate` "
            "resumes)")
    return DatasetError(f"cannot write {backend.describe(key)}: {exc.strerror}")


def _write_spooled(fmt: Format, backend: Backend, key: str, f: DataFile, fill: Fill,
                   writers: list[Writer], crcs: list[int]) -> tuple[int, int, dict[str, bytes]]:
    """A format whose library writes a whole file itself (Pillow): into the writer's spool
    file, read back for the CRC; or builds it in memory (h5py): written from there."""
    samples = np.empty((f.num_samples, f.sample_bytes), dtype=np.uint8)
    fill.samples(fmt, f, samples, crcs)
    writer = backend.open_write(key, atomic=False)
    writers.append(writer)
    if isinstance(fmt, EncodedFormat) and not fmt.side_suffixes:  # built in memory
        image = fmt.encode(samples)
        del samples
        writer.write(image)
        return len(image), crc32c.crc32c(image), {}
    spool = writer.spool_path()
    fmt.write(spool, samples)
    del samples
    sides = {suffix: path.read_bytes()
             for suffix, path in zip(fmt.side_suffixes, fmt.side_files(spool), strict=True)}
    for path in fmt.side_files(spool):
        path.unlink()
    return os.stat(spool).st_size, storage.file_crc32c(spool), sides


class _CountingSink:
    """A storage writer that keeps the count and running CRC-32C of the bytes it passes on."""

    def __init__(self, writer: Writer) -> None:
        self.writer, self.size, self.crc = writer, 0, 0

    def write(self, data: memoryview | bytes) -> None:
        view = memoryview(data).cast("B")
        self.writer.write(view)
        self.crc = crc32c.crc32c(view, self.crc)
        self.size += len(view)


def _write_streamed(fmt: StreamedFormat, backend: Backend, key: str, f: DataFile, fill: Fill,
                    writers: list[Writer],
                    crcs: list[int]) -> tuple[int, int, dict[str, bytes]]:
    """A format written a slice of samples at a time (parquet): each slice filled, encoded and
    written before the next; the CRC-32C kept as the bytes pass."""
    writer = backend.open_write(key, atomic=False)
    writers.append(writer)
    sink = _CountingSink(writer)
    fmt.stream(sink, f.num_samples, f.sample_bytes,
               lambda rows, first: fill.samples(fmt, f, rows, crcs, first),
               datafill.STAMP_EVERY)
    return sink.size, sink.crc, {}


def _write_assembled(fmt: AssembledFormat, backend: Backend, key: str, f: DataFile, fill: Fill,
                     bound: int, writers: list[Writer],
                     crcs: list[int]) -> tuple[int, int, dict[str, bytes]]:
    """Lay the file out in this thread's aligned buffer, samples filled in place; write once.

    The CRC-32C comes from the bytes in memory: nothing is read back.
    """
    buffer = getattr(_buffers, "buffer", None)
    if buffer is None:
        buffer = _buffers.buffer = AlignedBuffer()
    view = buffer.view(bound)
    end = fmt.assemble(view, f.num_samples, f.sample_bytes,
                       functools.partial(fill.samples, fmt, f, crcs=crcs))
    crc = crc32c.crc32c(view[:end])
    writer = backend.open_write(key, direct=fill.direct and end >= DIRECT_MIN_BYTES,
                                atomic=False)
    writers.append(writer)
    writer.write(view[:end])
    return end, crc, fmt.side_file_bytes(f.num_samples, f.sample_bytes)
