"""POSIX I/O: reads that count their bytes (buffered or O_DIRECT), fsync, page-cache eviction.

Reads release the GIL (``os.preadv``), so a thread pool of readers overlaps them; a list of
whole files is read with one release for all of them where the optional C extension
``_readfiles`` is built (``read_wholes``; ``checked_reads`` checks them there too).
"""

from __future__ import annotations

import errno
import functools
import io
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

import dliobench.storage.buffers as bufferpool

try:  # optional: built where a C compiler is (setup.py)
    import dliobench.storage._readfiles as _readfiles
except ImportError:  # pragma: no cover - a build without the extension
    _readfiles = None

_read_files = getattr(_readfiles, "read_files", None)
BATCHED_READS = _read_files is not None
Whole = tuple[memoryview, int]  # a file's bytes and the bytes read

ALIGN = 4096


def read_range(path: str | Path, offset: int, length: int,
               odirect: bool = False) -> tuple[memoryview, int]:
    """Read ``length`` bytes at ``offset`` (fewer at end of file) into fresh memory.

    Returns the bytes and the count the read calls transferred from storage. With ``odirect``
    the page cache is bypassed: the read covers the enclosing aligned range into an aligned
    buffer (that whole range is counted), and a view of the requested bytes is returned.
    """
    if odirect:
        return _read_direct(path, offset, length)
    buf = np.empty(length, dtype=np.uint8).data  # no zero-fill: the read overwrites it
    fd = open_regular(path)
    try:
        got = _read_fully(fd, buf, offset)
    finally:
        os.close(fd)
    return buf[:got], got


def read_wholes(paths: list[str], sizes: list[int],
                pool: bufferpool.SampleBuffers | None = None,
                ) -> list[Whole | None]:
    """Each file's first ``size`` bytes (fewer at end of file) and the bytes read, as
    ``read_range(path, 0, size)``. With the C extension the whole list is read with the GIL
    released once (a thread reading small files otherwise hands it over around every system
    call), files of ``pool``'s size into its reused memory; a file it could not read is None:
    the caller reads it again with ``read_range``, which raises the error in words."""
    if _read_files is None:
        return [read_range(path, 0, size) for path, size in zip(paths, sizes, strict=True)]
    buffers = buffers_for(sizes, pool)
    got = _read_files(paths, buffers)
    return [(buf.data[:n], n) if n >= 0 else None
            for buf, n in zip(buffers, got, strict=True)]


def buffers_for(sizes: list[int], pool: bufferpool.SampleBuffers | None) -> list[np.ndarray]:
    """Memory for files of ``sizes`` (contents undefined: the reads overwrite it): from
    ``pool`` for files of its size, else fresh."""
    return [pool.take() if pool is not None and size == pool.size
            else np.empty(size, dtype=np.uint8) for size in sizes]


def open_regular(path: str | Path, flags: int = os.O_RDONLY) -> int:
    """Open a regular file for reading; anything else (a FIFO, whose open would block until a
    writer comes; a folder; a device) raises OSError naming what it is.

    O_NONBLOCK keeps the open of a FIFO from blocking; it changes nothing for regular files.
    """
    fd = os.open(path, flags | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        raise OSError(code, f"it is {_kind(mode)}, not a regular file", str(path))
    return fd


def read_text(path: str | Path) -> str:
    """A small text file whole (a workload, a result), opened as ``open_regular`` does: a FIFO
    raises OSError at once instead of waiting for a writer."""
    with os.fdopen(open_regular(path), encoding="utf-8") as handle:
        return handle.read()


def _kind(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _read_fully(fd: int, view: memoryview, offset: int) -> int:
    """preadv until ``view`` is full or the file ends; returns bytes read."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            break
        done += n
    return done


def _read_direct(path: str | Path, offset: int, length: int) -> tuple[memoryview, int]:
    start = offset - offset % ALIGN
    end = offset + length
    span = -(-(end - start) // ALIGN) * ALIGN
    buf = bufferpool.POOL.take(max(span, ALIGN))  # page aligned, reused when free
    fd = open_regular(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    try:
        got = _read_fully(fd, memoryview(buf)[:span], start)
    finally:
        os.close(fd)
    got_end = min(start + got, end)
    return memoryview(buf)[offset - start: max(got_end - start, offset - start)], got


def file_crc32c(path: Path, chunk: int = 8 << 20) -> int:
    """CRC-32C of a whole file (hardware-accelerated, ~10 GB/s: cheap next to writing it)."""
    crc = 0
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        view = memoryview(bytearray(max(1, min(chunk, size))))
        while n := handle.readinto(view):
            crc = crc32c.crc32c(view[:n], crc)
    return crc


@functools.cache
def _libc() -> Any:
    """The C library, loaded once (finding it runs ``ldconfig``)."""
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def sync_filesystem(path: Path) -> None:
    """Flush every dirty page of the file system holding ``path`` (Linux syncfs(2)).

    One call makes a whole batch of freshly written files durable, where an fsync per file
    would cost a device flush each: the difference between 20 MB/s and disk speed for
    small files.
    """
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def reserve(path: str, nbytes: int) -> None:
    """Allocate ``nbytes`` of blocks to the file ``path`` (created when missing) without
    changing its size (Linux fallocate(2) with FALLOC_FL_KEEP_SIZE), so later appends do not
    need free space. Raises OSError(ENOSPC) when the room is not there; does nothing where
    the file system or the OS cannot reserve."""
    import ctypes

    call = getattr(_libc(), "fallocate", None)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if call is None or nbytes <= 0:
            return
        call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        if call(fd, 1, 0, nbytes) != 0:  # 1: FALLOC_FL_KEEP_SIZE
            code = ctypes.get_errno()
            if code == errno.ENOSPC:
                raise OSError(code, os.strerror(code), path)
    finally:
        os.close(fd)


def evict(paths: Sequence[str | Path], flush: bool = True) -> None:
    """Ask the kernel to drop these files' cached pages.

    Dirty pages cannot be dropped, so each file is flushed first unless ``flush`` is False
    (the caller has just synced the whole file system).
    """
    for path in paths:
        fd = open_regular(path)
        try:
            if flush:
                os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class _PositionedFile(io.RawIOBase):
    """A read-only, seekable file object keeping its own position and the bytes it read."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size
        self._pos = 0
        self.nbytes = 0

    def readable(self) -> bool:
        """Always."""
        return True

    def seekable(self) -> bool:
        """Always."""
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the position (no I/O)."""
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos}.get(whence, self._size)
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        """The current position."""
        return self._pos


class CountingFile(_PositionedFile):
    """A read-only file object that counts the bytes its reads transfer.

    For libraries that insist on doing their own I/O (h5py accepts file objects): every read
    goes through ``readinto`` here, so ``nbytes`` is exactly what the library read.
    """

    def __init__(self, path: Path, sequential: bool = False) -> None:
        self._fd = open_regular(path)
        super().__init__(os.fstat(self._fd).st_size)
        if sequential:
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)

    def readinto(self, buffer: Any) -> int:
        """Read at the current position into ``buffer``."""
        n = os.preadv(self._fd, [buffer], self._pos)
        self._pos += n
        self.nbytes += n
        return n

    def close(self) -> None:
        """Close the descriptor."""
        if not self.closed:
            os.close(self._fd)
        super().close()

    def forget(self) -> None:
        """Nothing is kept between reads."""


class SpanFile(_PositionedFile):
    """A read-only file object whose reads fetch a span around what is asked (``_fetch``),
    counted, and keep the last one, so a library's many small reads inside it cost one
    transfer; ``forget`` drops it before the next sample."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self._span: tuple[int, memoryview] = (0, memoryview(b""))

    def _fetch(self, pos: int, want: int) -> tuple[int, memoryview, int, bool]:
        """(start, bytes, bytes transferred, whether to keep them) of a span holding
        ``want`` bytes at ``pos``."""
        raise NotImplementedError

    def readinto(self, buffer: Any) -> int:
        """Read at the current position into ``buffer``, through the kept span if it holds it."""
        out = memoryview(buffer).cast("B")
        pos, want = self._pos, min(len(out), max(self._size - self._pos, 0))
        if want == 0:
            return 0
        start, span = self._span
        if not (start <= pos and pos + want <= start + len(span)):
            start, span, got, keep = self._fetch(pos, want)
            self.nbytes += got
            if keep:
                self._span = (start, span)
        n = max(min(want, start + len(span) - pos), 0)
        out[:n] = span[pos - start:pos - start + n]
        self._pos += n
        return n

    def forget(self) -> None:
        """Drop the kept span: the next read goes to storage."""
        self._span = (0, memoryview(b""))


class DirectFile(SpanFile):
    """A read-only file object that reads whole aligned blocks with O_DIRECT, counting them;
    a small span read last is kept."""

    KEEP_SPAN = 64 * 1024

    def __init__(self, path: Path) -> None:
        super().__init__(os.stat(path).st_size)
        self._path = path

    def _fetch(self, pos: int, want: int) -> tuple[int, memoryview, int, bool]:
        """The aligned blocks around the bytes asked for."""
        start = pos - pos % ALIGN
        end = -(-(pos + want) // ALIGN) * ALIGN
        span, got = read_range(self._path, start, end - start, odirect=True)
        return start, span, got, len(span) <= self.KEEP_SPAN
