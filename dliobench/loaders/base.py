"""The loader contract: batches of decoded samples, with the bytes read to produce them."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import crc32c
import numpy as np

import dliobench.storage.checked_reads as checked_reads
from dliobench.base.errors import ConfigError, CorruptSampleError, unreadable
from dliobench.formats.base import ByteRange, Columns, Format, Stored, consecutive
from dliobench.loaders.queued import Started
from dliobench.storage.backend import Backend
from dliobench.storage.buffers import SampleBuffers
from dliobench.storage.checked_reads import Template
from dliobench.storage.posix import PosixBackend

TEMPLATES = 256  # file sizes whose headers ``read_many`` keeps, at most


@dataclass
class Batch:
    """One step's input: the global ids of its samples, their data and the bytes read.

    ``data`` is a list of samples, one array whose rows are the samples (the native loader's
    one-sample files of one size, read into one block), or the batch's columns for formats
    read a batch at once (``SampleReader.batched``: parquet)."""

    ids: np.ndarray
    nbytes: int
    data: list[np.ndarray] | np.ndarray | Columns

    @property
    def samples(self) -> int:
        """Samples in the batch."""
        return int(self.ids.size)


class FileChecksums(Protocol):
    """Per-sample CRC-32C by file index (``plan.FileRows``)."""

    def __getitem__(self, index: int) -> np.ndarray:
        """The checksums of file ``index``'s samples."""


class Loader(Protocol):
    """Delivers a rank's batches of one epoch, in the order ``sharding`` gives."""

    @property
    def deviations(self) -> list[str]:
        """How this loader departs from the run's plan, in words for the result (often none);
        still readable after ``close``."""

    def epoch(self, ids: np.ndarray) -> Generator[Batch, None, None]:
        """Batches of the sample ids ``ids`` (already sharded and ordered for this rank);
        closing the generator leaves the epoch early."""

    def close(self) -> None:
        """Release threads, processes and open files."""


def refuse_rows(fmt: Format, loader: str) -> None:
    """Refuse formats read as rows of columns (parquet) in loaders that take samples only."""
    if fmt.reads_rows:
        raise ConfigError(f"reader.data_loader: {loader} does not read {fmt.name} files "
                          "(rows of columns); use native or pytorch")


