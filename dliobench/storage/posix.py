"""The POSIX backend: a folder on any POSIX file system (node-local NVMe, Lustre, GPFS, NFS).

Keys are paths relative to the folder. Reads go through ``posix_io`` (buffered or O_DIRECT,
counted); a writer fills a hidden temporary file next to its key and renames it at commit, so
an object appears complete or not at all (or, asked for no atomic commit, writes the key's own
file: a generation's data files, committed by the manifest's journal); ``sync`` is one
``syncfs`` for a batch of objects.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dliobench.storage.checked_reads as checked_reads
import dliobench.storage.fsinfo as fsinfo
import dliobench.storage.posix_io as posix_io
from dliobench.storage.atomic import named, write_atomic
from dliobench.storage.backend import CountingReader, ObjectStat
from dliobench.storage.buffers import BLOCK, SampleBuffers, aligned_map

TMP_MARK = ".tmp-"  # writers' temporary files: ``.<name>.tmp-<pid>-<thread>``
CHUNK = 64 << 20  # bytes per write call, whatever the object's size
# Buffered objects at least this large start their writeback at commit (20,000 x 64 KiB:
# 2.8 s against 3.0 s); below it the fadvise costs a call per file and gains nothing: the
# pages are a block or two, written back with the rest at the next sync.
WRITEBACK_MIN_BYTES = 64 << 10
# A buffered file's writeback starts every this many bytes written, so the device writes
# while the writer fills the page cache and a final fsync waits only for the last piece: 8
# processes writing 40 + 240 MB each with a fsync per file took 2.96-3.07 s with it, 3.35-3.93
# s without (benchmarks/RESULTS.md, "Checkpoints")
WRITE_BEHIND_BYTES = 32 << 20
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW  # in place: never through a link


def _create_new(path: str, open_file: Callable[[str, int], int]) -> int:
    """A new file at ``path`` (``NEW_FILE``): whatever held the name (a killed writer's
    partial file, a FIFO, a symlink, a name hard-linked elsewhere) is unlinked, never written
    through."""
    try:
        return open_file(path, NEW_FILE)
    except FileExistsError:
        os.unlink(path)
        return open_file(path, NEW_FILE)


def _write_at(fd: int, view: memoryview, offset: int, path: str) -> None:
    """pwrite until all of ``view`` is written at ``offset`` (an error names ``path``)."""
    done = 0
    try:
        while done < len(view):
            done += os.pwrite(fd, view[done:done + CHUNK], offset + done)
    except OSError as exc:
        raise named(exc, path) from None


class PosixWriter:
    """A streaming writer of one file: a hidden temporary file renamed into place at commit,
    or (``atomic`` False) the file itself, created anew.

    ``direct`` writes bypass the page cache (O_DIRECT) where the file system takes it; a
    file system that refuses it (EINVAL at open or at a write, as tmpfs and some FUSE mounts
    do) gets ordinary writes. A direct write of a last partial block pads it and the file is
    cut to its size at commit. Buffered files start their writeback every
    ``WRITE_BEHIND_BYTES`` written, and at commit when they hold ``WRITEBACK_MIN_BYTES``.
    """

    def __init__(self, path: str, key: str, direct: bool, atomic: bool = True) -> None:
        self.key = key
        self._final = path
        folder, name = os.path.split(path)
        self._tmp = os.path.join(folder, f".{name}{TMP_MARK}{os.getpid()}-{threading.get_ident()}"
                                 ) if atomic else path
        self._direct = direct and hasattr(os, "O_DIRECT")
        self._fd: int | None = None
        self._size = 0
        self._behind = 0  # bytes whose writeback has been started (``WRITE_BEHIND_BYTES``)
        self._padded = False
        self._spooled = False
        self._ours = atomic  # whether abort removes the file at ``_tmp`` (in place: once made)

    def _open(self) -> int:
        if self._tmp != self._final:
            return self._open_flags(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        fd = _create_new(self._final, self._open_flags)
        self._ours = True
        return fd

    def _open_flags(self, path: str, flags: int) -> int:
        if self._direct:
            try:
                return os.open(path, flags | os.O_DIRECT, 0o644)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._direct = False
        return os.open(path, flags, 0o644)

    def _buffered(self, fd: int) -> None:
        """Leave O_DIRECT for ordinary writes on this descriptor."""
        self._direct = False
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_DIRECT)

    def write(self, data: memoryview | bytes) -> None:
        """Append ``data`` (see ``Writer.write``)."""
        if self._padded:
            raise ValueError(f"{self.key}: a direct write after a partial block")
        view = memoryview(data).cast("B")
        fd = self._fd if self._fd is not None else self._open()
        self._fd = fd
        whole = len(view) - len(view) % BLOCK if self._direct else len(view)
        try:
            _write_at(fd, view[:whole], self._size, self._final)
        except OSError as exc:
            if not (self._direct and exc.errno == errno.EINVAL):
                raise
            self._buffered(fd)  # unaligned memory, or a file system that refuses O_DIRECT
            whole = len(view)
            _write_at(fd, view, self._size, self._final)
        if whole < len(view):  # a direct write's last partial block, padded
            block = aligned_map(BLOCK)
            block[:len(view) - whole] = view[whole:]
            _write_at(fd, memoryview(block), self._size + whole, self._final)
            self._padded = True
        self._size += len(view)
        if not self._direct and self._size - self._behind >= WRITE_BEHIND_BYTES:
            # writeback of what is written so far starts now (dirty pages stay cached)
            os.posix_fadvise(fd, self._behind, self._size - self._behind,
                             os.POSIX_FADV_DONTNEED)
            self._behind = self._size

    @property
    def direct(self) -> bool:
        """Whether the writes so far bypassed the page cache."""
        return self._direct

    def spool_path(self) -> Path:
        """The temporary file itself: a library writes it, ``commit`` renames it (in place:
        the file itself, whatever held its name removed first)."""
        if not self._spooled and self._tmp == self._final:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._final)
        self._spooled = self._ours = True
        return Path(self._tmp)

    def commit(self, durable: bool = False) -> None:
        """Rename the temporary file into place (``durable``: fsync it first)."""
        fd = self._fd
        try:
            if fd is None and not (self._spooled and os.path.exists(self._tmp)):
                fd = self._fd = self._open()  # an empty object
            elif fd is None and durable:  # a library wrote the spool file itself
                fd = self._fd = os.open(self._tmp, os.O_RDONLY)
            if fd is not None:
                if self._padded:
                    os.ftruncate(fd, self._size)
                if durable:
                    os.fsync(fd)
                elif not self._direct and self._size >= WRITEBACK_MIN_BYTES:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # writeback starts now
            if self._tmp != self._final:
                os.replace(self._tmp, self._final)
        except OSError as exc:
            self.abort()
            raise named(exc, self._final) from None
        except BaseException:
            self.abort()
            raise
        finally:
            self._close()

    def abort(self) -> None:
        """Remove the temporary file (the file itself when not ``atomic``)."""
        self._close()
        if self._ours:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


@dataclass(frozen=True)
class PosixBackend:
    """A folder on a POSIX file system (``root``)."""

    root: str

    def path(self, key: str) -> str:
        """The file of ``key``."""
        return os.path.join(self.root, key) if key else self.root

    def paths(self, keys: list[str]) -> list[str]:
        """``path`` of each file's key (not empty), without a call per key."""
        root = self.root if not self.root or self.root.endswith("/") else self.root + "/"
        return [key if key.startswith("/") else root + key for key in keys]

    def describe(self, key: str = "") -> str:
        """The path of ``key``."""
        return self.path(key)

    def read_range(self, key: str, offset: int, length: int,
                   direct: bool = False) -> tuple[memoryview, int]:
        """See ``Backend.read_range``."""
        return posix_io.read_range(self.path(key), offset, length, direct)

    def read_wholes(self, keys: list[str], sizes: list[int],
                    pool: SampleBuffers | None = None) -> list[tuple[memoryview, int] | None]:
        """Several whole objects at once (``posix_io.read_wholes``): each as
        ``read_range(key, 0, size)``, None for one that must be read again alone."""
        return posix_io.read_wholes(self.paths(keys), sizes, pool)

    def read_checked(self, keys: list[str], sizes: list[int],
                     templates: list[checked_reads.Template | None],
                     pool: SampleBuffers | None = None,
                     ) -> tuple[list[checked_reads.Checked | posix_io.Whole | None], int]:
        """``read_wholes``, files that match their template as their data
        (``checked_reads.read_checked``), and how many did not."""
        return checked_reads.read_checked(self.paths(keys), sizes, templates, pool)

    def submit_checked(self, queue: checked_reads.ReadQueue, keys: list[str], sizes: list[int],
                       templates: list[checked_reads.Template | None],
                       pool: SampleBuffers | None = None,
                       chunk: int = 1) -> checked_reads.Pending:
        """``read_checked`` of ``keys`` by the threads of ``queue``
        (``checked_reads.read_queue``), ``chunk`` files at a time: its results are
        ``.result()``."""
        return checked_reads.Pending(queue, self.paths(keys), sizes, templates, pool, chunk)

    def names(self, prefix: str, stem: str, folders: int, extension: str) -> object | None:
        """``checked_reads.names`` of keys ``prefix`` + their name: paths under the root."""
        return checked_reads.names(self.paths([prefix])[0], stem, folders, extension)

    def open_read(self, key: str, direct: bool = False,
                  sequential: bool = False) -> CountingReader:
        """A counted file object (O_DIRECT whole blocks with ``direct``; ``sequential``:
        ``POSIX_FADV_SEQUENTIAL``, the kernel's larger read-ahead, as fio's default hint)."""
        path = Path(self.path(key))
        return posix_io.DirectFile(path) if direct else posix_io.CountingFile(path, sequential)

    def stat(self, key: str) -> ObjectStat | None:
        """Size and (inode, size, mtime) of ``key``, or None when it does not exist."""
        try:
            st = os.stat(self.path(key))
        except FileNotFoundError:
            return None
        return ObjectStat(st.st_size, (st.st_ino, st.st_size, st.st_mtime_ns))

    def size(self, key: str) -> int | None:
        """See ``Backend.size``."""
        st = self.stat(key)
        return None if st is None else st.size

    def open_write(self, key: str, direct: bool = False, atomic: bool = True) -> PosixWriter:
        """See ``Backend.open_write`` (the key's folder must exist: ``make_room``)."""
        return PosixWriter(self.path(key), key, direct, atomic)

    def write_new(self, key: str, data: memoryview | bytes) -> None:
        """See ``Backend.write_new``: open (a new file, as ``PosixWriter`` in place makes it),
        write, close; no fadvise (for files under ``WRITEBACK_MIN_BYTES``)."""
        path = f"{self.root}/{key}"
        fd = _create_new(path, lambda name, flags: os.open(name, flags, 0o644))
        try:
            view = memoryview(data).cast("B")
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        os.close(fd)

    def put(self, key: str, data: bytes, replace: bool = True) -> bool:
        """See ``Backend.put``: a temporary file, fsynced, renamed (or linked) into place."""
        return write_atomic(self.path(key), lambda handle: handle.write(data), replace)

    def append(self, key: str, data: bytes) -> None:
        """See ``Backend.append``: O_APPEND, then fsync."""
        fd = os.open(self.path(key), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def reserve(self, key: str, nbytes: int) -> None:
        """See ``Backend.reserve``: blocks allocated past the end of the file."""
        posix_io.reserve(self.path(key), nbytes)

    def delete(self, key: str) -> None:
        """See ``Backend.delete``."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(key))

    def sync(self) -> None:
        """One ``syncfs`` of the file system holding the root."""
        posix_io.sync_filesystem(Path(fsinfo.existing(self.root)))

    def evict(self, keys: list[str], flush: bool = True) -> None:
        """``posix_fadvise(DONTNEED)`` of each file (flushed first unless ``flush`` is False)."""
        posix_io.evict([f"{self.root}/{k}" for k in keys], flush)

    def make_room(self, prefix: str) -> None:
        """Create the folder ``prefix`` (and its parents)."""
        os.makedirs(self.path(prefix), exist_ok=True)

    def local_path(self, key: str) -> Path | None:
        """The file itself."""
        return Path(self.path(key))

    def facts(self) -> dict[str, Any]:
        """File system, mount, device, free and total bytes of the root."""
        return fsinfo.facts(self.root)

    def free_bytes(self) -> int | None:
        """Free bytes of the file system holding the root."""
        import shutil

        return shutil.disk_usage(fsinfo.existing(self.root)).free

    def block_bytes(self) -> int:
        """The file system's fragment size, at most 64 KiB (some report stripe-sized blocks)."""
        return max(1, min(os.statvfs(fsinfo.existing(self.root)).f_frsize, 64 << 10))

    def drop_leftovers(self, prefix: str = "") -> int:
        """None here: a killed writer's temporary file is visible, and swept by name."""
        return 0

    def list(self, prefix: str = "") -> Iterator[str]:
        """Every file below ``prefix`` (writers' temporary files left out), sorted per folder."""
        top = self.path(prefix)
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            rel = os.path.relpath(folder, self.root)
            for name in sorted(files):
                if not (name.startswith(".") and TMP_MARK in name):
                    yield name if rel == "." else f"{rel}/{name}"
