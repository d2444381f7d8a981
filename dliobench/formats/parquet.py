"""Parquet through pyarrow: a sample is a row; a row is its columns' values side by side.

The layout of DLIO's parquet generator and reader (the keys of mlcommons/storage
``configs/dlio/workload/dlrm_b200.yaml`` and ``flux_b200.yaml``, see the workload files):
``dataset.parquet.columns`` gives each column's name, dtype and ``size`` (values per row: a
column of size 1 is a plain column, a larger one a fixed-size list), ``row_group_size`` the
rows per row group, ``read: false`` columns are written but not read, ``dataset.compression``
the page codec. Without columns a row is one uint8 column of ``record_length_bytes``.
Columns of 8- and 16-bit integers are stored as their bytes, a fixed-length value per row
(``packed``): parquet would widen each value to 32 bits, and the files would be up to 4x the
bytes asked. Every column then takes the bytes asked (lists add a few bytes per row).

Generation is vectorised: the generator's (rows, row bytes) array of fill bytes is cut into
columns, each viewed as its dtype and handed to Arrow as one buffer (no per-row Python), and
the file is written through the storage backend a slice of row groups at a time
(``StreamedFormat``), each slice filled just before it is encoded.

Reading goes through the storage seam: a file with a local path (POSIX, buffered) is read by
pyarrow's own file, in the reading thread, and counted by that thread's read counters
(``/proc/thread-self/io``: every byte its read calls transferred, the footer and the column
chunks of each row group read); O_DIRECT reads and object stores go through the backend's
counting file object. Either way the bytes are counted as read from storage.
A sample's whole row group (of the columns read) is read and decoded, as DLIO's
``read_mode: row_group`` does. Nothing decoded is kept between calls (it would serve later
reads from memory, never to pass as storage speed), so reading row by row (``read_sample``)
reads a row group per row; ``read_rows`` hands back many rows of one file as columns (an array
per column read, as DLRM's pipelines hand label, dense and sparse features to the model),
reading each row group they need once: the path of loaders that read a batch at once.
Open files (their footers read and counted once) are kept per thread, a few at a time.
Columns are handed over as numpy views of Arrow's buffers (pyarrow's ``to_numpy`` would
import pandas inside the first step and copy fixed-size lists' values).
Modules: this one (the format: its options, reading rows), ``_parquet_columns`` (rows to
Arrow columns and back), ``_parquet_write`` (generation a slice at a time),
``_parquet_open`` (open files per thread and the bytes their reads cost).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from dliobench.base.errors import ConfigError, CorruptSampleError, DatasetError, MissingExtraError
from dliobench.config.schema import ParquetColumn
from dliobench.formats._parquet_columns import DEFAULT_COLUMN, column_arrays, row_bytes
from dliobench.formats._parquet_open import ERRORS, OpenFile, open_file
from dliobench.formats._parquet_write import write_rows
from dliobench.formats.base import (
    ByteRange,
    Columns,
    RowFill,
    Sink,
    Stored,
    StreamedFormat,
    consecutive,
)

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("pyarrow", "parquet") from exc

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig

CODECS = ("none", "snappy", "gzip", "lz4", "zstd", "brotli")


class ParquetFormat(StreamedFormat):
    """Rows of fixed-width columns in row groups; uncompressed by default."""

    name = "parquet"
    extension = "parquet"
    head_bytes = 0  # pyarrow reads the file itself (read_sample)
    reads_itself = True
    reads_rows = True

    def __init__(self, columns: tuple[ParquetColumn, ...] = (), row_group_size: int = 1024,
                 compression: str = "none") -> None:
        """Columns of a row (none: one uint8 column as wide as the sample), rows per row
        group, and the page codec."""
        if compression not in CODECS:
            raise ConfigError(f"parquet compression '{compression}' is not supported; use "
                              + ", ".join(CODECS))
        if columns and not any(c.read for c in columns):
            raise ConfigError("dataset.parquet.columns: every column has read: false; read "
                              "at least one")
        self.columns = columns
        self.row_group_size = max(1, row_group_size)
        self.compression = compression
        self._local = threading.local()

    def configured(self, dataset: DatasetConfig) -> ParquetFormat:
        """The format for the dataset's parquet keys and compression."""
        if dataset.enable_chunking:
            raise ConfigError("dataset.enable_chunking applies to the hdf5 format only")
        if dataset.parquet_columns:
            width = sum(c.width for c in dataset.parquet_columns)
            if width != dataset.record_length_bytes or dataset.record_length_bytes_stdev:
                raise ConfigError(
                    f"dataset.parquet.columns make rows of {width} bytes; set "
                    f"dataset.record_length_bytes to {width} (and its stdev to 0)")
        return ParquetFormat(dataset.parquet_columns, dataset.parquet_row_group_size,
                             dataset.compression)

    def _columns(self, width: int) -> tuple[ParquetColumn, ...]:
        return self.columns or (ParquetColumn(DEFAULT_COLUMN, "uint8", width),)

    def stream(self, sink: Sink, num_samples: int, sample_bytes: int, fill: RowFill,
               fill_unit: int) -> None:
        """The parquet file of ``num_samples`` rows, column by column, written to ``sink`` a
        slice of whole row groups at a time (``_parquet_write``)."""
        columns = self._columns(sample_bytes)
        if sum(c.width for c in columns) != sample_bytes:
            # only the free-space probe's files of rows narrower than the columns' (wide
            # rows: ``configured`` checks the dataset's rows against the columns): one packed
            # column of their width, its bytes stored as the columns' values are
            columns = (ParquetColumn(DEFAULT_COLUMN, "uint8", sample_bytes),)
        write_rows(sink, columns, num_samples, sample_bytes, fill, fill_unit,
                   self.row_group_size, self.compression)

    def read_sample(self, src: Stored, file_size: int, num_samples: int, index: int,
                    odirect: bool) -> tuple[np.ndarray, int]:
        """Row ``index``'s bytes (of the columns read) and the bytes read from storage."""
        columns, nbytes = self.read_rows(src, file_size, num_samples,
                                         np.array([index], dtype=np.int64), odirect)
        return row_bytes(columns)[0], nbytes

    def read_rows(self, src: Stored, file_size: int, num_samples: int, indices: np.ndarray,
                  odirect: bool) -> tuple[Columns, int]:
        """Rows ``indices`` of the file as its columns read (an array per column, in that
        order), and the bytes read from storage to get them (whole row groups, each once).

        Consecutive rows (a file read in order) come as views of one buffer per column that
        pyarrow decoded the row groups they span into (no join, no copy); others are
        gathered."""
        handle, nbytes = open_file(self._local, src, num_samples, odirect)
        size = self.row_group_size
        if consecutive(indices):  # one read of the row groups they span, then a slice
            first, last = int(indices[0]), int(indices[-1]) + 1
            batch, got = self._load(handle, src, num_samples, first // size,
                                    (last - 1) // size)
            start = first - first // size * size
            return column_arrays(batch.slice(start, last - first)), nbytes + got
        groups = indices // size
        order = np.argsort(groups, kind="stable")
        out: list[np.ndarray] = []
        for part in np.split(order, np.flatnonzero(np.diff(groups[order])) + 1):
            group = int(groups[part[0]])
            batch, got = self._load(handle, src, num_samples, group, group)
            nbytes += got
            columns = column_arrays(batch)
            if not out:
                out = [np.empty((indices.size, *c.shape[1:]), c.dtype) for c in columns]
            rows = indices[part] - group * size
            for target, values in zip(out, columns, strict=True):
                target[part] = values[rows]
        return tuple(out), nbytes

    def _load(self, handle: OpenFile, src: Stored, num_samples: int, first: int,
              last: int) -> tuple[pa.RecordBatch, int]:
        """Row groups ``first`` to ``last`` (their columns read) as one record batch, and the
        bytes read.

        One ``iter_batches`` batch as long as the groups: pyarrow decodes them straight into
        one buffer per column (``read_row_groups`` hands a chunk per group, which a batch
        spanning groups must then join: a copy of every value)."""
        if handle.raw is not None:
            handle.raw.forget()
        names = [c.name for c in self._file_columns(handle.pf) if c.read]
        size = self.row_group_size
        rows = min((last + 1) * size, num_samples) - first * size
        before = handle.bytes_read()
        try:  # in this thread (use_threads=False), so its read counters see every read
            batch = next(handle.pf.iter_batches(rows, list(range(first, last + 1)), names,
                                                use_threads=False))
        except (*ERRORS, StopIteration) as exc:
            which = f"{first}" if first == last else f"{first}-{last}"
            raise CorruptSampleError(str(src), 0, f"pyarrow cannot read row group {which} "
                                     f"({exc or 'no rows'})") from None
        return batch, handle.bytes_read() - before

    def _file_columns(self, pf: pq.ParquetFile) -> tuple[ParquetColumn, ...]:
        if self.columns:
            return self.columns
        return (ParquetColumn(pf.schema_arrow.names[0], "uint8", 0),)

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Not used: pyarrow does the reading (``read_sample``)."""
        raise DatasetError(f"{src}: parquet rows are read through pyarrow (read_sample)")

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """The first row of a whole file held in memory."""
        if not whole_file:
            raise DatasetError(f"{src}: parquet rows are read through pyarrow (read_sample)")
        try:
            pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
            names = [c.name for c in self._file_columns(pf) if c.read]
            batch = next(pf.iter_batches(pf.metadata.row_group(0).num_rows, [0], names))
        except (*ERRORS, StopIteration) as exc:
            raise CorruptSampleError(str(src), 0, f"pyarrow cannot read the file ({exc})") \
                from None
        return row_bytes(column_arrays(batch))[0]

    def stored_bytes(self, sample: np.ndarray) -> np.ndarray:
        """The bytes of the columns read: what a read hands back."""
        if not self.columns:
            return sample
        flat = sample.reshape(-1).view(np.uint8)
        parts, start = [], 0
        for col in self.columns:
            if col.read:
                parts.append(flat[start:start + col.width])
            start += col.width
        return np.concatenate(parts)



FORMAT = ParquetFormat(row_group_size=1)
"""Unconfigured (tools, contract suites): a row per row group, so a row read alone costs its
own bytes; runs use ``dataset.parquet.row_group_size`` (``configured``)."""
