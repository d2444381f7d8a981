"""Parquet generation: rows filled, cut into columns and encoded a slice of whole row
groups at a time (about ``STREAM_BYTES``), each slice filled just before it is encoded, the
file written to the storage sink as it grows (``formats.parquet``'s ``stream``).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from dliobench.base.errors import MissingExtraError
from dliobench.config.schema import ParquetColumn
from dliobench.formats._parquet_columns import table
from dliobench.formats.base import RowFill, Sink

try:
    import pyarrow.parquet as pq
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("pyarrow", "parquet") from exc

STREAM_BYTES = 32 << 20  # rows filled and encoded at a time when generating


def write_rows(sink: Sink, columns: tuple[ParquetColumn, ...], num_samples: int,
               sample_bytes: int, fill: RowFill, fill_unit: int, row_group_size: int,
               compression: str) -> None:
    """The parquet file of ``num_samples`` rows of ``columns``, column by column, written to
    ``sink`` a slice of whole row groups at a time (``slice_rows``): the same bytes as the
    file built at once. On an error nothing more reaches ``sink`` (the footer included)."""
    step = slice_rows(row_group_size, sample_bytes, fill_unit)
    guarded = _Guarded(sink)
    writer: pq.ParquetWriter | None = None
    try:
        for first in range(0, max(num_samples, 1), step):
            rows = np.empty((min(step, num_samples - first), sample_bytes), np.uint8)
            fill(rows, first)
            encoded = table(rows, columns)
            del rows
            if writer is None:
                writer = pq.ParquetWriter(guarded, encoded.schema, compression=compression,
                                          write_statistics=False, use_dictionary=False)
            writer.write_table(encoded, row_group_size=row_group_size)
    except BaseException:
        guarded.shut = True  # the writer's footer (at close or collection) goes nowhere
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
        raise
    if writer is not None:
        writer.close()


def slice_rows(row_group_size: int, sample_bytes: int, fill_unit: int) -> int:
    """Rows per slice: whole row groups, starting at byte offsets that are multiples of
    ``fill_unit``, about ``STREAM_BYTES`` in all."""
    unit = fill_unit // math.gcd(fill_unit, max(sample_bytes, 1))  # rows per fill unit
    step = row_group_size * unit // math.gcd(row_group_size, unit)
    return step * max(1, STREAM_BYTES // max(1, step * sample_bytes))


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
