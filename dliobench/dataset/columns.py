"""The manifest's columns: ``.npy`` arrays indexed by file number, read in slices.

A rank gathers the entries of the files it needs without reading (or mapping) the whole
column: nearby entries are read together, far ones apart, each read at most ``MAX_READ``
bytes, so memory stays O(entries asked) whatever the file count. Columns are written by
streaming chunks through the backend's writer (never whole in memory).
"""

from __future__ import annotations

import ast
import io
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from dliobench.base.errors import DatasetError
from dliobench.storage.backend import Backend

GAP = 16 << 10  # entries closer than this many bytes are read in one request
MAX_READ = 16 << 20  # bytes per request at most
CHUNK_ROWS = 1 << 20  # rows per chunk when a column is written
HEAD = 4096  # an .npy header fits in this (numpy pads it to a multiple of 64)
LAYOUT = {"size": ("<i8", -1), "crc": ("<u4", 0), "side_size": ("<i8", -1),
          "side_crc": ("<u4", 0), "sample_crc": ("<u4", 0)}  # column -> (dtype, absent value)

class Column:
    """One column file, read by slices of rows."""

    def __init__(self, backend: Backend, key: str) -> None:
        self.backend, self.key = backend, key
        head, _ = backend.read_range(key, 0, HEAD)
        try:
            if bytes(head[:6]) != b"\x93NUMPY":
                raise ValueError("no .npy magic")
            major = head[6]
            size_bytes = 2 if major == 1 else 4
            hlen = int.from_bytes(head[8:8 + size_bytes], "little")
            self.offset = 8 + size_bytes + hlen
            meta = ast.literal_eval(bytes(head[8 + size_bytes:self.offset]).decode("latin1"))
            self.dtype = np.dtype(meta["descr"])
            self.shape = tuple(meta["shape"])
        except (ValueError, SyntaxError, KeyError, IndexError):
            raise DatasetError(f"{backend.describe(key)} is not a manifest column; delete the "
                               "folder dliobench-manifest and run `dliobench generate`") from None
        self.width = int(np.prod(self.shape[1:], dtype=np.int64))
        self.row = self.dtype.itemsize * self.width

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` (each < the row count), in the order asked."""
        ids = np.asarray(ids, dtype=np.int64)
        unique, inverse = np.unique(ids, return_inverse=True)
        values = np.empty((unique.size, self.width), self.dtype)
        reader = self.backend.open_read(self.key)
        try:
            for lo, hi in _runs(unique * self.row, self.row):
                first, last = int(unique[lo]), int(unique[hi - 1])
                buf = bytearray((last - first + 1) * self.row)
                reader.seek(self.offset + first * self.row)
                got = reader.readinto(memoryview(buf))
                if got < len(buf):
                    raise DatasetError(f"{self.backend.describe(self.key)} is truncated; delete "
                                       "the folder dliobench-manifest and run `dliobench "
                                       "generate`")
                rows = np.frombuffer(buf, self.dtype).reshape(-1, self.width)
                values[lo:hi] = rows[unique[lo:hi] - first]
        finally:
            reader.close()
        out = values[inverse]
        return out.reshape(ids.size, *self.shape[1:])

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start`` to ``stop`` (a contiguous slice)."""
        return self.gather(np.arange(start, stop, dtype=np.int64))

def _runs(offsets: np.ndarray, row: int) -> list[tuple[int, int]]:
    """[lo, hi) index runs of sorted byte offsets: gaps under ``GAP``, spans under
    ``MAX_READ``."""
    runs = []
    lo = 0
    breaks = np.flatnonzero(np.diff(offsets) > GAP) + 1
    for hi in [*breaks.tolist(), offsets.size]:
        while lo < hi:
            end = int(np.searchsorted(offsets, offsets[lo] + MAX_READ - row, "right"))
            end = max(lo + 1, min(end, hi))
            runs.append((lo, end))
            lo = end
    return runs

def npy_header(dtype: str, shape: tuple[int, ...]) -> bytes:
    """The ``.npy`` header of a C-ordered array."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.dtype(dtype).str,
                                               "fortran_order": False, "shape": shape})
    return buf.getvalue()

class Columns(Protocol):
    """What a column is rewritten from: the manifest's current columns (a protocol, so the
    columns need not import the manifest that uses them)."""

    @property
    def side_suffixes(self) -> Sequence[str]: ...

    @property
    def sample_crcs(self) -> int: ...

    @property
    def num_files(self) -> int: ...

    def column_key(self, name: str) -> str: ...

def write_column(backend: Backend, key: str, old: Columns, name: str, capacity: int,
                 records: np.ndarray) -> None:
    """Column ``name`` of ``capacity`` rows: ``old``'s entries with ``records`` applied (a
    later record of a file wins), streamed chunk by chunk."""
    dtype, absent = LAYOUT[name]
    width = {"side_size": len(old.side_suffixes), "side_crc": len(old.side_suffixes),
             "sample_crc": old.sample_crcs}.get(name)
    extra = (width,) if width else ()
    order = np.argsort(records["index"], kind="stable")
    recs = records[order]
    if recs.size:  # keep the last record of each file
        last = np.r_[recs["index"][1:] != recs["index"][:-1], True]
        recs = recs[last]
    writer = backend.open_write(key)
    try:
        writer.write(npy_header(dtype, (capacity, *extra)))
        old_column = Column(backend, old.column_key(name)) if old.num_files else None
        for start in range(0, capacity, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, capacity)
            chunk = np.full((stop - start, *extra), absent, dtype)
            have = min(stop, old.num_files)
            if old_column is not None and start < have:
                chunk[:have - start] = old_column.rows(start, have)
            inside = recs[(recs["index"] >= start) & (recs["index"] < stop)]
            if inside.size:
                chunk[inside["index"] - start] = inside[name]
            writer.write(chunk.tobytes())
        writer.commit()
    except BaseException:
        writer.abort()
        raise
