"""Write the synthetic dataset: parallel, deterministic, resumable, safe on a full disk.

Each file is committed through the storage backend (complete or not at all, side files
first); each rank syncs the storage and then appends the files it wrote to its manifest
journal, so the manifest never lists a file that is not durable, and an interrupted
generation, on one rank or many, resumes writing only what is missing.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

import dliobench.storage.lustre as lustre
from dliobench.base import interrupts
from dliobench.base.errors import DatasetError
from dliobench.base.units import size_text
from dliobench.comm.watchdog import Watchdog
from dliobench.comm.world import Comm, World
from dliobench.dataset import batch_writer, progress, space
from dliobench.dataset import writer_pool as writers
from dliobench.dataset.batch_writer import FileBatch
from dliobench.dataset.check import SliceState, check_slice, share
from dliobench.dataset.layout import TRAIN, sample_sizes
from dliobench.dataset.manifest import Manifest
from dliobench.dataset.plan import Plan
from dliobench.dataset.records import forget
from dliobench.storage.posix import TMP_MARK

log = logging.getLogger(__name__)
JOURNAL_EVERY_S = 1.0  # a killed generation loses at most about this much work,
JOURNAL_EVERY_FILES = 1000  # or this many files


@dataclass(frozen=True)
class Generated:
    """What a generation did, and the manifest as it now stands (on every rank)."""

    files_written: int
    bytes_written: int
    seconds: float
    files_total: int
    damaged: int = 0
    manifest: Manifest | None = field(default=None, repr=False)


def open_manifest(plan: Plan, world: World, comm: Comm) -> Manifest:
    """Rank 0 loads the manifest once (migrating a schema-1 one, folding in the journals of
    an interrupted generation) and checks it matches; every rank gets it."""
    manifest: Manifest | None = None
    if world.is_root:
        manifest = Manifest.load(plan.manifest_backend)
        if manifest is None:
            manifest = Manifest.new(plan.manifest_backend, plan.config.dataset,
                                    plan.fmt.side_suffixes)
        manifest.check_matches(plan.config.dataset)
        if manifest.journals:
            manifest.compact()
        _check_sample_crcs(manifest, plan)
    shared = comm.bcast(manifest)
    assert shared is not None
    return shared


def _check_sample_crcs(manifest: Manifest, plan: Plan) -> None:
    """A dataset gets per-sample checksums when it is generated, or never."""
    wanted = plan.config.dataset.sample_checksums
    if wanted and not manifest.sample_crcs and manifest.num_files:
        raise DatasetError(
            f"the dataset in {plan.backend.describe()} was generated without per-sample "
            "checksums; generate it into another dataset.data_folder with "
            "dataset.sample_checksums=true, or leave the key off")


def survey(plan: Plan, manifest: Manifest, world: World, comm: Comm, verify: bool,
           show_progress: bool,
           watchdog: Watchdog | None = None) -> tuple[list[int], list[int], int]:
    """(missing files, damaged files, bytes of the complete ones), over all ranks; each file
    checked is progress for the ``watchdog``."""
    files = share(len(plan.keys), world.size, world.rank)
    with progress.bar("verifying checksums", files[1] - files[0],
                      show_progress and world.is_root and verify, unit="files") as advance:

        def checked(n: int) -> None:
            if watchdog is not None:
                watchdog.beat("checking the dataset's files")
            advance(n)

        mine = check_slice(plan, manifest, world, verify, checked)
    if watchdog is not None:
        watchdog.beat("waiting for the other ranks to check their files")
    parts: list[SliceState] = comm.allgather(mine)
    return ([i for p in parts for i in p.missing], [i for p in parts for i in p.damaged],
            sum(p.present_bytes for p in parts))


def generate(plan: Plan, world: World, comm: Comm, show_progress: bool, check: bool = False,
             manifest: Manifest | None = None, missing: list[int] | None = None,
             damaged: list[int] | None = None) -> Generated:
    """Write the files that are missing (or, with ``check``, damaged); ranks split the work.

    ``manifest``, ``missing`` and ``damaged``: what the caller found already (then nothing is
    re-checked).
    A rank without progress (a file written or checked) for ``train.stall_timeout_s`` ends
    the job, naming itself and what it was doing.
    """
    with Watchdog(plan.config.train.stall_timeout_s, world, comm) as watchdog:
        return _generate(plan, world, comm, show_progress, check, manifest,
                         (missing, damaged or []), watchdog)


def _generate(plan: Plan, world: World, comm: Comm, show_progress: bool, check: bool,
              manifest: Manifest | None, found: tuple[list[int] | None, list[int]],
              watchdog: Watchdog) -> Generated:
    dataset = plan.config.dataset
    if manifest is None:
        watchdog.beat("reading the manifest" if world.is_root else
                      "waiting for rank 0 to read the manifest")
        manifest = open_manifest(plan, world, comm)
    missing, damaged = found
    if missing is None:
        watchdog.beat("checking the dataset's files")
        missing, damaged, _ = survey(plan, manifest, world, comm, check, show_progress,
                                     watchdog)
    if damaged:
        log.warning("%d file(s) did not match their checksum and are written again: %s",
                    len(damaged), ", ".join(plan.keys[i] for i in damaged[:5])
                    + (" ..." if len(damaged) > 5 else ""))
    if not missing:
        return Generated(0, 0, 0.0, dataset.num_files_train, len(damaged), manifest)
    sizes = sample_sizes(dataset)  # per file; drawn once, for the space check and the writers
    watchdog.beat("preparing the storage" if world.is_root else
                  "waiting for rank 0 to prepare the storage")
    if world.is_root:
        _prepare_storage(plan, missing, sizes)
        manifest.open_journals([len(missing[r::world.size]) + (len(damaged) if r == 0 else 0)
                                for r in range(world.size)])
        manifest.append(0, forget(damaged, len(manifest.side_suffixes),
                                               manifest.sample_crcs))
        watchdog.beat("sending the manifest to the other ranks")
    manifest = comm.bcast(manifest)
    start = time.perf_counter()
    mine = np.asarray(missing[world.rank::world.size], dtype=np.int64)
    todo = FileBatch(mine, sizes[mine], dataset.num_samples_per_file)
    desc = f"generating {len(missing)} {plan.fmt.name} files"
    written = _write_all(plan, todo, manifest, world, comm, desc, show_progress, watchdog)
    watchdog.beat("waiting for the other ranks to finish writing")
    nbytes = sum(comm.allgather(int(written["size"].sum())))
    seconds = time.perf_counter() - start
    comm.barrier()
    watchdog.beat("recording the manifest" if world.is_root else
                  "waiting for rank 0 to record the manifest")
    if world.is_root:
        manifest.compact(min_files=len(plan.keys))
    manifest = comm.bcast(manifest)
    return Generated(len(missing), nbytes, seconds, dataset.num_files_train, len(damaged),
                     manifest)


def _prepare_storage(plan: Plan, missing: list[int], sizes: np.ndarray) -> None:
    """Rank 0, before anyone writes: the training folder, striping, leftovers, free space."""
    backend, config = plan.backend, plan.config
    backend.make_room(TRAIN)
    local = backend.local_path(TRAIN)
    if local is not None:
        if lustre.wants_striping(config.storage):
            lustre.set_stripe(local, config.storage)
        for stale in local.rglob(f".*{TMP_MARK}*"):  # writers killed before their commit
            stale.unlink(missing_ok=True)
    free = backend.free_bytes() if config.dataset.check_free_space else None
    if free is None:
        return
    need = space.bytes_needed(plan.fmt, config.dataset, sizes[missing], backend.block_bytes())
    if need > free:
        payload = int(sizes[missing].sum()) * config.dataset.num_samples_per_file
        raise DatasetError(
            f"the dataset needs {size_text(need)} more ({size_text(payload)} of samples plus "
            f"format overhead and block rounding) but only {size_text(free)} are free "
            f"under {backend.describe()}; free space, lower dataset.num_files_train or choose "
            "another dataset.data_folder (dataset.check_free_space=false skips this check)"
        )


def _write_all(plan: Plan, todo: FileBatch, manifest: Manifest, world: World,
               comm: Comm, desc: str, show_progress: bool, watchdog: Watchdog) -> np.ndarray:
    """Write ``todo`` with a pool of writers, journaling the files as they become durable;
    the journal records of the files written.

    Every rank takes part in the job's progress bar, with or without files to write.
    """
    log_ = Journaled(manifest.record_dtype())
    pending: dict[Future[np.ndarray], FileBatch] = {}
    pool: writers.WriterPool | None = None
    evictor = ThreadPoolExecutor(1, thread_name_prefix="evict")
    if len(todo):  # a rank may have none: more ranks than missing files
        for folder in _folders(plan, todo.indices):
            plan.backend.make_room(folder)
        pool = writers.pool_for(plan.fmt, plan.backend, todo, plan.config.dataset, world)
        # submitted before any progress thread starts: writer processes fork
        pending = {pool.executor.submit(pool.write, batch): batch
                   for batch in batch_writer.batches(todo.indices, todo.sample_bytes,
                                                     todo.num_samples, pool.workers)}
    failure: BaseException | None = None
    try:
        evictions: list[Future[None]] = []
        if pool is not None:  # journaled files are durable: their clean pages can drop
            log_.on_journal = lambda indices: evictions.append(evictor.submit(pool.evict,
                                                                              indices))
        with progress.job_bar(desc, todo.payload_bytes, show_progress,
                              world, comm) as advance, interrupts.deferred() as check:
            _wait_all(pending, log_, plan, manifest, world, advance, watchdog, check)
        watchdog.beat("evicting the files it wrote from the page cache")
        for eviction in evictions:
            eviction.result()
    except BaseException as exc:
        failure = exc
        for future in pending:
            future.cancel()
    finally:
        if pool is not None:
            pool.executor.shutdown(wait=True)
        evictor.shutdown(wait=True, cancel_futures=True)
    if failure is not None:  # the pool has shut down: keep every batch that completed
        log_.on_journal = None
        for future in pending:
            if future.done() and not future.cancelled():
                with contextlib.suppress(Exception):  # the first error is the one to say
                    _collect(future, log_)
        with contextlib.suppress(OSError, DatasetError):  # the first error is the one to say
            _journal(plan, manifest, world, log_)
        raise failure
    return log_.all()


def _folders(plan: Plan, indices: np.ndarray) -> set[str]:
    """The folders the files ``indices`` go in."""
    subfolders = plan.config.dataset.num_subfolders_train
    if subfolders:  # only the folder differs between files (``layout.relpath``)
        indices = np.unique(indices % subfolders)
    return {plan.keys[int(i)].rsplit("/", 1)[0] for i in indices[:subfolders or 1]}


class Journaled:
    """The journal records of the files written so far: those journaled and the fresh ones."""

    def __init__(self, dtype: np.dtype) -> None:
        self.done: list[np.ndarray] = []
        self.fresh: list[np.ndarray] = []
        self.unjournaled = 0  # records in ``fresh``
        self._dtype = dtype
        self.on_journal: Callable[[np.ndarray], object] | None = None  # given their indices

    def add(self, records: np.ndarray) -> None:
        """Records of files just written."""
        if records.size:
            self.fresh.append(records)
            self.unjournaled += records.size

    def pending(self) -> np.ndarray:
        """The fresh records, sorted by file index (still fresh until ``journaled``)."""
        out = np.concatenate(self.fresh) if self.fresh else np.empty(0, self._dtype)
        out = np.sort(out, order="index")
        self.fresh = [out] if out.size else []
        return out

    def journaled(self) -> None:
        """The fresh records are in the journal now."""
        self.done += self.fresh
        self.fresh, self.unjournaled = [], 0

    def all(self) -> np.ndarray:
        """Every record so far."""
        parts = self.done + self.fresh
        return np.concatenate(parts) if parts else np.empty(0, self._dtype)


def _wait_all(pending: dict[Future[np.ndarray], FileBatch], log_: Journaled, plan: Plan,
              manifest: Manifest, world: World, advance: progress.Advance,
              watchdog: Watchdog, check: Callable[[], None]) -> None:
    """Collect the writers' results as they come, advancing the bar and journaling them;
    each batch written is progress for the ``watchdog``. A noted Ctrl-C or SIGTERM is taken
    between waits (``check``), never inside a future's locking or a journal write."""
    last = time.monotonic()
    total = len(pending)
    finished: queue.SimpleQueue[Future[np.ndarray]] = queue.SimpleQueue()
    for future in pending:  # O(1) per batch done (``wait`` would scan every pending one)
        future.add_done_callback(finished.put)
    watchdog.beat("writing its first batch of files")
    while pending:
        check()
        with contextlib.suppress(queue.Empty):
            done = [finished.get(timeout=0.5)]
            while not finished.empty():
                done.append(finished.get())
            for future in done:
                batch = pending.pop(future)
                _collect(future, log_)
                advance(batch.payload_bytes)
                watchdog.beat("writing files (%d of %d batches written)", total - len(pending),
                              total)
        due = log_.unjournaled >= JOURNAL_EVERY_FILES
        if due or time.monotonic() - last > JOURNAL_EVERY_S:
            _journal(plan, manifest, world, log_)
            last = time.monotonic()
    _journal(plan, manifest, world, log_)  # before waiting for the other ranks
    watchdog.beat("waiting for the other ranks to finish writing")


def _collect(future: Future[np.ndarray], log_: Journaled) -> None:
    """Add the records of the files a writer batch wrote; a batch that failed part way has
    its complete files added before its error is raised."""
    try:
        log_.add(future.result())
    except batch_writer.PartialBatch as part:
        log_.add(part.records)
        raise part.error from None


def _journal(plan: Plan, manifest: Manifest, world: World, log_: Journaled) -> None:
    """Sync the storage, then journal the files written since: the manifest never runs ahead
    of what is durable."""
    if not log_.unjournaled:
        return
    plan.backend.sync()
    new = log_.pending()
    manifest.append(world.rank, new)
    log_.journaled()
    if log_.on_journal is not None:
        log_.on_journal(new["index"])
