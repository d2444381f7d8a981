"""The checkpoint-only workflow on one rank: write N checkpoints, evict, read M back.

MLPerf Storage (v2.0+) measures checkpointing on its own, as DLIO's checkpoint-only workflow
does (``workflow.train: false``, ``workflow.checkpoint: true``): every rank writes its shard
of each checkpoint (``checkpoint.num_checkpoints_write``, fsynced), then the checkpoints are
read (``num_checkpoints_read``). Every checkpoint starts at a barrier and each rank times its
own files; before each read the files are dropped from this client's page cache
(``checkpoint.evict_before_read``), so reads reach the storage.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from dliobench.base.errors import ConfigError
from dliobench.comm.watchdog import Watchdog
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.results import sysinfo
from dliobench.results.measured import CheckpointOp
from dliobench.run.checkpoint import files as shards
from dliobench.run.checkpoint import space
from dliobench.run.checkpoint.layout import Layout, ShardFile, layout_for
from dliobench.storage import backend_for
from dliobench.storage.backend import Backend, drop_leftovers

MEMORY_SHARE = 0.8  # of host memory the ranks' torch tensors may take
SHRINK = "checkpoint.scale, checkpoint.num_checkpoints_write"  # a full disk's advice


def layout_ranks(layout: Layout, config: Config, world: World) -> list[int]:
    """The layout ranks this process writes: its own in subset mode (the first ranks of the
    layout, as one host of the full job), else every ``world.size``-th from its rank."""
    if world.size > layout.world:
        raise ConfigError(f"{world.size} ranks launched but the checkpoint layout has "
                          f"{layout.world} (TP {layout.tp} x PP {layout.pp} x DP {layout.dp}); "
                          "launch at most that many or raise model.parallelism.data")
    if config.checkpoint.mode == "subset":
        return [world.rank]
    if layout.world % world.size:
        raise ConfigError(f"the checkpoint layout's {layout.world} ranks do not divide evenly "
                          f"over {world.size} launched ranks; launch a divisor of "
                          f"{layout.world}, or use checkpoint.mode=subset")
    return list(range(world.rank, layout.world, world.size))


def planned_layout(config: Config, world: World) -> tuple[Layout, list[int]]:
    """The layout and the layout ranks of this process, refusing what cannot run."""
    layout = layout_for(config, world.size)
    return layout, layout_ranks(layout, config, world)


def precheck(config: Config, world: World) -> None:
    """Refuse, before any work, a layout the launched ranks cannot run and torch state that
    would not fit in this host's memory (each rank holds its shard, as a training job does)."""
    layout, mine = planned_layout(config, world)
    if shards.file_format(config) != "torch":
        return
    held = sum(f.nbytes for r in mine for f in layout.rank_files(r)) * world.local_size
    memory = sysinfo.host_memory_bytes()
    if memory and held > MEMORY_SHARE * memory:
        raise ConfigError(f"the ranks of this host would hold {held / 1e9:,.1f} GB of "
                          f"checkpoint tensors in memory ({memory / 1e9:,.1f} GB here); scale "
                          "the checkpoint down (checkpoint.scale=0.01), launch fewer ranks per "
                          "host, or write raw bytes (checkpoint.file_format=raw)")


@dataclass
class CheckpointRun:
    """What one rank did: its operations and whether its reads were made honest."""

    ops: list[CheckpointOp]
    evicted: bool = False
    file_format: str = ""
    files_per_checkpoint: int = 0


