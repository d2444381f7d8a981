"""The DALI loader's default feed: ``fn.external_source`` fed by dliobench's SampleReader.

Each sample leaves the source as its bytes plus an int64 ``[id, bytes read, ndim, *shape]``
(and, from a worker process, its object-store requests); each epoch's ids reach DALI's worker
processes through a small file. See ``dali`` for the modes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any

import numpy as np

import dliobench.storage.latency as latency
from dliobench.base import leftovers
from dliobench.base.errors import DlioBenchError
from dliobench.dataset.writer_pool import die_with_parent
from dliobench.loaders.base import Batch, SampleReader
from dliobench.loaders.dali.base import (
    BatchInfo,
    SampleInfo,
    fn,
    host_samples,
    pipeline_def,
    release,
    unwrap_worker_error,
    worker_error,
    workers_ignore_interrupts,
)
from dliobench.storage.atomic import write_atomic
from dliobench.storage.latency import LatencyLog

FOLDER_PREFIX = "dliobench-dali-"  # + the pid of the run: /dev/shm/dliobench-dali-<pid>-<random>
LEFTOVER_PATTERN = rf"{FOLDER_PREFIX}(?P<pid>\d+)-.*"
PAD_ID = -1  # id of the placeholder samples that fill a partial last batch
_PLACEHOLDER = (np.empty(0, dtype=np.uint8), np.array([PAD_ID, 0, 0], dtype=np.int64))


def pack(reader: SampleReader, sample_id: int, in_worker: bool) -> tuple[np.ndarray, np.ndarray]:
    """Read one sample: its bytes (flat uint8) and int64 ``[id, bytes read, ndim, *shape]``,
    then, in a worker process, the object-store requests it made (``LatencyLog.as_ints``):
    arrays are a DALI worker's only way back, and the rank merges them in ``to_batch``."""
    try:
        sample, nbytes = reader.read(sample_id)
    except DlioBenchError as exc:
        if in_worker:
            raise worker_error(exc) from None
        raise
    sample = np.ascontiguousarray(sample)
    if sample.dtype != np.uint8:  # every format decodes to uint8; keep others as raw bytes
        sample = sample.reshape(-1).view(np.uint8)
    meta = [sample_id, nbytes, sample.ndim, *sample.shape]
    requests = latency.take() if in_worker else None
    if requests is not None:
        meta += requests.as_ints()
    return sample.reshape(-1), np.array(meta, dtype=np.int64)


def epoch_length(samples: int, batch_size: int, drop_last: bool) -> int:
    """Samples the source hands DALI in an epoch: whole batches, placeholders included."""
    full, rest = divmod(samples, batch_size)
    return (full + (rest > 0 and not drop_last)) * batch_size


class EpochIds:
    """Each epoch's sample ids, in files that DALI's worker processes read (picklable)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._cached: tuple[int, np.ndarray] = (-1, np.empty(0, dtype=np.int64))

    def _path(self, epoch: int) -> str:
        return os.path.join(self.folder, f"epoch-{epoch}.npy")

    def publish(self, epoch: int, ids: np.ndarray) -> None:
        """Make ``ids`` the ids of DALI epoch ``epoch`` (the one before stays, for stragglers)."""
        ids = np.asarray(ids, dtype=np.int64)
        write_atomic(self._path(epoch), lambda handle: np.save(handle, ids), durable=False)
        if os.path.exists(self._path(epoch - 2)):
            os.remove(self._path(epoch - 2))

    def get(self, epoch: int) -> np.ndarray:
        """The ids of DALI epoch ``epoch``."""
        if self._cached[0] != epoch:
            self._cached = (epoch, np.load(self._path(epoch)))
        return self._cached[1]


_BOUND: list[bool] = []  # set in a worker process once it is bound to its parent's life


class EpochSource:
    """The ``external_source`` callback (pickled into DALI's workers): per sample, sample
    ``idx_in_epoch`` of this epoch's ids or a placeholder; per batch, batch ``iteration``."""

    def __init__(self, reader: SampleReader, ids: EpochIds, batch_size: int, drop_last: bool,
                 per_sample: bool, in_worker: bool) -> None:
        self.reader, self.ids, self.batch_size, self.drop_last = reader, ids, batch_size, drop_last
        self.per_sample, self.in_worker = per_sample, in_worker

    def __call__(self, info: SampleInfo | BatchInfo) -> tuple[Any, Any]:
        if self.in_worker and not _BOUND:  # first call in a DALI worker process
            _BOUND.append(True)
            die_with_parent()  # a killed run leaves no DALI worker behind
        ids = self.ids.get(info.epoch_idx)
        end = epoch_length(ids.size, self.batch_size, self.drop_last)
        if isinstance(info, SampleInfo):
            if info.idx_in_epoch >= end:
                raise StopIteration
            if info.idx_in_epoch >= ids.size:
                return _PLACEHOLDER
            return pack(self.reader, int(ids[info.idx_in_epoch]), self.in_worker)
        start = info.iteration * self.batch_size
        if start >= end:
            raise StopIteration
        packed = [pack(self.reader, int(i), self.in_worker)
                  for i in ids[start:start + self.batch_size]]
        return [data for data, _ in packed], [meta for _, meta in packed]


def to_batch(data: Any, meta: Any) -> Batch:
    """A Batch from the external source's two outputs, without the placeholder samples."""
    metas = [np.array(m) for m in meta]
    keep = [i for i, m in enumerate(metas) if m[0] != PAD_ID]
    samples = host_samples(data)
    shapes = []
    for i in keep:
        end = 3 + int(metas[i][2])
        shapes.append(tuple(metas[i][3:end]))
        if metas[i].size > end:  # a worker's requests for this sample join this rank's
            latency.merge(LatencyLog.from_ints(metas[i][end:].tolist()))
    return Batch(ids=np.array([metas[i][0] for i in keep], dtype=np.int64),
                 nbytes=sum(int(metas[i][1]) for i in keep),
                 data=[samples[i].reshape(shape) for i, shape in zip(keep, shapes, strict=True)])


def source_depth(per_sample: bool, read_threads: int, prefetch_size: int) -> int:
    """Batches the Python workers compute ahead of the pipeline (at least one per worker)."""
    depth = max(1, prefetch_size)
    return depth if per_sample else max(depth, read_threads)


def source_pipeline(source: EpochSource, batch_size: int, read_threads: int,
                    prefetch_size: int, method: str) -> Any:
    """A built CPU pipeline whose only operator is the external source (data, meta)."""
    workers = max(1, read_threads)
    per_sample, parallel = source.per_sample, read_threads > 0
    options: dict[str, Any] = {"batch": not per_sample, "parallel": parallel}
    if not per_sample:
        options["batch_info"] = True
    if parallel:  # batches the workers compute ahead (each split over all, or one each)
        options["prefetch_queue_depth"] = source_depth(per_sample, read_threads, prefetch_size)

    @pipeline_def(batch_size=batch_size, num_threads=workers, device_id=None,
                  prefetch_queue_depth=max(1, prefetch_size), py_num_workers=workers,
                  py_start_method=method)
    def graph() -> tuple[Any, Any]:
        data, meta = fn.external_source(source=source, num_outputs=2, **options)
        return data, meta

    with workers_ignore_interrupts():  # build() starts the worker processes
        pipe = graph()
        pipe.build()
    return pipe


class EpochRuns:
    """The epoch bookkeeping of a feed whose pipeline starts with an external source that
    raises StopIteration at the end of each epoch (a partial last batch returned short or
    padded); subclasses publish the ids, turn outputs into a Batch and explain errors."""

    pipe: Any

    def __init__(self, batch_size: int, drop_last: bool) -> None:
        self.batch_size, self.drop_last = batch_size, drop_last
        self.deviations: list[str] = []
        self._epoch = -1
        self._left = 0

    def _publish(self, epoch: int, ids: np.ndarray) -> None:
        """Make ``ids`` what the source hands DALI in its epoch ``epoch``."""
        raise NotImplementedError

    def _to_batch(self, outputs: Any) -> Batch:
        """A Batch from one pipeline run's outputs."""
        raise NotImplementedError

    def _error(self, exc: Exception) -> BaseException | None:
        """The error to raise for a failed run (None: DALI's own)."""
        return None

    def start(self, ids: np.ndarray) -> None:
        """Begin the next DALI epoch with ``ids``."""
        if self._epoch >= 0:
            self.pipe.reset()
        self._epoch += 1
        self._publish(self._epoch, ids)
        # every batch, then the run that meets the source's StopIteration
        self._left = epoch_length(ids.size, self.batch_size, self.drop_last) // self.batch_size + 1

    def left(self) -> int:
        """Pipeline runs left in DALI's epoch (the one that raises StopIteration included)."""
        return self._left

    def skip(self) -> None:
        """Run the pipeline once and discard the batch."""
        self.next_batch()

    def next_batch(self) -> Batch | None:
        """The next batch of the epoch, or None at its end."""
        try:
            outputs = self.pipe.run()
        except StopIteration:
            self._left = 0
            return None
        except Exception as exc:  # said in one line where the feed can
            error = self._error(exc)
            if error is not None:
                raise error from None
            raise
        self._left -= 1
        return self._to_batch(outputs)


class SourceFeed(EpochRuns):
    """Runs the external-source pipeline epoch by epoch; the ids reach it through files."""

    def __init__(self, reader: SampleReader, batch_size: int, read_threads: int,
                 prefetch_size: int, drop_last: bool, method: str, per_sample: bool) -> None:
        super().__init__(batch_size, drop_last)
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        if shm is not None:  # folders of runs killed before their clean-up
            leftovers.sweep(LEFTOVER_PATTERN)
        self.folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=shm)
        self._remove = weakref.finalize(self, shutil.rmtree, self.folder, True)  # at exit too
        self.ids = EpochIds(self.folder)
        per_sample = per_sample and read_threads > 0  # inline reading is per batch
        source = EpochSource(reader, self.ids, batch_size, drop_last, per_sample,
                             read_threads > 0)
        try:
            self.pipe = source_pipeline(source, batch_size, read_threads, prefetch_size, method)
        except BaseException:
            self._remove()
            raise

    def _publish(self, epoch: int, ids: np.ndarray) -> None:
        self.ids.publish(epoch, ids)

    def _to_batch(self, outputs: Any) -> Batch:
        data, meta = outputs
        return to_batch(data, meta)

    def _error(self, exc: Exception) -> BaseException | None:
        """A worker's error: ours in one line, not DALI's traceback."""
        return unwrap_worker_error(exc)

    def close(self) -> None:
        """Release the pipeline and its worker processes; remove the id files."""
        release(self.pipe)
        self.pipe = None
        self._remove()
