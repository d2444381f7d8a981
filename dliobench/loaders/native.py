"""The native loader: reader threads read and decode samples; batches are read ahead.

While compute holds a batch, ``prefetch_size`` batches after it are being read (more when
that is too few to keep every reader busy), so reading overlaps the emulated compute; the
batch compute is done with is released before waiting for the next. At most
``read_threads`` samples are being read at once (formats read a batch at once,
``SampleReader.batched``: parquet, one whole batch per work item, ``read_threads`` +
``prefetch_size`` batches in flight). Each batch is split into work items (its consecutive
samples): at least ``ceil(read_threads / prefetch_size)``, and of at most about
``ITEM_BYTES`` (4 MiB) where its samples are larger (16 MiB samples: one per item), so a
reader done early finds queued work instead of waiting for the oldest batch; items move
through one ``queue.SimpleQueue`` (a C queue, no per-item lock in Python), a reader reads an
item's one-sample files in one call (``SampleReader.read_many``), and the consumer waits on
one plain lock per batch. A Future per sample cost ~15 us; an item per sample and an Event
per batch about a third of the consumer's time on 64 KiB samples.

One-sample npy and npz files (``SampleReader.read_queue``: page-cached POSIX, the C extension
built) skip all of that: each batch is submitted whole to a ``ReadQueue`` whose reader
threads stay in C, each taking ``ceil(batch_size / read_threads)`` files at a time (at most
``ITEM_BYTES``'s worth), so every reader works on the oldest batch first and no Python runs
per item in them; the consumer, waiting for its batch, reads untaken files itself rather than
sleep. Files of one size below ``POOL_MIN_BYTES`` named by their index go as their indices
only (``NamedBatch``: paths made in C, one reused page-aligned block per batch), and while
reads come from the page cache no more threads serve than there are CPUs. On 64 KiB samples
and 2 cores that took the loader from 0.43-0.46 to 0.81 (npz) and 0.88 (npy) of the compiled
loop (benchmarks/history/RESULTS-2026-11-22-to-2026-11-25.md,
"Speed, session 12" and "Speed, session 13").
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from collections.abc import Generator
from typing import TYPE_CHECKING

import numpy as np

from dliobench.dataset.sharding import batches
from dliobench.formats.base import Columns
from dliobench.loaders.base import Batch, SampleReader
from dliobench.loaders.queued import NamedBatch, Started, file_names
from dliobench.storage.buffers import SampleBuffers

if TYPE_CHECKING:
    from dliobench.dataset.plan import Plan


WHOLE = -1  # a work item's start meaning: read the slot's whole batch
POOL_MIN_BYTES = 1 << 20  # one-sample files this large are read into reused memory
# in-flight memory made before the counted window for Python reader threads, at most: beyond
# it the rest is made on demand as before, so a run's peak memory stays what it uses
# (UNet3D's 146.6 MB samples, batch 2: 3 blocks, under the 4 alive at its 0.64 GB peak;
# 16 MiB samples: 32 of 40). A ``ReadQueue`` takes every block it keeps: all are made.
RESERVE_BYTES = 512 << 20
# a work item of large samples reads about this much, at least one sample (its hand-off, ~20 us
# of Python, is ~1 % of reading 4 MiB from the page cache): items of a reader's whole share of
# a batch (128 MiB of 16 MiB samples) left readers done early waiting for the oldest batch
# with nothing queued (one item per reader in flight, none spare)
ITEM_BYTES = 4 << 20
PROBE = 64  # samples whose file sizes give a batch's size in bytes


class _Slot:
    """One batch being read: its results fill in as reader threads finish samples.

    No Python lock per batch: each sample has its own position, ``next`` on an
    ``itertools.count`` is atomic under the GIL and tells the thread that finishes the last
    work item (a share of the batch's samples, or the whole batch), and ``done`` is a plain
    lock the consumer blocks on until that thread releases it (an ``Event`` is a Condition
    and two locks built in Python: creating one per batch took about a third of the
    consumer's time on 64 KiB samples).
    """

    __slots__ = ("done", "error", "failures", "finished", "ids", "items", "samples", "sizes",
                 "stale")

    def __init__(self, ids: np.ndarray, items: int = 1, whole: bool = False) -> None:
        self.ids = ids
        self.items = items  # work items the batch was split into
        parts = 1 if whole else ids.size  # a batch read whole fills one entry (put_all)
        self.samples: list[np.ndarray | None] | Columns = [None] * parts
        self.sizes = [0] * parts  # bytes read per sample (one entry: a batch read whole)
        self.finished = itertools.count(1)
        self.failures = itertools.count()
        self.done = threading.Lock()
        self.done.acquire()  # released once, by the thread that completes the batch
        self.error: BaseException | None = None
        self.stale = False  # the epoch was left early: skip the remaining work

    def put(self, start: int, results: list[tuple[np.ndarray, int]]) -> None:
        """One work item's samples (and bytes read), at positions ``start`` on."""
        for position, (sample, nbytes) in enumerate(results, start):
            self.samples[position] = sample  # type: ignore[index]  # a list until put_all
            self.sizes[position] = nbytes
        if next(self.finished) == self.items:
            self.done.release()

    def put_all(self, columns: Columns, nbytes: int) -> None:
        """The whole batch at once (``SampleReader.read_batch``)."""
        self.samples, self.sizes = columns, [nbytes]
        self.done.release()

    def fail(self, error: BaseException) -> None:
        if next(self.failures) == 0:  # the first error wins; the batch is released once
            self.error = error
            self.done.release()

    def wait(self) -> None:
        """Block until the batch is complete; raise its first error."""
        self.done.acquire()  # released once: the batch is complete or failed
        if self.error is not None:
            raise self.error

    def take(self) -> tuple[int, list[np.ndarray | None] | Columns]:
        """Bytes read and the batch's data, handed over: the slot keeps no reference to it
        afterwards."""
        samples, self.samples = self.samples, []
        return sum(self.sizes), samples

    def abandon(self) -> None:
        """The epoch was left: readers skip the batch's remaining work."""
        self.stale = True


class _Queued:
    """One batch being read by the threads of a ``ReadQueue`` (``SampleReader.read_queue``),
    submitted whole: each thread takes a work item's files at a time."""

    __slots__ = ("ids", "nbytes", "samples", "started")

    def __init__(self, ids: np.ndarray, started: Started) -> None:
        self.ids, self.started = ids, started
        self.samples: list[np.ndarray] = []
        self.nbytes = 0

    def wait(self) -> None:
        """Block until every file is read; raise the first error (in words, read again)."""
        self.samples, self.nbytes = self.started.batch()

    def take(self) -> tuple[int, list[np.ndarray]]:
        """Bytes read and the batch's data, handed over (no reference kept)."""
        samples, self.samples = self.samples, []
        return self.nbytes, samples

    def abandon(self) -> None:
        """The epoch was left: files no thread has started are not read."""
        self.started.cancel()


def build(plan: Plan, reader: SampleReader) -> NativeLoader:
    """The native loader as the plan's ``reader`` section configures it."""
    r = plan.config.reader
    return NativeLoader(reader, r.batch_size, r.read_threads, r.prefetch_size, r.drop_last)


class NativeLoader:
    """``reader.data_loader: native``: a pool of reader threads over a ``SampleReader``."""

    @property
    def deviations(self) -> list[str]:
        """None: this loader follows the plan exactly."""
        return []

    def __init__(self, reader: SampleReader, batch_size: int, read_threads: int,
                 prefetch_size: int, drop_last: bool) -> None:
        self.reader = reader
        self.batch_size = batch_size
        self.prefetch_size = prefetch_size
        self.drop_last = drop_last
        self._work: queue.SimpleQueue[tuple[_Slot, int, list[int]] | None] = \
            queue.SimpleQueue()
        # a batch is split into at least this many work items: as few as keep every reader
        # busy with the prefetch depth's batches in flight (fewer hand-offs; one-sample files
        # of an item are read in one call), more when the depth is below the readers; more
        # again for large samples (``ITEM_BYTES``, ``_item_samples``)
        self._share_of = max(1, -(-read_threads // max(1, prefetch_size)))
        self._samples_per_item: int | None = None  # found from the first epoch's samples
        # batches being read while compute holds one: the prefetch depth, and enough to keep
        # every reader busy when a batch is fewer work items than there are readers (batch 1
        # of cosmoflow). A batch read whole (parquet) is one reader's: one per reader and the
        # prefetch depth besides, so a reader done while the oldest batch is still being read
        # goes on to another (one per reader left readers blocked 15-20 % of the time, DLRM
        # on 2 cores, more under load: each wait of the consumer idled them)
        if reader.batched:
            self._ahead = read_threads + prefetch_size
        else:
            self._ahead = max(prefetch_size,
                              -(-read_threads // min(batch_size, self._share_of)))
        self._pool = self._sample_pool(batch_size)
        # one-sample npy/npz files: read by threads that stay in C (``_readfiles.ReadQueue``),
        # each batch shared by all of them (the oldest is done soonest), ``_chunk`` files at
        # a time (at most the samples of ``ITEM_BYTES``)
        self._queue = reader.read_queue() if read_threads and not reader.batched else None
        self._chunk = max(1, -(-batch_size // max(1, read_threads)))
        # files of one size below the pool's, named by index: submitted as their indices,
        # read into one block per batch (``NamedBatch``)
        self._named = file_names(reader) if self._queue is not None and self._pool is None \
            else None
        serve = self._read_loop if self._queue is None else self._queue.serve
        self._threads = [threading.Thread(target=serve, name=f"reader-{i}", daemon=True)
                         for i in range(read_threads)]
        for thread in self._threads:
            thread.start()

    def _sample_pool(self, batch_size: int) -> SampleBuffers | None:
        """Reused memory for one-sample files of one size, when they are large enough for
        fresh memory's cost to show (``POOL_MIN_BYTES``): as many free blocks as the samples
        in flight (the batches being read and the one handed over)."""
        if self.reader.batched or self.reader.samples_per_file != 1:
            return None
        size = self.reader.uniform_file_size()
        if size is None or size < POOL_MIN_BYTES:
            return None
        return SampleBuffers(size, keep=(self._ahead + 1) * batch_size)

    def _read_loop(self) -> None:
        read_many, pool = self.reader.read_many, self._pool
        while (item := self._work.get()) is not None:
            slot, start, sample_ids = item
            if slot.stale or slot.error is not None:
                continue
            try:
                if start == WHOLE:
                    slot.put_all(*self.reader.read_batch(slot.ids))
                    continue
                # the reader's share in one call: one-sample files are read together
                results = read_many(sample_ids, pool)
                slot.put(start, results)
                del results  # no local keeps a sample alive once handed over
            except BaseException as exc:  # handed to the consumer, which raises it
                slot.fail(exc)

    def _submit(self, batch_ids: np.ndarray) -> _Slot | _Queued | NamedBatch:
        """Queue a batch: a whole-batch item for formats read a batch at once, else one item
        per share of it (consecutive samples, ``_share_of`` shares), one hand-off per share
        instead of one per sample."""
        if self.reader.batched:
            slot = _Slot(batch_ids, whole=True)
            self._work.put((slot, WHOLE, []))
            return slot
        if self._queue is not None:  # one submission; each thread takes ``_chunk`` at a time
            chunk = min(self._chunk, self._samples_per_item or 1)
            if self._named is not None:  # the indices as they are (an int64 array)
                names, size = self._named
                return NamedBatch(self.reader, self._queue, names, batch_ids, size, chunk)
            return _Queued(batch_ids, self.reader.start_many(batch_ids.tolist(), self._queue,
                                                             self._pool, chunk))
        ids = batch_ids.tolist()
        share = min(-(-len(ids) // self._share_of), self._samples_per_item or len(ids))
        starts = range(0, len(ids), share)
        slot = _Slot(batch_ids, len(starts))
        for start in starts:
            self._work.put((slot, start, ids[start:start + share]))
        return slot

    def _item_samples(self, ids: np.ndarray) -> int:
        """Samples per work item that make it about ``ITEM_BYTES`` (at least one): the
        sizes of up to ``PROBE`` of ``ids``' files (a rank holds the sizes of its own)."""
        per_file = self.reader.samples_per_file
        probe = ids[::max(1, ids.size // PROBE)][:PROBE]
        if not probe.size:
            return self.batch_size
        sizes = self.reader.sizes
        mean = sum(sizes[int(i) // per_file] for i in probe) / probe.size / per_file
        return max(1, round(ITEM_BYTES / max(1.0, mean)))

    def epoch(self, ids: np.ndarray) -> Generator[Batch, None, None]:
        """Batches of ``ids`` in order."""
        plan = batches(ids, self.batch_size, self.drop_last)
        if not self._threads:
            for batch_ids in plan:
                if self.reader.batched:
                    rows, nbytes = self.reader.read_batch(batch_ids)
                    yield Batch(ids=batch_ids, nbytes=nbytes, data=rows)
                    continue
                results = [self.reader.read(i) for i in batch_ids]
                yield Batch(ids=batch_ids, nbytes=sum(n for _, n in results),
                            data=[s for s, _ in results])
            return
        if self._samples_per_item is None and ids.size:
            self._samples_per_item = self._item_samples(ids)
        if self._pool is not None:  # in-flight memory made and touched before the window
            # (a queued batch takes its memory when submitted: all ``keep`` blocks are used)
            cap = ids.size if self._queue is not None else RESERVE_BYTES // self._pool.size
            self._pool.reserve(min(ids.size, (self._ahead + 1) * self.batch_size, cap))
        upcoming = iter(plan)
        slots: deque[_Slot | _Queued | NamedBatch] = deque()

        def top_up(ahead: int) -> None:
            while len(slots) < ahead and (following := next(upcoming, None)) is not None:
                slots.append(self._submit(following))

        top_up(self._ahead)  # at least 1: there are readers
        try:
            while slots:
                slot = slots.popleft()
                slot.wait()
                top_up(self._ahead)
                # taken, not referenced: while the generator waits at the yield, the frame
                # keeps ``slot`` but no longer the samples the consumer drops
                yield Batch(slot.ids, *slot.take())
        finally:
            for slot in slots:
                slot.abandon()

    def close(self) -> None:
        """Stop the reader threads."""
        if self._queue is not None:
            self._queue.close()
        for _ in self._threads:
            self._work.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []
