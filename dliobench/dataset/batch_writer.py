"""Write one batch of a generation's files; return their manifest journal records.

A batch travels to its writer as two arrays (file indices, sample sizes) and comes back as
journal records (``records.record_dtype``): no Python object per file crosses a process or
stays in the main one, whatever the file count.

Small files (under ``WRITEBACK_MIN_BYTES``) of a contiguous format without side files (npy,
npz) on a local file system are made together: the samples of every file of a size are
filled in one pass over one buffer (``fill.fill_rows``, the same bytes as file by file), the
framing placed around them, and each file written with ``Backend.write_new`` (open, write,
close). Other files go through ``file_writer.write_file`` one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

import crc32c
import numpy as np

from dliobench.config.schema import DatasetConfig
from dliobench.dataset import fill as datafill
from dliobench.dataset.file_writer import Fill, write_error, write_file
from dliobench.dataset.layout import TRAIN, DataFile, relpath
from dliobench.dataset.records import record_dtype
from dliobench.formats.base import ContiguousFormat, Format
from dliobench.storage.backend import Backend
from dliobench.storage.posix import WRITEBACK_MIN_BYTES

MAX_PER_BATCH = 256  # files per writer task, at most
BATCH_BYTES = 64 << 20  # payload per writer task, at most (large files: one each)


@dataclass(frozen=True)
class FileBatch:
    """Files to write: their indices and sample sizes (all with the same sample count)."""

    indices: np.ndarray  # int64
    sample_bytes: np.ndarray  # int64, per file
    num_samples: int

    def __len__(self) -> int:
        return int(self.indices.size)

    @property
    def payload_bytes(self) -> int:
        """Bytes of sample data in the batch's files."""
        return int(self.sample_bytes.sum()) * self.num_samples


def batches(indices: np.ndarray, sample_bytes: np.ndarray, num_samples: int,
            workers: int) -> list[FileBatch]:
    """The files ``indices`` (sample sizes ``sample_bytes``, per file) in groups, so that
    small files do not cost a task each (large ones do)."""
    if not indices.size:
        return []
    largest = max(int(sample_bytes.max()) * num_samples, 1)
    per = max(1, min(MAX_PER_BATCH, indices.size // (8 * workers), BATCH_BYTES // largest))
    return [FileBatch(indices[i:i + per], sample_bytes[i:i + per], num_samples)
            for i in range(0, indices.size, per)]


@dataclass(frozen=True)
class Job:
    """What a writer needs for any batch: the format, the storage, the fill, the names."""

    fmt: Format
    backend: Backend
    fill: Fill
    dataset: DatasetConfig
    local: bool  # the storage is a local file system (small files are made together)

    def key(self, index: int) -> str:
        """The data file key of file ``index``."""
        return f"{TRAIN}/{relpath(self.dataset, index, self.fmt.extension)}"

    def record_dtype(self) -> np.dtype:
        """The journal records this job's files get."""
        samples = self.dataset.num_samples_per_file if self.fill.sample_crcs else 0
        return record_dtype(len(self.fmt.side_suffixes), samples)


class PartialBatch(Exception):
    """A batch that failed part way: the records of the files it wrote before ``error``."""

    def __init__(self, records: np.ndarray, error: BaseException) -> None:
        super().__init__(records, error)
        self.records = records
        self.error = error


def write_batch(job: Job, batch: FileBatch) -> np.ndarray:
    """Write the batch's files; their journal records, in the batch's order.

    Raises PartialBatch (the records of the files complete so far) on any error.
    """
    recs = np.zeros(len(batch), job.record_dtype())
    recs["index"] = batch.indices
    done = np.zeros(len(batch), dtype=bool)
    try:
        together = _together(job, batch)
        for size in np.unique(batch.sample_bytes[together]):
            rows = np.flatnonzero(together & (batch.sample_bytes == size))
            _write_small(job, batch.num_samples, int(size), batch.indices[rows], recs, rows,
                         done)
        for row in np.flatnonzero(~together):
            f = DataFile(int(batch.indices[row]), relpath(job.dataset, int(batch.indices[row]),
                                                          job.fmt.extension),
                         batch.num_samples, int(batch.sample_bytes[row]))
            written = write_file(job.fmt, job.backend, job.key(f.index), f, job.fill)
            recs[row]["size"], recs[row]["crc"] = written.size, written.crc
            if job.fmt.side_suffixes:
                recs[row]["side_size"] = [s for s, _ in written.sides]
                recs[row]["side_crc"] = [c for _, c in written.sides]
            if job.fill.sample_crcs:
                recs[row]["sample_crc"] = written.sample_crcs
            done[row] = True
    except Exception as exc:
        raise PartialBatch(recs[done], exc) from None
    return recs


def _together(job: Job, batch: FileBatch) -> np.ndarray:
    """Which of the batch's files are made together (small, contiguous, local, no sides)."""
    fmt = job.fmt
    if not (job.local and isinstance(fmt, ContiguousFormat)) or fmt.side_suffixes:
        return np.zeros(len(batch), dtype=bool)
    payload = batch.sample_bytes * batch.num_samples
    # head and tail are well under a page for these formats (``TAIL_ROOM``)
    return payload + 2 * 4096 < WRITEBACK_MIN_BYTES


def _write_small(job: Job, num_samples: int, sample_bytes: int, indices: np.ndarray,
                 recs: np.ndarray, rows: np.ndarray, done: np.ndarray) -> None:
    """Make the files ``indices`` (all of this sample size) in one buffer; write each."""
    fmt, fill = job.fmt, job.fill
    assert isinstance(fmt, ContiguousFormat)
    n = num_samples * sample_bytes
    head = fmt.head_size(num_samples, sample_bytes)
    samples = np.empty((indices.size, n), dtype=np.uint8)
    datafill.fill_rows(samples, fill.base, fill.seed, indices, fill.compressibility)
    shaped = samples.reshape(indices.size, num_samples, sample_bytes)
    envelopes = ([fmt.envelope(shaped[0])] * indices.size if fmt.envelope_from_shape
                 else [fmt.envelope(s) for s in shaped])
    tail = len(envelopes[0][1])
    if any(len(h) != head or len(t) != tail for h, t in envelopes):
        raise AssertionError(f"{fmt.name}: envelope does not match head_size or varies")
    files = np.empty((indices.size, head + n + tail), dtype=np.uint8)
    files[:, head:head + n] = samples
    if fmt.envelope_from_shape:
        files[:, :head] = np.frombuffer(envelopes[0][0], np.uint8)
        files[:, head + n:] = np.frombuffer(envelopes[0][1], np.uint8)
    else:
        for k, (h, t) in enumerate(envelopes):
            files[k, :head] = np.frombuffer(h, np.uint8)
            files[k, head + n:] = np.frombuffer(t, np.uint8)
    recs["size"][rows] = files.shape[1]
    recs["crc"][rows] = [crc32c.crc32c(row.data) for row in files]
    if fill.sample_crcs:
        recs["sample_crc"][rows] = [[crc32c.crc32c(np.ascontiguousarray(fmt.stored_bytes(s)).data)
                                     for s in file_samples] for file_samples in shaped]
    del samples
    write_new, key = job.backend.write_new, job.key
    for row, index, data in zip(rows, indices, files, strict=True):
        try:
            write_new(key(int(index)), data.data)
        except OSError as exc:
            raise write_error(job.backend, key(int(index)), exc) from None
        done[row] = True
