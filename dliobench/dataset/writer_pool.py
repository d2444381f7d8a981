"""The pool that writes a generation's files: threads, or processes for many small files.

Large files leave the GIL free (copies, CRCs and O_DIRECT writes release it), so a thread
more than the cores keeps the device busy. Many small files are mostly Python work per
file, so on one rank they get one process per core; under MPI the ranks are the processes.
"""

from __future__ import annotations

import ctypes
import functools
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass

from dliobench.comm.world import World
from dliobench.config.schema import DatasetConfig
from dliobench.dataset import file_writer as filegen
from dliobench.dataset.layout import TRAIN, DataFile
from dliobench.formats import Format
from dliobench.storage.backend import Backend

OBJECT_STORE_THREADS = 8  # uploads in flight per rank: each mostly waits for its answer
PROCESS_MIN_FILES = 512  # fewer: worker processes' start-up (~0.3 s) outweighs their gain
EVICT_PER_TASK = 4096  # keys evicted per task of the pool
Writer = Callable[[list[DataFile]], dict[int, filegen.Written]]


@dataclass(frozen=True)
class WriterPool:
    """The executor, the function it runs on a batch of files, the one it runs on a batch
    of keys to evict, and its worker count."""

    executor: Executor
    write: Writer
    evict: Callable[[list[str]], None]
    workers: int

    def evict_all(self, keys: list[str]) -> None:
        """Drop these (durable) objects from the page cache, the workers sharing the work."""
        for future in [self.executor.submit(self.evict, keys[i:i + EVICT_PER_TASK])
                       for i in range(0, len(keys), EVICT_PER_TASK)]:
            future.result()


def pool_for(fmt: Format, backend: Backend, todo: list[DataFile], dataset: DatasetConfig,
             world: World) -> WriterPool:
    """The pool that writes ``todo`` on this rank.

    With threads, small files queue for the GIL: 20,000 files of 64 KiB took 3.7 s with 1
    thread, 5.7 s with 3, 3.0 s with 2 processes; each rank under MPI writes them with one.
    """
    cores = os.cpu_count() or 1
    fill = filegen.Fill.for_dataset(dataset)
    evict = functools.partial(backend.evict, flush=False)
    if backend.local_path(TRAIN) is None:  # an object store: requests wait on the network
        workers = min(OBJECT_STORE_THREADS, len(todo))
        threads = ThreadPoolExecutor(workers, thread_name_prefix="gen")
        return WriterPool(threads, functools.partial(_write_batch, fmt, backend, fill), evict,
                          workers)
    small = max(f.payload_bytes for f in todo) < filegen.DIRECT_MIN_BYTES
    if world.size == 1 and small and len(todo) >= PROCESS_MIN_FILES and cores > 1:
        # fork, as PyTorch's DataLoader does: "spawn" would re-run the caller's main module
        pool = ProcessPoolExecutor(cores, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_start_process,
                                   initargs=(fmt, dataset, backend, os.getpid()))
        return WriterPool(pool, _write_batch_in_process, _evict_in_process, cores)
    workers = 1 if small else _threads(todo)  # 2 ranks, 64 KiB: 2.6 s with 1 thread, 3.4 s with 3
    threads = ThreadPoolExecutor(workers, thread_name_prefix="gen")
    return WriterPool(threads, functools.partial(_write_batch, fmt, backend, fill), evict,
                      workers)


def batches(todo: list[DataFile], workers: int) -> list[list[DataFile]]:
    """Files in groups, so that small files do not cost a task each (large ones do)."""
    per = max(1, min(256, len(todo) // (8 * workers), (64 << 20) // max(todo[0].payload_bytes, 1)))
    return [todo[i:i + per] for i in range(0, len(todo), per)]


class PartialBatch(Exception):
    """A batch that failed part way: the files it wrote before ``error``, to be recorded."""

    def __init__(self, written: dict[int, filegen.Written], error: BaseException) -> None:
        super().__init__(written, error)
        self.written = written
        self.error = error


def _write_batch(fmt: Format, backend: Backend, fill: filegen.Fill,
                 files: list[DataFile]) -> dict[int, filegen.Written]:
    written: dict[int, filegen.Written] = {}
    try:
        for f in files:
            written[f.index] = filegen.write_file(fmt, backend, f"{TRAIN}/{f.relpath}", f, fill)
    except Exception as exc:
        raise PartialBatch(written, exc) from None
    return written


_process_job: tuple[Format, Backend, filegen.Fill] | None = None


def _start_process(fmt: Format, dataset: DatasetConfig, backend: Backend, parent: int) -> None:
    """Set up a writer process: it dies with its parent, leaves Ctrl-C to it (the parent
    cancels what is queued and waits for the batches under way), builds its own base buffer."""
    global _process_job
    die_with_parent()
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fill = filegen.Fill.for_dataset(dataset)
    _process_job = (fmt, backend, fill)


def _write_batch_in_process(files: list[DataFile]) -> dict[int, filegen.Written]:
    assert _process_job is not None, "writer process not started"
    fmt, backend, fill = _process_job
    return _write_batch(fmt, backend, fill, files)


def _evict_in_process(keys: list[str]) -> None:
    assert _process_job is not None, "writer process not started"
    _process_job[1].evict(keys, flush=False)


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (a killed generate leaves no
    writers behind to race the resumed one); a no-op elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _threads(todo: list[DataFile]) -> int:
    """Threads to write with: one more than the cores, unless their buffers crowd memory.

    Each thread alternates filling its buffer (CPU) and waiting for its write (device); the
    extra thread keeps the device busy while the others fill (2 cores, 146.6 MB npz files:
    1.41-1.47 GB/s with 3 threads, 1.15-1.34 with 2, 1.31-1.40 with 4).
    """
    largest = max(f.payload_bytes for f in todo)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min((os.cpu_count() or 1) + 1, 8, len(todo), memory // 4 // max(largest, 1)))
