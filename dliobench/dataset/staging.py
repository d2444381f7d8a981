"""Stage the dataset to node-local storage before training, as HPC jobs do (storage.stage_to).

Scope ``shard``: each rank copies the files it will read; ``node``: a node's ranks copy,
together, the files any of them will read; ``all``: every node gets the whole dataset.
The source's cached pages are dropped first and the copies are fsynced and evicted, so staging
reads the storage under test and training then reads the local device; the staging time and
GB/s are reported beside the training figures.
"""

from __future__ import annotations

import queue
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dliobench.base import interrupts
from dliobench.base.errors import DatasetError
from dliobench.comm.world import Comm, World
from dliobench.dataset.plan import Plan
from dliobench.dataset.sharding import rank_samples
from dliobench.storage import backend_for
from dliobench.storage.backend import Backend

COPY_CHUNK = 64 << 20
WAIT_S = 0.2  # longest a Ctrl-C or SIGTERM waits to be taken


@dataclass(frozen=True)
class Staged:
    """Where the staged copy is and what staging it cost (this rank's part); ``plan`` reads
    the copy."""

    plan: Plan
    folder: Path
    files: int
    nbytes: int
    seconds: float


def files_read_by(plan: Plan, ranks: list[int]) -> set[int]:
    """Indices of the files the given ranks read over the whole run."""
    out: set[int] = set()
    spf = plan.config.dataset.num_samples_per_file
    for rank in ranks:
        spec = replace(plan.spec, rank=rank)
        for epoch in range(len(plan.steps)):
            out.update(int(i) // spf for i in rank_samples(spec, epoch))
    return out


def _node_ranks(world: World, comm: Comm) -> list[int]:
    hosts = comm.allgather(world.host)
    return [r for r, h in enumerate(hosts) if h == world.host]


class _Stopped(Exception):
    """The staging was given up (an interrupt or another copy's error): stop copying."""


def _copy(src: Backend, dst: Backend, key: str, stop: threading.Event) -> int:
    """Stream one object from ``src`` to ``dst`` (durable, then evicted); its bytes. A copy
    under way when ``stop`` is set ends at its next chunk, leaving nothing behind."""
    dst.make_room(key.rsplit("/", 1)[0])
    writer = dst.open_write(key)
    offset = 0
    try:
        while True:
            if stop.is_set():
                raise _Stopped
            data, _ = src.read_range(key, offset, COPY_CHUNK)
            if not len(data):
                break
            writer.write(data)
            offset += len(data)
        writer.commit(durable=True)
    except BaseException as exc:
        writer.abort()
        if isinstance(exc, OSError):
            raise DatasetError(f"cannot stage {src.describe(key)} to {dst.describe(key)}: "
                               f"{exc.strerror}; free space under storage.stage_to or choose "
                               "another folder") from None
        raise
    dst.evict([key], flush=False)
    return offset


def stage(plan: Plan, world: World, comm: Comm, run_id: str) -> Staged:
    """Copy what this node needs to ``storage.stage_to/<run_id>``; all ranks wait for it."""
    config = plan.config
    scope = config.storage.stage_scope
    node = _node_ranks(world, comm)
    if scope == "all":
        needed = set(range(len(plan.keys)))
    else:
        needed = files_read_by(plan, [world.rank] if scope == "shard" else node)
    mine = sorted(needed) if scope == "shard" else sorted(needed)[node.index(world.rank)::len(node)]
    folder = Path(config.storage.stage_to) / run_id
    src, dst = plan.backend, backend_for(str(folder))
    keys = [k for i in mine for k in plan.object_keys(i)]
    if world.local_rank == 0:  # the copy must read storage, not this node's page cache
        src.evict(keys, flush=False)
    comm.barrier()
    start = time.perf_counter()
    nbytes = _copy_all(src, dst, keys, config.reader.read_threads, folder, world)
    seconds = time.perf_counter() - start
    comm.barrier()
    return Staged(plan.reading_from(dst), folder, len(mine), nbytes, seconds)


def _copy_all(src: Backend, dst: Backend, keys: list[str], threads: int, folder: Path,
              world: World) -> int:
    """Copy ``keys`` with ``threads`` threads; the bytes copied. A Ctrl-C or SIGTERM is taken
    between waits (``interrupts.deferred``), never inside the pool's own locking; on it or
    on a failed copy the copies under way stop and the staged folder is removed (a partial
    copy is of no use)."""
    stop = threading.Event()
    pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="stage")
    try:
        with interrupts.deferred() as check:
            finished: queue.SimpleQueue[Future[int]] = queue.SimpleQueue()
            for key in keys:  # O(1) per copy done (``wait`` would scan every pending one)
                pool.submit(_copy, src, dst, key, stop).add_done_callback(finished.put)
            nbytes = sum(_next_done(finished, check).result() for _ in keys)  # failures raise
    except BaseException:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        if world.local_rank == 0:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    pool.shutdown()
    return nbytes


def _next_done(finished: queue.SimpleQueue[Future[int]], check: Callable[[], None]) -> Future[int]:
    """The next copy to finish, taking a noted interrupt (``check``) every ``WAIT_S``."""
    while True:
        check()
        try:
            return finished.get(timeout=WAIT_S)
        except queue.Empty:
            continue


def summary(parts: list[Staged]) -> dict[str, Any]:
    """Staging figures of the run: bytes over all ranks, time of the slowest."""
    seconds = max(p.seconds for p in parts)
    nbytes = sum(p.nbytes for p in parts)
    return {"path": str(parts[0].folder), "files": sum(p.files for p in parts),
            "bytes": nbytes, "seconds": seconds,
            "bytes_per_s": nbytes / seconds if seconds > 0 else None}


def remove(staged: Staged, world: World, comm: Comm) -> None:
    """Delete the staged copy once every rank is done with it (one rank per node)."""
    comm.barrier()
    if world.local_rank == 0:
        shutil.rmtree(staged.folder, ignore_errors=True)
