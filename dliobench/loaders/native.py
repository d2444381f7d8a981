"""The native loader: a thread pool reads and decodes samples; batches are read ahead.

Up to ``prefetch_size`` batches beyond the one being consumed are in flight, so reading
overlaps the emulated compute; at most ``read_threads`` samples are being read at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from dliobench.loaders.base import Batch, SampleReader
from dliobench.sharding import batches


class NativeLoader:
    """Thread-pool loader over a ``SampleReader``."""

    def __init__(self, reader: SampleReader, batch_size: int, read_threads: int,
                 prefetch_size: int, drop_last: bool) -> None:
        self.reader = reader
        self.batch_size = batch_size
        self.prefetch_size = prefetch_size
        self.drop_last = drop_last
        self._pool = (ThreadPoolExecutor(read_threads, thread_name_prefix="reader")
                      if read_threads > 0 else None)

    def epoch(self, ids: np.ndarray) -> Iterator[Batch]:
        """Batches of ``ids`` in order."""
        plan = batches(ids, self.batch_size, self.drop_last)
        if self._pool is None:
            for batch_ids in plan:
                yield self._assemble(batch_ids, [self.reader.read(i) for i in batch_ids])
            return
        pool = self._pool
        queue: deque[tuple[np.ndarray, list[Future[tuple[np.ndarray, int]]]]] = deque()
        upcoming = iter(plan)

        def submit_next() -> None:
            batch_ids = next(upcoming, None)
            if batch_ids is not None:
                queue.append((batch_ids, [pool.submit(self.reader.read, i) for i in batch_ids]))

        for _ in range(self.prefetch_size + 1):
            submit_next()
        try:
            while queue:
                batch_ids, futures = queue.popleft()
                submit_next()
                yield self._assemble(batch_ids, [f.result() for f in futures])
        finally:
            for _, futures in queue:
                for f in futures:
                    f.cancel()

    @staticmethod
    def _assemble(batch_ids: np.ndarray, results: list[tuple[np.ndarray, int]]) -> Batch:
        return Batch(ids=batch_ids, nbytes=sum(n for _, n in results),
                     data=[sample for sample, _ in results])

    def close(self) -> None:
        """Stop the reader threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