class SampleReader:
    """Reads and decodes one sample by global id through the storage backend, counting the
    bytes read.

    Shared by the loaders so that every loader reads and counts the same way. Thread-safe:
    the only state is a per-file cache of sample byte ranges for multi-sample files.
    ``keys`` and ``sizes`` are indexed by file (sequences that may compute their items).
    """

    def __init__(self, fmt: Format, backend: Backend, keys: Sequence[str],
                 sizes: Sequence[int], samples_per_file: int, resize_bytes: int = 0,
                 odirect: bool = False, sample_crcs: FileChecksums | None = None,
                 decode: bool = True) -> None:
        self.fmt = fmt
        self.backend = backend
        self.keys = keys
        self.sizes = sizes
        self.samples_per_file = samples_per_file
        self.resize_bytes = resize_bytes
        self.odirect = odirect
        self.sample_crcs = sample_crcs  # verify each sample against them when given
        self.decode = decode  # False: images stay encoded (reader.decode)
        self._layouts: dict[int, list[ByteRange]] = {}
        # per file size, the headers every whole file of that size repeats (``read_many``)
        self.templates: dict[int, Template | None] = {}
        self._learns = hasattr(fmt, "whole_template") and (decode or not fmt.compressed_image)

    @classmethod
    def for_paths(cls, fmt: Format, paths: Sequence[str | Path], sizes: Sequence[int],
                  samples_per_file: int, resize_bytes: int = 0,
                  odirect: bool = False) -> SampleReader:
        """A reader of local files named by path (tests and tools)."""
        keys = [str(Path(p).absolute()) for p in paths]
        return cls(fmt, PosixBackend("/"), keys, sizes, samples_per_file, resize_bytes, odirect)

    @property
    def batched(self) -> bool:
        """Whether batches are read whole (``read_batch``): formats that read many rows at
        once, when samples are neither verified nor resized one by one."""
        return self.fmt.reads_rows and self.sample_crcs is None and not self.resize_bytes

    def read_batch(self, sample_ids: np.ndarray) -> tuple[Columns, int]:
        """Samples ``sample_ids`` as columns (an array per column, a row per sample, in that
        order) and the bytes read: each file's rows in one ``read_rows`` call, no per-sample
        Python."""
        ids = np.asarray(sample_ids, dtype=np.int64)
        first = int(ids[0]) // self.samples_per_file if ids.size else 0
        if consecutive(ids) and int(ids[-1]) // self.samples_per_file == first:
            # a run of one file's rows (an unshuffled batch): no per-row sorting or splitting
            return self._read_rows(first, ids - first * self.samples_per_file)
        files, rows = np.divmod(ids, self.samples_per_file)
        order = np.argsort(files, kind="stable")
        out: list[np.ndarray] = []
        nbytes = 0
        for part in np.split(order, np.flatnonzero(np.diff(files[order])) + 1):
            if not part.size:
                continue
            got, n = self._read_rows(int(files[part[0]]), rows[part])
            nbytes += n
            if part.size == ids.size:  # all rows from one file: read_rows put them in order
                return got, nbytes
            if not out:
                out = [np.empty((ids.size, *c.shape[1:]), c.dtype) for c in got]
            where: slice | np.ndarray = part
            if int(part[-1]) - int(part[0]) == part.size - 1:  # in order: plain slice copies
                where = slice(int(part[0]), int(part[-1]) + 1)
            for target, values in zip(out, got, strict=True):
                target[where] = values
        return tuple(out), nbytes

    def _read_rows(self, file_index: int, rows: np.ndarray) -> tuple[Columns, int]:
        """Rows ``rows`` of one file as columns, and the bytes read for them."""
        src = Stored(self.backend, self.keys[file_index])
        try:
            got, n = self.fmt.read_rows(src, self.sizes[file_index], self.samples_per_file,
                                        rows, self.odirect)
        except OSError as exc:
            raise unreadable(str(src), exc, "") from None
        return got, n + src.nbytes

    def uniform_file_size(self) -> int | None:
        """The size every file has, when all do (a reused-buffer pool fits them), else None."""
        uniform = getattr(self.sizes, "uniform", None)
        return uniform() if uniform is not None else None

    @property
    def num_files(self) -> int:
        """Files the reader can read."""
        return len(self.keys)

    def read(self, sample_id: int) -> tuple[np.ndarray, int]:
        """The sample's decoded (and resized) data and the bytes read to get it.

        A file that cannot be read (gone, not a regular file, an I/O error) raises
        DatasetError naming it and the sample; a damaged one CorruptSampleError.
        """
        file_index, k = divmod(int(sample_id), self.samples_per_file)
        src = Stored(self.backend, self.keys[file_index])
        try:
            return self._read(src, file_index, k)
        except OSError as exc:
            where = f"sample {k}" if self.samples_per_file > 1 else ""
            layout = self._layouts.get(file_index)
            if layout is not None:
                where += f" at byte offset {layout[k].offset}"
            raise unreadable(str(src), exc, where.strip()) from None

    def read_many(self, sample_ids: list[int],
                  pool: SampleBuffers | None = None) -> list[tuple[np.ndarray, int]]:
        """``read`` of each sample, in order; files read whole (one sample per file) are read
        together where the backend can (``read_wholes``: one GIL release for all of them),
        files of ``pool``'s size into its reused memory. A format whose files repeat their
        headers (npy, npz: ``whole_template``) is parsed once per file size: the others are
        checked against that file's headers (and CRC-32) in the same C call and come back
        as their arrays (``read_checked``), with no Python per sample; a file that does not
        match is decoded as any other, so its error (a CRC-32 mismatch) is the format's."""
        read_wholes = getattr(self.backend, "read_wholes", None)
        if (read_wholes is None or self.samples_per_file != 1 or self.odirect
                or self.fmt.reads_itself):
            return [self.read(sample_id) for sample_id in sample_ids]
        keys, sizes, templates = self._files(sample_ids)
        read_checked = getattr(self.backend, "read_checked", None) if self._learns else None
        try:
            if read_checked is None:
                got, misses = read_wholes(keys, sizes, pool), len(keys)
            else:
                got, misses = read_checked(keys, sizes, templates, pool)
        except OSError:  # the batch call itself failed: each file alone says what is wrong
            return [self.read(sample_id) for sample_id in sample_ids]
        return self._results(sample_ids, keys, got, misses)

    def read_queue(self) -> checked_reads.ReadQueue | None:
        """A queue whose threads read this reader's samples with no Python
        (``checked_reads.read_queue``): one-sample npy or npz files, page-cached, on a backend
        that submits to one; else None (``read_many`` in the caller's threads). Not where
        samples are resized to less than their files: a queued batch holds its files until
        handed over, a reader thread only the resized copies (UNet3D's 2 MiB of ~147 MB
        files, batch 7: 2.1 GB peak RSS against 0.8 GB)."""
        if (not self._learns or self.samples_per_file != 1 or self.odirect
                or self.fmt.reads_itself or not hasattr(self.backend, "submit_checked")):
            return None
        if self.resize_bytes:
            size = self.uniform_file_size()
            if size is None or size > self.resize_bytes:
                return None
        return checked_reads.read_queue()

    def start_many(self, sample_ids: list[int], queue: checked_reads.ReadQueue,
                   pool: SampleBuffers | None = None, chunk: int = 1) -> Started:
        """``read_many`` by the threads of ``queue`` (``read_queue``), each taking ``chunk``
        files at a time: ``.result()`` waits for them; the files that do not match their
        template (the first of each size) are decoded by the caller of ``result``."""
        keys, sizes, templates = self._files(sample_ids)
        pending = self.backend.submit_checked(  # type: ignore[attr-defined]
            queue, keys, sizes, templates, pool, chunk)
        return Started(self._results, sample_ids, keys, pending)

    def _files(self, sample_ids: list[int]) -> tuple[list[str], list[int],
                                                     list[Template | None]]:
        """The key, size and known template (None: none yet) of each one-sample file, with
        no call per file where the plan's sequences allow (``many``), one template lookup
        where all are one size."""
        keys_of, sizes_of = getattr(self.keys, "many", None), getattr(self.sizes, "many", None)
        keys = keys_of(sample_ids) if keys_of else [self.keys[i] for i in sample_ids]
        sizes = sizes_of(sample_ids) if sizes_of else [self.sizes[i] for i in sample_ids]
        known = self.templates
        if sizes[:1] * len(sizes) == sizes:
            return keys, sizes, [known.get(sizes[0])] * len(sizes) if sizes else []
        return keys, sizes, [known.get(n) for n in sizes]

    def _results(self, sample_ids: list[int], keys: list[str],
                 got: Sequence[tuple[np.ndarray, int] | tuple[memoryview, int] | None],
                 misses: int) -> list[tuple[np.ndarray, int]]:
        """The samples of ``read_checked``'s results (``got``), in order."""
        if not misses and not self.resize_bytes and self.sample_crcs is None:
            return got  # type: ignore[return-value]  # all checked: (array, bytes read)
        return [self.finish(sample_id, key, whole)
                for sample_id, key, whole in zip(sample_ids, keys, got, strict=True)]

    def finish(self, sample_id: int, key: str,
                whole: tuple[np.ndarray | memoryview, int] | None) -> tuple[np.ndarray, int]:
        """The sample of a file ``read_many`` read (its data when its template matched, its
        bytes otherwise, None when it could not be read) and the bytes read for it."""
        if whole is None:  # read it again alone: the error in words, or a late success
            return self.read(sample_id)
        src = Stored(self.backend, key)
        data, nbytes = whole
        if isinstance(data, np.ndarray):
            sample = data
        else:
            sample = self._whole(src, sample_id, data)
            self._learn(src, len(data), data)
        if self.sample_crcs is not None:
            self._verify(src, sample_id, 0, sample)
        return self._resize(sample), nbytes + src.nbytes

    def _learn(self, src: Stored, size: int, data: memoryview) -> None:
        """Keep the template of a file of ``size`` bytes just decoded whole, the first of its
        size (at most ``TEMPLATES`` sizes: a dataset of many sizes reads most files as
        before)."""
        if self._learns and size not in self.templates and len(self.templates) < TEMPLATES:
            # None (headers too long to keep) is kept too: the file is not parsed twice again
            self.templates[size] = self.fmt.whole_template(src, data)  # type: ignore[attr-defined]

    def _whole(self, src: Stored, file_index: int, data: memoryview) -> np.ndarray:
        """The sample of a one-sample file from the file's bytes."""
        size = self.sizes[file_index]
        if len(data) < size:
            raise CorruptSampleError(str(src), len(data), "file is truncated: the manifest "
                                     f"says {size} bytes")
        if self.decode or not self.fmt.compressed_image:
            return self.fmt.decode(src, data, whole_file=True)
        return np.frombuffer(data, dtype=np.uint8)  # reader.decode=false: as read

    def _read(self, src: Stored, file_index: int, k: int) -> tuple[np.ndarray, int]:
        size = self.sizes[file_index]
        if self.fmt.reads_itself:  # the format's library does its own (counted) I/O
            sample, nbytes = self.fmt.read_sample(src, size, self.samples_per_file, k,
                                                  self.odirect)
        elif self.samples_per_file == 1:
            data, nbytes = self.backend.read_range(src.key, 0, size, self.odirect)
            sample = self._whole(src, file_index, data)
        else:
            ranges, nbytes = self._layout(file_index, src)
            rng = ranges[k]
            data, got = self.backend.read_range(src.key, rng.offset, rng.length, self.odirect)
            nbytes += got
            if len(data) < rng.length:
                raise CorruptSampleError(str(src), rng.offset + len(data), "file is truncated")
            try:
                sample = self.fmt.decode(src, data, whole_file=False)
            except CorruptSampleError as exc:  # offsets inside the range -> offsets in the file
                raise CorruptSampleError(str(src), rng.offset + exc.offset, exc.reason) from None
        if self.sample_crcs is not None:
            self._verify(src, file_index, k, sample)
        return self._resize(sample), nbytes + src.nbytes  # side files read for it count too

    def _verify(self, src: Stored, file_index: int, k: int, sample: np.ndarray) -> None:
        """Raise CorruptSampleError when sample ``k`` is not the bytes generated."""
        assert self.sample_crcs is not None
        want = int(self.sample_crcs[file_index][k])
        got = crc32c.crc32c(np.ascontiguousarray(sample).reshape(-1).view(np.uint8).data)
        if got != want:
            offset = self._layouts[file_index][k].offset if file_index in self._layouts else 0
            raise CorruptSampleError(str(src), offset, f"sample {k} does not match the CRC-32C "
                                     "the manifest recorded (reader.verify_samples)")

    def _layout(self, file_index: int, src: Stored) -> tuple[list[ByteRange], int]:
        """Byte ranges of a file's samples, and the bytes read to learn them (0 if cached)."""
        cached = self._layouts.get(file_index)
        if cached is not None:
            return cached, 0
        size = self.sizes[file_index]
        head, nbytes = self.backend.read_range(src.key, 0, min(self.fmt.head_bytes, size),
                                               self.odirect)
        ranges = self.fmt.layout(src, head, size, self.samples_per_file)
        self._layouts[file_index] = ranges
        return ranges, nbytes  # side files read by layout() are counted in src.nbytes

    def _resize(self, sample: np.ndarray) -> np.ndarray:
        """Hand compute a buffer of the preprocessed size, as DLIO's resize does.

        It starts with the sample's bytes; the rest is left as allocated (emulated compute
        never looks at it, and zeroing 2 MiB per sample cost the PyTorch loader 14 % of its
        samples/s at DLIO's unet3d resize).
        """
        if not self.resize_bytes:
            return sample
        out = np.empty(self.resize_bytes, dtype=np.uint8)
        flat = sample.reshape(-1).view(np.uint8)
        n = min(self.resize_bytes, flat.size)
        out[:n] = flat[:n]
        return out
