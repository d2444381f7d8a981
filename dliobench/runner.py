"""The training loop: epochs -> steps -> wait for a batch, compute; timed on each rank."""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dliobench import progress, storage
from dliobench.checkpoint import Checkpointer, CheckpointEvent
from dliobench.compute import Accelerator
from dliobench.config_schema import Config
from dliobench.errors import ConfigError
from dliobench.formats import format_for
from dliobench.layout import DataFile, train_dir
from dliobench.loaders import make_loader
from dliobench.sharding import (
    ShardSpec,
    batches,
    delivered_exactly_once,
    rank_sample_count,
    rank_samples,
)
from dliobench.timeline import Timeline
from dliobench.world import Comm, World

log = logging.getLogger(__name__)


@dataclass
class EpochCheck:
    """Did the epoch deliver the rank's planned samples, each at most once, none foreign?

    ``undelivered`` samples of the rank's shard were left out on purpose: the last partial
    batch (``reader.drop_last``), steps evened out across ranks, or total_training_steps.
    """

    epoch: int
    planned: int
    delivered: int
    undelivered: int
    complete: bool
    exactly_once: bool


@dataclass
class RankTrace:
    """Everything one rank measured, to be gathered by rank 0."""

    rank: int
    host: str
    timeline: Timeline
    checks: list[EpochCheck] = field(default_factory=list)
    checkpoints: list[CheckpointEvent] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    error: str | None = None


def shard_spec(config: Config, world: World, seed: int) -> ShardSpec:
    """The sharding of this rank under this configuration."""
    r = config.reader
    return ShardSpec(num_files=config.dataset.num_files_train,
                     samples_per_file=config.dataset.num_samples_per_file,
                     rank=world.rank, size=world.size, sharding=r.sharding,
                     file_shuffle=r.file_shuffle != "off", sample_shuffle=r.sample_shuffle != "off",
                     seed=seed, seed_change_epoch=config.train.seed_change_epoch)


def shuffle_seed(config: Config, comm: Comm) -> int:
    """train.seed, or with a 'random' shuffle a fresh seed chosen by rank 0 for all ranks."""
    if "random" in (config.reader.file_shuffle, config.reader.sample_shuffle):
        return int(comm.bcast(secrets.randbits(31)))
    return config.train.seed


def check_run(config: Config, world: World) -> None:
    """Refuse layouts and sizes that cannot run as configured on this many ranks."""
    max_per_file = getattr(format_for(config.dataset), "max_samples_per_file", None)
    if max_per_file is not None and config.dataset.num_samples_per_file > max_per_file:
        raise ConfigError(f"dataset.num_samples_per_file: {config.dataset.format} files hold at "
                          f"most {max_per_file} sample(s); use npz, npy, hdf5, tfrecord or "
                          "indexed_binary for many samples per file")
    if config.reader.sharding == "file" and config.dataset.num_files_train < world.size:
        raise ConfigError(
            f"reader.sharding=file needs at least one file per rank ({world.size} ranks, "
            f"{config.dataset.num_files_train} files); use reader.sharding=sample"
            + (" (reader.file_access=shared means all ranks read one file)"
               if config.reader.file_access == "shared" else "")
        )
    per_rank = config.total_samples // world.size
    if config.reader.batch_size > per_rank and config.reader.drop_last:
        raise ConfigError(
            f"reader.batch_size={config.reader.batch_size} is larger than the {per_rank} samples "
            f"each of {world.size} rank(s) gets per epoch; lower it or raise "
            "dataset.num_files_train"
        )


def evict_dataset(config: Config, world: World, files: list[DataFile]) -> None:
    """Drop the dataset's cached pages; one rank per node does it (others wait at a barrier)."""
    if world.local_rank != 0:
        return
    fmt = format_for(config.dataset)
    root = train_dir(config.dataset)
    storage.evict([p for f in files for p in (root / f.relpath, *fmt.side_files(root / f.relpath))])


def planned_steps(config: Config, spec: ShardSpec) -> list[int]:
    """Steps of each epoch; every rank takes the same number (the fewest any rank has), so
    collectives per step line up; total_training_steps may cut the last epoch short."""
    batch = config.reader.batch_size
    fewest = min(rank_sample_count(replace(spec, rank=r)) for r in range(spec.size))
    per_epoch = fewest // batch if config.reader.drop_last else -(-fewest // batch)
    cap = config.train.total_training_steps
    if cap <= 0:
        return [per_epoch] * config.train.epochs
    full, rest = divmod(cap, per_epoch)
    return [per_epoch] * full + ([rest] if rest else [])


