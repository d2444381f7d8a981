"""The PyTorch loader: a real ``torch.utils.data.DataLoader`` over a map-style dataset.

Configured the way training configures it: ``num_workers = reader.read_threads``,
``prefetch_factor`` from ``reader.prefetch_size`` (batches ahead in total, spread over the
workers), persistent workers, pin_memory (only where CUDA exists), the multiprocessing start
method, and a sampler that yields this rank's sharded, per-epoch-shuffled sample ids. Workers
read through the same ``SampleReader`` as every loader and return the bytes they read, so
bytes are counted at the read call even in worker processes.

A worker packs its batch into one tensor in shared memory (``Packed``, as the default
collate stacks into shared memory) and sends the ids as a numpy array: the batch crosses to
the training process as one storage, one file-descriptor hand-over, whatever the samples'
sizes (a stack copied again into shared memory, the ids as a second storage and a storage
per sample of a batch of mixed sizes cost that much more).
"""

from __future__ import annotations

import copy
import logging
import math
import warnings
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

import dliobench.storage.latency as latency
from dliobench.base import leftovers
from dliobench.base.errors import DlioBenchError, MissingExtraError
from dliobench.dataset.sharding import batches
from dliobench.loaders.base import Batch, SampleReader

if TYPE_CHECKING:
    from dliobench.dataset.plan import Plan

log = logging.getLogger(__name__)
TORCH_SEGMENT_AGE_S = 600  # a live job's batch in flight is consumed long before this
# torch repeats this at every DataLoader and iterator start; the loader says it once, below
warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)

try:
    import torch
    from torch.utils.data import DataLoader, Dataset, Sampler
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("PyTorch", "torch") from exc


Item = tuple[torch.Tensor, int, int] | DlioBenchError


class SampleDataset(Dataset):
    """Map-style dataset: index = global sample id; item = (tensor, bytes read, id).

    A read error is the item itself (picklable): torch would re-raise it in the run as a
    ``RuntimeError`` holding the worker's traceback, or rebuild it from that text.
    """

    def __init__(self, reader: SampleReader) -> None:
        self.reader = reader

    def __len__(self) -> int:
        return self.reader.num_files * self.reader.samples_per_file

    def __getitem__(self, sample_id: int) -> Item:
        try:
            sample, nbytes = self.reader.read(sample_id)
        except DlioBenchError as exc:
            return exc
        if not sample.flags.writeable:  # torch wants writable memory; views of read buffers
            sample = sample.copy()      # are read-only only for formats that decode in place
        return torch.from_numpy(sample), nbytes, int(sample_id)


class BatchDataset(Dataset):
    """Map-style dataset whose index is a whole batch of ids (``SampleReader.batched``): a
    worker reads it with one ``read_batch``; item = (a tensor per column, bytes read, ids)."""

    def __init__(self, reader: SampleReader) -> None:
        self.reader = reader

    def __getitem__(self, ids: np.ndarray) -> tuple[tuple[torch.Tensor, ...], int,
                                                     np.ndarray, Any] | DlioBenchError:
        try:
            columns, nbytes = self.reader.read_batch(ids)
        except DlioBenchError as exc:
            return exc
        with warnings.catch_warnings():  # views of Arrow's read-only memory: never written
            warnings.simplefilter("ignore", UserWarning)
            tensors = tuple(torch.from_numpy(c) for c in columns)
        return tensors, nbytes, np.asarray(ids, dtype=np.int64), latency.take()


class EpochBatchSampler(Sampler[np.ndarray]):
    """Yields this epoch's ids in batches (drop_last as configured), one index per batch."""

    def __init__(self, batch_size: int, drop_last: bool) -> None:
        self.ids = np.empty(0, dtype=np.int64)
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(batches(self.ids, self.batch_size, self.drop_last))

    def __len__(self) -> int:
        full, rest = divmod(int(self.ids.size), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)


def quiet_worker(_: int) -> None:
    """A DataLoader worker's start (``worker_init_fn``): when the run is stopped and the
    parent closes its end, the feeder thread of the worker's result queue meets a broken
    pipe, and multiprocessing prints that thread's traceback by default
    (``Queue._on_queue_feeder_error``); in a worker, the pipe's other end gone means the
    run is ending: say nothing then (the fault sweep's "SIGTERM run pytorch" met it once in
    about 18 runs)."""
    import multiprocessing.queues as queues

    queues.Queue._on_queue_feeder_error = staticmethod(_feeder_error)  # type: ignore[attr-defined]


def _feeder_error(error: Exception, obj: object) -> None:
    if isinstance(error, (BrokenPipeError, ConnectionResetError, EOFError)):
        return
    import traceback

    traceback.print_exc()


def _whole(item: Any) -> Any:
    """A batch read whole needs no collating."""
    return item


class EpochSampler(Sampler[int]):
    """Yields the ids set for the current epoch (this rank's shard, in its order)."""

    def __init__(self) -> None:
        self.ids = np.empty(0, dtype=np.int64)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids.tolist())

    def __len__(self) -> int:
        return int(self.ids.size)


