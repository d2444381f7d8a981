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
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from dliobench.config.schema import ParquetColumn
from dliobench.errors import ConfigError, CorruptSampleError, DatasetError, MissingExtraError
from dliobench.formats.base import (
    ByteRange,
    Columns,
    RowFill,
    Sink,
    Stored,
    StreamedFormat,
    consecutive,
)
from dliobench.storage.backend import CountingReader

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("pyarrow", "parquet") from exc

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig

STREAM_BYTES = 32 << 20  # rows filled and encoded at a time when generating
CODECS = ("none", "snappy", "gzip", "lz4", "zstd", "brotli")
DEFAULT_COLUMN = "data"
DTYPE_KEY = "dliobench.dtype"  # field metadata: the dtype of a packed column's values
_ERRORS = (OSError, ValueError, pa.ArrowException)


class _File(io.RawIOBase):
    """The backend's counting reader as the Python file object pyarrow reads."""

    def __init__(self, raw: CountingReader) -> None:
        self.raw = raw

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self.raw.readinto(buffer)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.raw.seek(offset, whence)

    def tell(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        self.raw.close()
        super().close()


OPEN_FILES_PER_THREAD = 8  # a batch's rows come from a few files: their footers are read once


THREAD_IO = "/proc/thread-self/io"  # this thread's I/O counters (Linux)


_own = threading.local()  # bytes of THREAD_IO this thread read: not the data's


def thread_bytes_read() -> int:
    """Bytes this thread's read calls transferred so far (``rchar`` of THREAD_IO), less the
    counters' own text read before (each reading of them is counted by the next one)."""
    fd = os.open(THREAD_IO, os.O_RDONLY)
    try:
        text = os.read(fd, 512)
    finally:
        os.close(fd)
    own = getattr(_own, "bytes", 0)
    _own.bytes = own + len(text)
    return int(text.split(b"rchar:", 1)[1].split(b"\n", 1)[0]) - own


def _native_counting() -> bool:
    """Whether pyarrow may read local files itself, counted by this thread's counters."""
    try:
        thread_bytes_read()
    except (OSError, IndexError, ValueError):
        return False
    return True


NATIVE_COUNTING = _native_counting()


class _Open:
    """One thread's open file: pyarrow's own file where the storage has a local path (its
    reads counted by the thread's read counters), else the backend's counting reader."""

    def __init__(self, key: tuple[object, ...], raw: CountingReader | None,
                 pf: pq.ParquetFile) -> None:
        self.key = key  # where, how (O_DIRECT) and which version of the object
        self.pid = os.getpid()  # a forked worker inherits it, but must open its own
        self.raw = raw
        self.pf = pf

    def bytes_read(self) -> int:
        """A running count of the bytes read for this file (compare two calls)."""
        return self.raw.nbytes if self.raw is not None else thread_bytes_read()

    def close(self) -> None:
        self.pf.close()
        if self.raw is not None:
            self.raw.close()


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
        slice of whole row groups at a time (``STREAM_BYTES`` or so): the same bytes as the
        file built at once."""
        columns = self._columns(sample_bytes)
        if sum(c.width for c in columns) != sample_bytes:
            # only the free-space probe's files of rows narrower than the columns' (wide
            # rows: ``configured`` checks the dataset's rows against the columns): one packed
            # column of their width, its bytes stored as the columns' values are
            columns = (ParquetColumn(DEFAULT_COLUMN, "uint8", sample_bytes),)
        slice_rows = self._slice_rows(sample_bytes, fill_unit)
        guarded = _Guarded(sink)
        writer: pq.ParquetWriter | None = None
        try:
            for first in range(0, max(num_samples, 1), slice_rows):
                rows = np.empty((min(slice_rows, num_samples - first), sample_bytes), np.uint8)
                fill(rows, first)
                table = _table(rows, columns)
                del rows
                if writer is None:
                    writer = pq.ParquetWriter(guarded, table.schema,
                                              compression=self.compression,
                                              write_statistics=False, use_dictionary=False)
                writer.write_table(table, row_group_size=self.row_group_size)
        except BaseException:
            guarded.shut = True  # the writer's footer (at close or collection) goes nowhere
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close()
            raise
        if writer is not None:
            writer.close()

    def _slice_rows(self, sample_bytes: int, fill_unit: int) -> int:
        """Rows per slice: whole row groups, starting at byte offsets that are multiples of
        ``fill_unit``, about ``STREAM_BYTES`` in all."""
        unit = fill_unit // math.gcd(fill_unit, max(sample_bytes, 1))  # rows per fill unit
        step = self.row_group_size * unit // math.gcd(self.row_group_size, unit)
        return step * max(1, STREAM_BYTES // max(1, step * sample_bytes))

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
        handle, nbytes = self._open(src, num_samples, odirect)
        size = self.row_group_size
        if consecutive(indices):  # one read of the row groups they span, then a slice
            first, last = int(indices[0]), int(indices[-1]) + 1
            batch, got = self._load(handle, src, num_samples, first // size,
                                    (last - 1) // size)
            start = first - first // size * size
            return _column_arrays(batch.slice(start, last - first)), nbytes + got
        groups = indices // size
        order = np.argsort(groups, kind="stable")
        out: list[np.ndarray] = []
        for part in np.split(order, np.flatnonzero(np.diff(groups[order])) + 1):
            group = int(groups[part[0]])
            batch, got = self._load(handle, src, num_samples, group, group)
            nbytes += got
            columns = _column_arrays(batch)
            if not out:
                out = [np.empty((indices.size, *c.shape[1:]), c.dtype) for c in columns]
            rows = indices[part] - group * size
            for target, values in zip(out, columns, strict=True):
                target[part] = values[rows]
        return tuple(out), nbytes

    def _open(self, src: Stored, num_samples: int, odirect: bool) -> tuple[_Open, int]:
        """This thread's open handle of ``src`` and the bytes opening it read (its footer)."""
        st = src.backend.stat(src.key)
        if st is None:
            raise FileNotFoundError(str(src))
        key = (str(src), odirect, st.version)
        handles: OrderedDict[tuple[object, ...], _Open] | None = getattr(
            self._local, "handles", None)
        if handles is None or (next(iter(handles.values()), None) is not None and \
                next(iter(handles.values())).pid != os.getpid()):  # new thread or forked
            handles = self._local.handles = OrderedDict()
        if key in handles:
            handles.move_to_end(key)
            return handles[key], 0
        stale = [k for k in handles if k[0] == key[0]]  # an older version of this object
        while stale or len(handles) >= OPEN_FILES_PER_THREAD:
            handles.pop(stale.pop() if stale else next(iter(handles))).close()
        path = src.backend.local_path(src.key) if NATIVE_COUNTING and not odirect else None
        raw = None if path is not None else src.backend.open_read(src.key, odirect)
        before = thread_bytes_read() if raw is None else 0
        try:
            # A local file is read by pyarrow itself (through a Python file object its reads
            # queue for the GIL: half the rows/s with 3 reader threads on 2 cores); O_DIRECT
            # and object stores go through the backend's counting reader. pre_buffer=False:
            # pre-buffering hands reads to Arrow's I/O threads, whose bytes this thread's
            # counters would miss (and through a Python file they queue for the GIL too).
            source: Any = pa.OSFile(str(path)) if raw is None else _File(raw)
            pf = pq.ParquetFile(source, pre_buffer=False)
        except _ERRORS as exc:
            if raw is not None:
                raw.close()
            raise CorruptSampleError(str(src), 0, f"pyarrow cannot open the file ({exc})") \
                from None
        handle = _Open(key, raw, pf)
        if pf.metadata.num_rows != num_samples:
            handle.close()
            raise DatasetError(f"{src}: {pf.metadata.num_rows} rows, the manifest says "
                               f"{num_samples}; regenerate the dataset")
        handles[key] = handle
        return handle, raw.nbytes if raw is not None else thread_bytes_read() - before

    def _load(self, handle: _Open, src: Stored, num_samples: int, first: int,
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
        except (*_ERRORS, StopIteration) as exc:
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
        except (*_ERRORS, StopIteration) as exc:
            raise CorruptSampleError(str(src), 0, f"pyarrow cannot read the file ({exc})") \
                from None
        return row_bytes(_column_arrays(batch))[0]

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


class _Guarded:
    """The sink as pyarrow's file object, shut on an error: a ParquetWriter writes its footer
    when closed or collected, and must not reach a storage writer that was aborted (a write
    there would create the file again)."""

    def __init__(self, sink: Sink) -> None:
        self.sink, self.shut, self.closed, self.size = sink, False, False, 0

    def write(self, data: memoryview | bytes) -> int:
        if not self.shut:
            self.sink.write(data)
        nbytes = memoryview(data).nbytes
        self.size += nbytes
        return nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def packed(column: ParquetColumn) -> bool:
    """Whether ``column`` is stored as its bytes, one fixed-length value per row.

    Parquet has no physical type narrower than 32 bits for integers: INT(8) and INT(16)
    annotate int32 (apache/parquet-format LogicalTypes.md @0038848, "Signed Integers" and
    "Unsigned Integers"; pyarrow 26 writes them so), so int8 and uint8 values written as such
    take 4 bytes each and int16 2 bytes: 4x and 2x the bytes asked, plain. (Upstream's generator
    gets near 1 byte back only through its writer's default dictionary encoding of random
    bytes: mlcommons/DLIO_local_changes dlio_benchmark/data_generator/parquet_generator.py
    @f1a29af.) A FIXED_LEN_BYTE_ARRAY of the row's values takes exactly their bytes, read back
    as a numpy view of the dtype (``_numpy``); the dtype is kept in the field's metadata."""
    dtype = np.dtype(column.dtype)
    return dtype.kind in "iu" and dtype.itemsize < 4 and column.width > 0


def _array(values: np.ndarray, column: ParquetColumn) -> tuple[pa.Field, pa.Array]:
    """The (rows, width) uint8 ``values`` of ``column`` as one Arrow array and its field."""
    data = np.ascontiguousarray(values)
    if packed(column):
        array = pa.FixedSizeBinaryArray.from_buffers(pa.binary(column.width), len(data),
                                                     [None, pa.py_buffer(data)])
        return pa.field(column.name, array.type, nullable=False,
                        metadata={DTYPE_KEY: column.dtype}), array
    flat = pa.array(data.view(column.dtype).reshape(-1))
    array = flat if column.size == 1 else pa.FixedSizeListArray.from_arrays(flat, column.size)
    return pa.field(column.name, array.type), array


def _table(rows: np.ndarray, columns: tuple[ParquetColumn, ...]) -> pa.Table:
    """The (rows, row bytes) uint8 ``rows`` cut into ``columns``, each one Arrow buffer."""
    fields, arrays, start = [], [], 0
    for col in columns:
        field, array = _array(rows[:, start:start + col.width], col)
        start += col.width
        fields.append(field)
        arrays.append(array)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _column_arrays(batch: pa.RecordBatch) -> Columns:
    """Each column of the batch as a numpy array of its dtype, a row per batch row (shape
    (rows,) or (rows, size) for a fixed-size list or a packed column): views of Arrow's
    memory, not copies."""
    return tuple(_numpy(column, field) for column, field in zip(batch.columns, batch.schema,
                                                                  strict=True))


def _numpy(array: pa.Array, field: pa.Field | None = None) -> np.ndarray:
    """A fixed-width column as numpy, a row per entry (a fixed-size list: a row of its
    ``size`` values, a null list's row whatever its slots hold): a view of Arrow's data buffer
    (the slice's offset honoured), or pyarrow's own conversion where values are null (not in
    files we write). Not ``to_numpy`` throughout: it imports pandas (~0.3 s) on first use.
    A fixed-length byte column (``packed``) is a view of its bytes as the dtype its ``field``
    names (uint8 where it names none), a row of ``width / itemsize`` values."""
    if pa.types.is_fixed_size_binary(array.type):
        return _unpacked(array, field)
    width, values = 1, array
    if pa.types.is_fixed_size_list(array.type):
        width = array.type.list_size
        values = array.values.slice(array.offset * width, len(array) * width)
    if values.null_count or not (pa.types.is_integer(values.type)
                                 or pa.types.is_floating(values.type)):
        data = values.to_numpy(zero_copy_only=False)
    else:
        dtype = np.dtype(values.type.to_pandas_dtype())
        data = np.frombuffer(values.buffers()[1], dtype, len(values),
                             values.offset * dtype.itemsize)
    return data.reshape(len(array), width) if width > 1 else data


def _unpacked(array: pa.FixedSizeBinaryArray, field: pa.Field | None) -> np.ndarray:
    """A fixed-length byte column as the values of its dtype (see ``_numpy``)."""
    width = array.type.byte_width
    dtype = _packed_dtype(field, width)
    count = width // dtype.itemsize
    if len(array):
        data = np.frombuffer(array.buffers()[1], np.uint8, len(array) * width,
                             array.offset * width).view(dtype)
    else:
        data = np.empty(0, dtype)
    return data.reshape(len(array), count) if count > 1 else data


def _packed_dtype(field: pa.Field | None, width: int) -> np.dtype[Any]:
    """The dtype a packed column's ``field`` names; uint8 (its bytes) where it names none that
    fits (not our file)."""
    named = (field.metadata or {}).get(DTYPE_KEY.encode()) if field is not None else None
    try:
        dtype = np.dtype(named.decode()) if named else np.dtype(np.uint8)
    except (TypeError, ValueError, UnicodeDecodeError):
        dtype = np.dtype(np.uint8)
    if dtype.kind not in "iuf" or width % dtype.itemsize:
        dtype = np.dtype(np.uint8)
    return dtype


def row_bytes(columns: Columns) -> np.ndarray:
    """Rows given as columns as one (rows, bytes) uint8 array, columns side by side: the
    bytes of each row as written (tests, single rows)."""
    parts = [np.ascontiguousarray(c).view(np.uint8).reshape(len(c), -1) for c in columns]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


FORMAT = ParquetFormat(row_group_size=1)
"""Unconfigured (tools, contract suites): a row per row group, so a row read alone costs its
own bytes; runs use ``dataset.parquet.row_group_size`` (``configured``)."""
