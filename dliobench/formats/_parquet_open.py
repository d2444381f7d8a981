"""Parquet files open for reading, a few per thread, and the bytes their reads cost.

A file with a local path (POSIX, buffered) is read by pyarrow's own file, in the reading
thread, and counted by that thread's read counters (``/proc/thread-self/io``: every byte its
read calls transferred, the footer and the column chunks of each row group read); O_DIRECT
reads and object stores go through the backend's counting file object. Open files (their
footers read and counted once) are kept per thread, a few at a time.
"""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict
from typing import Any

from dliobench.base.errors import CorruptSampleError, DatasetError, MissingExtraError
from dliobench.formats.base import Stored
from dliobench.storage.backend import CountingReader

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("pyarrow", "parquet") from exc

ERRORS = (OSError, ValueError, pa.ArrowException)  # what pyarrow raises on a bad file


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


class OpenFile:
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


def open_file(local: threading.local, src: Stored, num_samples: int,
              odirect: bool) -> tuple[OpenFile, int]:
    """This thread's open handle of ``src`` (kept in ``local``) and the bytes opening it
    read (its footer)."""
    st = src.backend.stat(src.key)
    if st is None:
        raise FileNotFoundError(str(src))
    key = (str(src), odirect, st.version)
    handles = _handles(local)
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
    except ERRORS as exc:
        if raw is not None:
            raw.close()
        raise CorruptSampleError(str(src), 0, f"pyarrow cannot open the file ({exc})") \
            from None
    handle = OpenFile(key, raw, pf)
    if pf.metadata.num_rows != num_samples:
        handle.close()
        raise DatasetError(f"{src}: {pf.metadata.num_rows} rows, the manifest says "
                           f"{num_samples}; regenerate the dataset")
    handles[key] = handle
    return handle, raw.nbytes if raw is not None else thread_bytes_read() - before


def _handles(local: threading.local) -> OrderedDict[tuple[object, ...], OpenFile]:
    """This thread's open files, oldest first (none yet in a new thread or a forked
    process: a forked worker must open its own)."""
    handles: OrderedDict[tuple[object, ...], OpenFile] | None = getattr(
        local, "handles", None)
    if handles is None or (next(iter(handles.values()), None) is not None and \
            next(iter(handles.values())).pid != os.getpid()):  # new thread or forked
        handles = local.handles = OrderedDict()
    return handles