class _Rank:
    """One rank's files and how to write and read them."""

    def __init__(self, config: Config, world: World, files: list[ShardFile]) -> None:
        self.config, self.world, self.files = config, world, files
        self.backend: Backend = backend_for(config.checkpoint.checkpoint_folder, config.storage,
                                            "checkpoint.checkpoint_folder")
        self.fmt = shards.file_format(config)
        self.writer = shards.ShardWriter(files, self.fmt, config.train.seed + world.rank)
        self.buffer = memoryview(bytearray(shards.READ_BYTES))

    def folder(self, index: int) -> str:
        return f"{self.config.name}/checkpoint-{index:04d}"

    def keys(self, index: int) -> list[str]:
        return [f"{self.folder(index)}/{f.name}" for f in self.files]

    def write(self, index: int, watchdog: Watchdog) -> CheckpointOp:
        room = space.Room.measure(self.backend, index, sum(f.nbytes for f in self.files),
                                       SHRINK)  # a statvfs, before the timed writes
        with space.mapped(self.backend, self.folder(index), room):
            self.backend.make_room(self.folder(index))
        durable = self.config.checkpoint.fsync
        start = time.perf_counter()
        nbytes = 0
        for key, shard in zip(self.keys(index), self.files, strict=True):
            watchdog.beat("writing checkpoint file %s", key)  # a slow file is progress too
            nbytes += self.writer.write(self.backend, key, shard, durable, room)
        return CheckpointOp("write", index, nbytes, time.perf_counter() - start, len(self.files))

    def read(self, number: int, index: int, watchdog: Watchdog) -> CheckpointOp:
        start = time.perf_counter()
        nbytes = 0
        for key in self.keys(index):
            watchdog.beat("reading checkpoint file %s", key)
            nbytes += shards.read(self.backend, key, self.buffer)
        return CheckpointOp("read", number, nbytes, time.perf_counter() - start, len(self.files))

    def remove(self, indices: range) -> None:
        for index in indices:
            for key in self.keys(index):
                self.backend.delete(key)


def run_checkpoints(config: Config, world: World, comm: Comm, watchdog: Watchdog,
                    done: CheckpointRun) -> None:
    """Write then read checkpoints on this rank, recording into ``done`` as it goes (so a
    failed run keeps what was measured)."""
    cfg = config.checkpoint
    layout, mine = planned_layout(config, world)
    rank = _Rank(config, world, [f for r in mine for f in layout.rank_files(r)])
    writes, reads = max(0, cfg.num_checkpoints_write), max(0, cfg.num_checkpoints_read)
    done.file_format, done.files_per_checkpoint = rank.fmt, len(rank.files)
    ops = done.ops
    if world.rank == 0 and writes:  # before the first write's barrier; a run writing the
        # same folder at the same time would clash on every key anyway
        drop_leftovers(rank.backend, config.name, "an earlier run")
    try:
        for index in range(writes):
            _pause(cfg.time_between_checkpoints, index)
            watchdog.beat(f"waiting for the other ranks to write checkpoint {index}")
            comm.barrier()
            ops.append(rank.write(index, watchdog))
        for number in range(reads):
            _pause(cfg.time_between_checkpoints, writes + number)
            index = number % writes if writes else number
            if cfg.evict_before_read or config.storage.drop_cache:
                rank.backend.evict(rank.keys(index), flush=not cfg.fsync)
                done.evicted = True
            watchdog.beat(f"waiting for the other ranks to read checkpoint {index}")
            comm.barrier()
            ops.append(rank.read(number, index, watchdog))
    except BaseException:
        _drop_after_failure(rank, ops, writes)
        raise
    if not cfg.keep:
        measured = writes or reads  # a read-only run (a split set's read phase) removes
        rank.remove(range(measured))  # the checkpoints it read, as a combined run does
        comm.barrier()
        if world.local_rank == 0:
            _remove_folders(rank, measured)


def _drop_after_failure(rank: _Rank, ops: list[CheckpointOp], writes: int) -> None:
    """A failed run's checkpoints, best effort and without waiting for the other ranks: all
    of them unless ``checkpoint.keep``, and always the one this rank was writing (a full disk
    part way through), so no checkpoint is left looking whole with files missing."""
    written = sum(op.op == "write" for op in ops)
    rank.remove(range(written, min(written + 1, writes)) if rank.config.checkpoint.keep
                else range(writes))
    _remove_folders(rank, writes)


def _pause(seconds: float, done: int) -> None:
    """``checkpoint.time_between_checkpoints`` between checkpoints (not before the first)."""
    if done and seconds:
        time.sleep(seconds)


def _remove_folders(rank: _Rank, writes: int) -> None:
    """Remove the checkpoint folders that are empty."""
    for index in range(writes):
        local = rank.backend.local_path(rank.folder(index))
        if local is not None:
            with contextlib.suppress(OSError):
                local.rmdir()
    local = rank.backend.local_path(rank.config.name)
    if local is not None:
        with contextlib.suppress(OSError):
            local.rmdir()
