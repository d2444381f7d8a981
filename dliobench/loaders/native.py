"""The native loader: reader threads read and decode samples; batches are read ahead.

Up to ``prefetch_size`` batches beyond the one being consumed are queued, so reading overlaps
the emulated compute; at most ``read_threads`` samples are being read at once (formats read
a batch at once, ``SampleReader.batched``: parquet, one whole batch per work item). Work moves
through one ``queue.SimpleQueue`` (a C queue, no per-item lock in Python) and each batch
waits on one event: about 2 us of overhead per sample, where a Future per sample cost ~15 us.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Generator
from typing import TYPE_CHECKING

import numpy as np

from dliobench.dataset.sharding import batches
from dliobench.formats.base import Columns
from dliobench.loaders.base import Batch, SampleReader

if TYPE_CHECKING:
    from dliobench.plan import Plan


WHOLE = -1  # a work item's position meaning: read the slot's whole batch


class _Slot:
    """One batch being read: its results fill in as reader threads finish samples."""

    __slots__ = ("done", "error", "ids", "left", "lock", "nbytes", "samples", "stale")

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids
        self.samples: list[np.ndarray | None] | Columns = [None] * ids.size
        self.nbytes = 0
        self.left = ids.size
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.stale = False  # the epoch was left early: skip the remaining work

    def put(self, position: int, sample: np.ndarray, nbytes: int) -> None:
        with self.lock:
            self.samples[position] = sample  # type: ignore[index]  # a list until put_all
            self.nbytes += nbytes
            self.left -= 1
            finished = self.left == 0
        if finished:
            self.done.set()

    def put_all(self, columns: Columns, nbytes: int) -> None:
        """The whole batch at once (``SampleReader.read_batch``)."""
        self.samples, self.nbytes, self.left = columns, nbytes, 0
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


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
        self._work: queue.SimpleQueue[tuple[_Slot, int, int] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._read_loop, name=f"reader-{i}",
                                          daemon=True) for i in range(read_threads)]
        for thread in self._threads:
            thread.start()

    def _read_loop(self) -> None:
        read = self.reader.read
        while (item := self._work.get()) is not None:
            slot, position, sample_id = item
            if slot.stale or slot.error is not None:
                continue
            try:
                if position == WHOLE:
                    slot.put_all(*self.reader.read_batch(slot.ids))
                    continue
                sample, nbytes = read(sample_id)
            except BaseException as exc:  # handed to the consumer, which raises it
                slot.fail(exc)
                continue
            slot.put(position, sample, nbytes)

    def _submit(self, batch_ids: np.ndarray) -> _Slot:
        slot = _Slot(batch_ids)
        if self.reader.batched:  # one work item reads the whole batch
            self._work.put((slot, WHOLE, 0))
            return slot
        for position, sample_id in enumerate(batch_ids.tolist()):
            self._work.put((slot, position, sample_id))
        return slot

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
        upcoming = iter(plan)
        slots: deque[_Slot] = deque()
        for batch_ids in upcoming:
            slots.append(self._submit(batch_ids))
            if len(slots) > self.prefetch_size:
                break
        try:
            while slots:
                slot = slots.popleft()
                following = next(upcoming, None)
                if following is not None:
                    slots.append(self._submit(following))
                slot.done.wait()
                if slot.error is not None:
                    raise slot.error
                yield Batch(ids=slot.ids, nbytes=slot.nbytes,
                            data=slot.samples)  # type: ignore[arg-type]
        finally:
            for slot in slots:
                slot.stale = True

    def close(self) -> None:
        """Stop the reader threads."""
        for _ in self._threads:
            self._work.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []
