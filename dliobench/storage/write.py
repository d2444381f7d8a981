"""Write a whole file from memory, with O_DIRECT where the file system takes it.

A generator writes every byte once and never reads it back, so the page cache only costs it:
the kernel's copy into cached pages (slow and erratic on virtual machines whose host reclaims
freed memory) and the eviction afterwards. O_DIRECT sends the bytes from the caller's buffer
to the device. It needs a page-aligned buffer and whole blocks, so callers assemble each file
in a ``buffers.AlignedBuffer`` they reuse from file to file (a fresh buffer per file costs its page
faults every time, which is as slow as the copy it saves), the write covers the file rounded
up to whole blocks, and ``ftruncate`` then cuts it to its size.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from dliobench.storage.buffers import BLOCK

CHUNK = 64 << 20  # bytes per write call: bounded, whatever the file size


def write_whole(path: str | Path, data: memoryview, size: int, direct: bool = True) -> bool:
    """Create ``path`` holding the first ``size`` bytes of ``data``; True if O_DIRECT was used.

    With ``direct``, ``data`` must come from ``AlignedBuffer.view`` (page aligned, whole
    blocks). File systems that refuse O_DIRECT (EINVAL at open or at the first write, as some
    tmpfs and FUSE mounts do) get an ordinary buffered write instead.
    """
    if direct and hasattr(os, "O_DIRECT"):
        try:
            _write_direct(path, data, size)
            return True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_fully(fd, data[:size])
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # starts writeback now, async
    finally:
        os.close(fd)
    return False


def _write_direct(path: str | Path, data: memoryview, size: int) -> None:
    padded = -(-size // BLOCK) * BLOCK
    if len(data) < padded:
        raise ValueError("an O_DIRECT write needs a buffer of whole blocks (AlignedBuffer)")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    try:
        _write_fully(fd, data[:padded])
        if padded != size:
            os.ftruncate(fd, size)
    finally:
        os.close(fd)


def _write_fully(fd: int, view: memoryview) -> None:
    """pwrite until all of ``view`` is written (a call may write less than asked)."""
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:done + CHUNK], done)