def allreduce_buffer(config: Config, world: World) -> np.ndarray | None:
    """The gradient buffer summed over ranks after each step (None: no allreduce)."""
    size = config.train.allreduce_bytes
    if size < 0:
        size = config.model.model_size_bytes
    if size <= 0 or world.size == 1:
        return None
    return np.zeros(max(1, size // 4), dtype=np.float32)


@dataclass
class _Step:
    """What every step of a rank's run needs."""

    config: Config
    spec: ShardSpec
    loader: Any
    accel: Accelerator
    comm: Comm
    gradients: np.ndarray | None
    checkpointer: Checkpointer
    timeline: Timeline
    t0: float
    advance: Any
    global_step: int = 0


def train(config: Config, world: World, comm: Comm, files: list[DataFile], sizes: list[int],
          show_progress: bool, run_id: str = "run", seed: int | None = None) -> RankTrace:
    """Run the emulated training on this rank and return its trace.

    An exception inside the loop is recorded in the trace (with the steps done so far) and
    re-raised after the loader is closed, so the caller can write a partial result.
    """
    spec = shard_spec(config, world, shuffle_seed(config, comm) if seed is None else seed)
    steps = planned_steps(config, spec)
    accel = Accelerator(config.train.computation_time, config.train.computation_time_stdev,
                        seed=config.train.seed + world.rank)
    trace = RankTrace(world.rank, world.host, Timeline(world.rank))
    gradients = allreduce_buffer(config, world)
    checkpointer = Checkpointer(config, world, comm, run_id)
    trace.checkpoints = checkpointer.events
    loader = make_loader(config, files, sizes, spec)
    try:
        comm.barrier()
        t0 = time.perf_counter()
        with progress.bar(f"training {config.name}", sum(steps),
                          show_progress and world.is_root) as advance:
            ctx = _Step(config, spec, loader, accel, comm, gradients, checkpointer,
                        trace.timeline, t0, advance)
            for epoch, n_steps in enumerate(steps):
                if config.storage.drop_cache:
                    evict_dataset(config, world, files)
                comm.barrier()
                trace.checks.append(_epoch(ctx, epoch, n_steps))
    except BaseException as exc:
        trace.error = str(exc) or type(exc).__name__
        exc.dliobench_trace = trace  # type: ignore[attr-defined]  # for a partial result
        raise
    finally:
        loader.close()
        trace.deviations = list(getattr(loader, "deviations", []))
    return trace


def _epoch(ctx: _Step, epoch: int, n_steps: int) -> EpochCheck:
    """One epoch: wait for each batch, compute, allreduce; record each step; check delivery."""
    ids = rank_samples(ctx.spec, epoch)
    plan = batches(ids, ctx.config.reader.batch_size, ctx.config.reader.drop_last)
    delivered: list[np.ndarray] = []
    clock = time.perf_counter
    batches_iter = ctx.loader.epoch(ids)
    try:
        for step in range(n_steps):
            start = clock()
            batch = next(batches_iter)
            got = clock()
            compute = ctx.accel.compute()
            comm = 0.0
            if ctx.gradients is not None:
                before = clock()
                ctx.comm.allreduce_buffer(ctx.gradients)
                comm = clock() - before
            ckpt = 0.0
            if ctx.checkpointer.due(epoch, step, step == n_steps - 1, ctx.global_step):
                ckpt = ctx.checkpointer.run(epoch, step)
            ctx.global_step += 1
            ctx.timeline.record(epoch, step, start - ctx.t0, got - start, compute,
                                batch.samples, batch.nbytes, comm=comm, ckpt=ckpt)
            delivered.append(batch.ids)
            ctx.advance(1)
    finally:
        batches_iter.close()
    out = np.concatenate(delivered) if delivered else np.empty(0, dtype=np.int64)
    expected = sum(b.size for b in plan[:n_steps])
    return EpochCheck(epoch, int(ids.size), int(out.size), int(ids.size - out.size),
                      complete=n_steps == len(plan),
                      exactly_once=delivered_exactly_once(ids, out, expected))
