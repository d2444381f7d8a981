"""The DALI loader: a real NVIDIA DALI pipeline on the CPU (``device_id=None``).

npy files of one sample each are read by DALI itself, in the plan's order (``files``: an
external source of paths, ``fn.io.file.read``, our npy reader's header check; about as fast
as DALI's ``fn.readers.numpy``). Otherwise ``fn.external_source`` is fed by dliobench's own
``SampleReader``: every format works and the rank's sharded, ordered ids are followed
exactly. With ``read_threads > 0`` the
source runs in DALI's Python worker processes (``parallel=True``, ``py_num_workers =
read_threads``), one callback per sample (``batch=False``, the default and DALI's recommended
mode: each batch is split over the workers) or, with ``per_sample=False``, one per batch; on 2
cores with page-cached data per-sample was as fast or faster. ``read_threads = 0`` reads inline.
A sample leaves the source as its bytes plus an int64 ``[id, bytes read, *shape]``, so the
delivered ids and the bytes counted at the read call travel with the batch; each epoch's ids
reach the workers through a small file (in ``/dev/shm`` when it exists). A partial last batch
is returned short by a batch callback; DALI's per-sample mode only makes full batches, so it
is filled with empty placeholders (id -1) that are stripped before the batch is handed on.

With ``native_reader=True`` DALI's own readers read the files (see ``dali_native``): they
shard, shuffle and pad their own way, and ``deviations`` says how that departs from the plan.
Batches stay on the host: placing them on a GPU is left until it can be tested on one.
"""

from __future__ import annotations

import logging
from collections.abc import Generator

import numpy as np

from dliobench.dataset.sharding import ShardSpec
from dliobench.loaders.base import Batch, SampleReader
from dliobench.loaders.dali.base import Feed, start_method
from dliobench.loaders.dali.files import FileFeed, files_misfit
from dliobench.loaders.dali.source import SourceFeed, source_depth

__all__ = ["DaliLoader", "start_method"]
log = logging.getLogger(__name__)


class DaliLoader:
    """``reader.data_loader: dali``: one DALI pipeline per loader, reused across epochs.

    ``native_reader`` uses DALI's own reader where one fits the format; it needs this rank's
    ``spec`` (rank, ranks, shuffles, seed) and records how DALI departs from the plan in
    ``deviations``.
    """

    def __init__(self, reader: SampleReader, batch_size: int, read_threads: int,
                 prefetch_size: int, drop_last: bool, multiprocessing_context: str,
                 per_sample: bool = True, native_reader: bool = False,
                 spec: ShardSpec | None = None) -> None:
        self._notes: list[str] = []
        feed: Feed | None = None
        if native_reader:
            from dliobench.loaders.dali.native import native_feed

            feed = native_feed(reader, spec, batch_size, read_threads, prefetch_size,
                               drop_last, self._notes)
        if feed is None and files_misfit(reader) is None:
            feed = FileFeed(reader, batch_size, read_threads, prefetch_size, drop_last)
        if feed is None:
            method = start_method(multiprocessing_context, self._notes)
            feed = SourceFeed(reader, batch_size, read_threads, prefetch_size, drop_last,
                              method, per_sample)
        self._feed: Feed | None = feed
        # runs that are likely read already: the pipeline's queue, the workers' and one more
        self._ahead = max(1, prefetch_size) + source_depth(per_sample, read_threads,
                                                           prefetch_size) + 1

    @property
    def deviations(self) -> list[str]:
        """How this run departs from the configured plan, in words for the result."""
        return self._notes + (self._feed.deviations if self._feed is not None else [])

    def epoch(self, ids: np.ndarray) -> Generator[Batch, None, None]:
        """This epoch's batches: exactly ``ids`` in order, or DALI's own shard (native)."""
        feed = self._feed
        assert feed is not None, "loader is closed"
        if feed.left():  # the last epoch was left early; DALI resets only at an epoch's end
            log.debug("DALI: reading the rest of an epoch left early")
            self._finish(feed)
        feed.start(np.asarray(ids, dtype=np.int64))
        try:
            # a callable's iterator keeps no reference to the batch it returned
            yield from iter(feed.next_batch, None)
        except GeneratorExit:  # left early
            if feed.left() <= self._ahead:  # all read ahead already: finish between epochs
                self._finish(feed)
            raise
        self._finish(feed)  # runs past the batches handed on (a DALI reader's padding)

    @staticmethod
    def _finish(feed: Feed) -> None:
        while feed.left():
            feed.skip()

    def close(self) -> None:
        """Release the pipeline and its Python worker processes (``deviations`` stay)."""
        feed, self._feed = self._feed, None
        if feed is not None:
            self._notes = self._notes + feed.deviations
            feed.close()
