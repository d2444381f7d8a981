"""Parquet columns: how a row's bytes become Arrow columns and how Arrow columns come back
as numpy (``formats.parquet``'s schema).

A row is its columns' values side by side. Columns of 8- and 16-bit integers are stored as
their bytes, a fixed-length value per row (``packed``), the dtype kept in the field's
metadata; other columns as their dtype, a column of ``size`` > 1 as a fixed-size list.
Columns are handed back as numpy views of Arrow's buffers (pyarrow's ``to_numpy`` would
import pandas inside the first step and copy fixed-size lists' values).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dliobench.base.errors import MissingExtraError
from dliobench.config.schema import ParquetColumn
from dliobench.formats.base import Columns

try:
    import pyarrow as pa
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("pyarrow", "parquet") from exc

DEFAULT_COLUMN = "data"
DTYPE_KEY = "dliobench.dtype"  # field metadata: the dtype of a packed column's values


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


def table(rows: np.ndarray, columns: tuple[ParquetColumn, ...]) -> pa.Table:
    """The (rows, row bytes) uint8 ``rows`` cut into ``columns``, each one Arrow buffer."""
    fields, arrays, start = [], [], 0
    for col in columns:
        field, array = _array(rows[:, start:start + col.width], col)
        start += col.width
        fields.append(field)
        arrays.append(array)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def column_arrays(batch: pa.RecordBatch) -> Columns:
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
