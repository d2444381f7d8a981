"""Samples submitted to a ``ReadQueue`` by ``SampleReader.start_many`` (the native loader's
batches of one-sample npy and npz files), taken in order by ``result``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dliobench.storage import checked_reads

Samples = list[tuple[np.ndarray, int]]  # each sample and the bytes read for it, in order
# ``SampleReader._results``: the samples of ``read_checked``'s results
Finish = Callable[[list[int], list[str], Sequence[tuple[np.ndarray, int] | tuple[memoryview, int]
                                                  | None], int], Samples]


class Started:
    """Samples ``SampleReader.start_many`` submitted: ``result`` waits for them."""

    __slots__ = ("finish", "keys", "pending", "sample_ids")

    def __init__(self, finish: Finish, sample_ids: list[int], keys: list[str],
                 pending: checked_reads.Pending) -> None:
        self.finish, self.sample_ids, self.keys, self.pending = finish, sample_ids, keys, pending

    def result(self) -> Samples:
        """Each sample and the bytes read for it, in order (as ``read_many``)."""
        got, misses = self.pending.result()
        return self.finish(self.sample_ids, self.keys, got, misses)

    def cancel(self) -> None:
        """Leave the samples unread if no thread has started them."""
        self.pending.cancel()
