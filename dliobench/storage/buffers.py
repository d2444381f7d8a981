"""Page-aligned memory for O_DIRECT: ``AlignedBuffer`` (one per writer thread, grown on
demand) and ``BufferPool`` (read buffers, reused once nothing refers to them any more); both
come from ``aligned_map``.

A fresh anonymous map costs a page fault per 4 KiB on first touch, and on virtual machines
whose host takes freed memory back, a fault at the host too: reading a 146.6 MB sample into
fresh memory ran at about 1.2 GB/s here, into reused memory at about 2 GB/s. Samples are
handed on as views of their buffer, so a buffer is free again exactly when no view of it is
left; CPython's reference count says when (every view holds its buffer through the memoryview
machinery), and the pool checks it under a lock before it hands a buffer out again.
"""

from __future__ import annotations

import mmap
import sys
import threading
import weakref

import numpy as np

BLOCK = 4096  # O_DIRECT transfers whole blocks
GRANULE = 1 << 20  # pool sizes round up to this, so samples of nearby sizes share buffers
KEEP_FREE_BYTES = 1 << 30  # free buffers beyond this are unmapped


def aligned_map(size: int, granule: int = BLOCK) -> mmap.mmap:
    """Anonymous memory of at least ``size`` bytes, rounded up to ``granule``: anonymous maps
    are page aligned, as O_DIRECT needs. Private: a forked writer or loader worker gets its
    own copy (Python's default, MAP_SHARED, let forked writers fill one buffer at once)."""
    return mmap.mmap(-1, max(granule, -(-size // granule) * granule),
                     flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


class AlignedBuffer:
    """Page-aligned memory that grows on demand and is reused, for one thread.

    A fresh buffer per file costs its page faults every time, which is as slow as the copy
    O_DIRECT saves: a writer reuses one from file to file.
    """

    def __init__(self) -> None:
        self._map: mmap.mmap | None = None

    def view(self, size: int) -> memoryview:
        """A writable view of at least ``size`` bytes, rounded up to whole blocks."""
        need = max(BLOCK, -(-size // BLOCK) * BLOCK)
        if self._map is None or len(self._map) < need:
            if self._map is not None:
                self._map.close()
            self._map = aligned_map(need)
        return memoryview(self._map)[:need]

    def close(self) -> None:
        """Give the memory back."""
        if self._map is not None:
            self._map.close()
            self._map = None


class BufferPool:
    """Anonymous (page-aligned) maps, each lent out until the last view of it is gone."""

    def __init__(self, keep_free_bytes: int = KEEP_FREE_BYTES) -> None:
        self._lock = threading.Lock()
        self._keep = keep_free_bytes
        # A free buffer's count as ``_counts`` sees it (the pool's list, the comprehension's
        # variable, the arguments): measured the same way on a probe, not assumed.
        self._maps = [aligned_map(mmap.PAGESIZE)]
        self._free_refs = self._counts()[0]
        self._maps.pop().close()

    @staticmethod
    def _refs(buf: mmap.mmap) -> int:
        return sys.getrefcount(buf)

    def _counts(self) -> list[int]:
        return [self._refs(buf) for buf in self._maps]

    def _free(self) -> list[int]:
        """Indexes of the buffers no view refers to."""
        return [i for i, count in enumerate(self._counts()) if count == self._free_refs]

    def take(self, size: int) -> mmap.mmap:
        """A buffer of at least ``size`` bytes that no live view refers to."""
        with self._lock:
            free = self._free()
            fits = [(len(self._maps[i]), i) for i in free if len(self._maps[i]) >= size]
            if fits:
                return self._maps[min(fits)[1]]
            if sum(len(self._maps[i]) for i in free) > self._keep:
                for i in free:
                    self._maps[i].close()
                self._maps = [buf for buf in self._maps if not buf.closed]
            new = aligned_map(size, GRANULE)
            self._maps.append(new)
            return new

    def held_bytes(self) -> int:
        """Bytes of all buffers, lent or free."""
        with self._lock:
            return sum(len(buf) for buf in self._maps)


POOL = BufferPool()  # one per process (each loader worker process has its own)


def page_aligned(size: int) -> np.ndarray:
    """``size`` bytes (contents undefined) starting on a page boundary.

    ``np.empty`` of a large array starts 16 bytes into a page (glibc's header before an
    mmap-ed chunk), and the kernel's copy from the page cache into a destination not
    aligned to a cache line costs about 40 % more CPU: a 16 MiB read here took 3.1-3.2 ms of
    CPU into such memory, 2.2-2.3 ms at offset 0 or 64 (``benchmarks/loaders/first_touch.py
    --align``). Over-allocated by a page and sliced, so numpy's allocator (and its huge-page
    advice for large arrays) still makes it."""
    raw = np.empty(size + mmap.PAGESIZE, dtype=np.uint8)
    start = -raw.ctypes.data % mmap.PAGESIZE
    return raw[start:start + size]


class SampleBuffers:
    """Memory for samples of one size, reused: each sample is lent out as a fresh array over
    a block (``page_aligned``), and the block comes back when the last view of that array is
    gone (the loop drops a batch when compute starts), through a ``weakref.finalize`` on the
    array.

    Fresh memory for a large sample costs the kernel's zeroing and its page faults (on this
    project's VM, also the host's: freed pages go back to it after ~2 s); a read into reused
    memory is only the copy. At most ``keep`` free blocks are kept: the samples in flight.
    ``reserve`` makes them before the counted window and touches every page, as a training
    process makes its pinned batch memory once at start: otherwise the first ``keep`` samples
    of a run each pay the first touch (on a freshly booted VM a host fault per page, which
    made 16 MiB samples 0.38 of the raw read there against 0.66-0.82 on a VM up for hours).
    """

    def __init__(self, size: int, keep: int) -> None:
        self.size = size
        self._keep = keep
        self._free: list[np.ndarray] = []  # append and pop are atomic under the GIL
        self._made = 0  # blocks alive, free or lent (a close count: updated without a lock)

    def take(self) -> np.ndarray:
        """An array of ``size`` bytes (contents undefined) over a free or a new block."""
        try:
            block = self._free.pop()
        except IndexError:
            block = page_aligned(self.size)
            self._made += 1
        lent = block[:]  # views made of it (memoryviews, np.frombuffer) keep it alive
        weakref.finalize(lent, self._give_back, block)
        return lent

    def reserve(self, count: int) -> None:
        """Make free blocks, touched page by page, until ``count`` (at most ``keep``) exist,
        lent or free: their page faults and zeroing are paid here, before the counted window
        (a later epoch finds them made: nothing to do)."""
        while self._made < min(count, self._keep):
            block = page_aligned(self.size)
            block[::mmap.PAGESIZE] = 0  # one write per page faults it in
            self._free.append(block)
            self._made += 1

    def _give_back(self, block: np.ndarray) -> None:
        if len(self._free) < self._keep:
            self._free.append(block)
        else:
            self._made -= 1