class Packed:
    """A batch's samples as one flat tensor (in shared memory in a worker) and their shapes:
    the batch crosses to the main process as one storage, whatever the samples' sizes."""

    def __init__(self, samples: list[torch.Tensor]) -> None:
        first = samples[0]
        self.shapes = [tuple(s.shape) for s in samples]
        numel = sum(s.numel() for s in samples)
        if numel and torch.utils.data.get_worker_info() is not None:  # as the default collate:
            storage = first._typed_storage()._new_shared(numel, device=first.device)
            self.flat = first.new(storage)  # concatenated straight into shared memory
        else:
            self.flat = first.new_empty(numel)
        torch.cat([s.reshape(-1) for s in samples], out=self.flat)

    def pin_memory(self) -> Packed:
        """The batch in page-locked memory (the DataLoader's pin_memory thread calls this,
        as it pins a stacked tensor)."""
        pinned = copy.copy(self)
        pinned.flat = self.flat.pin_memory()
        return pinned

    def unpack(self) -> list[torch.Tensor]:
        """The samples, as views of the flat tensor."""
        shapes = self.shapes
        if all(shape == shapes[0] for shape in shapes):
            return list(self.flat.view(len(shapes), *shapes[0]))
        sizes = [math.prod(shape) for shape in shapes]
        return [part.view(shape) for part, shape in zip(self.flat.split(sizes), shapes,
                                                        strict=True)]


def collate(items: list[Item]) -> tuple[Packed | list[torch.Tensor], int, np.ndarray, Any] \
        | DlioBenchError:
    """The batch's samples packed into one tensor (a list when their dtypes differ), the
    bytes read, the ids (numpy: pickled inline, no second storage to hand over) and the
    worker's request latencies since its last batch; the first read error instead when there
    is one."""
    good: list[tuple[torch.Tensor, int, int]] = []
    for item in items:
        if isinstance(item, DlioBenchError):
            return item
        good.append(item)
    samples = [s for s, _, _ in good]
    same = all(s.dtype == samples[0].dtype for s in samples)
    data = Packed(samples) if same else samples
    return data, sum(n for _, n, _ in good), np.array([i for _, _, i in good], dtype=np.int64), \
        latency.take()


def build(plan: Plan, reader: SampleReader) -> PyTorchLoader:
    """The PyTorch loader as the plan's ``reader`` section configures it."""
    r = plan.config.reader
    return PyTorchLoader(reader, r.batch_size, r.read_threads, r.prefetch_size, r.drop_last,
                         r.multiprocessing_context, r.persistent_workers, r.pin_memory)


class PyTorchLoader:
    """``reader.data_loader: pytorch``."""

    @property
    def deviations(self) -> list[str]:
        """None: this loader follows the plan exactly."""
        return []

    def __init__(self, reader: SampleReader, batch_size: int, read_threads: int,
                 prefetch_size: int, drop_last: bool, multiprocessing_context: str,
                 persistent_workers: bool, pin_memory: bool) -> None:
        self._sampler = EpochSampler()
        workers = read_threads  # more than the cores: said before the run (run.preflight)
        extra: dict[str, Any] = {}
        if workers > 0:
            extra = {"prefetch_factor": max(1, math.ceil(prefetch_size / workers)),
                     "persistent_workers": persistent_workers,
                     "multiprocessing_context": multiprocessing_context,
                     "worker_init_fn": quiet_worker}
        pin = pin_memory and torch.cuda.is_available()
        if pin_memory and not pin:
            log.debug("reader.pin_memory ignored: no CUDA device")
        if workers:  # segments of workers killed mid-batch (a killed run), gone a while
            leftovers.sweep(r"torch_(?P<pid>\d+)_\d+_\d+", min_age_s=TORCH_SEGMENT_AGE_S)
            # named semaphores of spawn/forkserver workers killed with their resource
            # tracker (a batch system kills the whole job): no process maps them any more
            leftovers.sweep_unmapped("sem.mp-", min_age_s=TORCH_SEGMENT_AGE_S)
        self._batches = EpochBatchSampler(batch_size, drop_last)
        self._batched = reader.batched
        if reader.batched:  # one worker reads a whole batch: no per-sample work
            self._loader: DataLoader[Any] | None = DataLoader(
                BatchDataset(reader), batch_size=None, sampler=self._batches,
                num_workers=workers, collate_fn=_whole, pin_memory=pin, **extra)
        else:
            self._loader = DataLoader(
                SampleDataset(reader), batch_size=batch_size, sampler=self._sampler,
                num_workers=workers, drop_last=drop_last, collate_fn=collate,
                pin_memory=pin, **extra)

    def epoch(self, ids: np.ndarray) -> Generator[Batch, None, None]:
        """Batches of ``ids`` through the DataLoader's workers."""
        assert self._loader is not None, "loader is closed"
        self._sampler.ids = self._batches.ids = np.asarray(ids, dtype=np.int64)
        # map keeps no reference to the batch it returned: while this generator waits at the
        # yield, the batch the consumer dropped is freed (a ``for`` target would keep it)
        yield from map(self._batch, self._loader)

    def _batch(self, out: Any) -> Batch:
        """A batch from what the DataLoader returned (a worker's read error is raised here)."""
        if isinstance(out, DlioBenchError):
            raise out
        data, nbytes, batch_ids, requests = out
        latency.merge(requests)  # a worker's reads join this rank's
        if self._batched:  # a batch read whole stays its columns
            samples: Any = tuple(t.numpy() for t in data)
        else:
            samples = data.unpack() if isinstance(data, Packed) else data
        return Batch(ids=batch_ids, nbytes=int(nbytes), data=samples)

    def close(self) -> None:
        """Shut the worker processes down."""
        loader, self._loader = self._loader, None
        iterator = getattr(loader, "_iterator", None)
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
