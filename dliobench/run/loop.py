"""The training loop: epochs -> steps -> wait for a batch, compute; timed on each rank."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dliobench.storage.latency as latency
from dliobench.base import interrupts
from dliobench.base.errors import Terminated
from dliobench.comm.watchdog import Watchdog
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset.plan import Plan
from dliobench.dataset.sharding import ShardSpec, batches, delivered_exactly_once, rank_samples
from dliobench.loaders import make_loader
from dliobench.loaders.base import Loader
from dliobench.results import live
from dliobench.results.hostcpu import CpuMeter
from dliobench.results.journal import Journal, journal_path
from dliobench.results.lost import lost
from dliobench.results.measured import EpochCheck, RankTrace
from dliobench.results.metrics import window
from dliobench.results.nodes import machine_id
from dliobench.results.recover import RECOVER_HINT, held, recover
from dliobench.results.sysinfo import host_memory_bytes
from dliobench.results.timeline import Timeline
from dliobench.run.accelerator import Accelerator
from dliobench.run.checkpoint.checkpointer import Checkpointer
from dliobench.run.gradients import GradientSync
from dliobench.storage.devreads import DeviceMeter
from dliobench.storage.latency import LatencyLog

log = logging.getLogger(__name__)


class TrainingFailed(Exception):
    """Training ended early; ``trace`` holds what this rank measured until then, ``cause``
    the exception that ended it (re-raised by the caller once the partial result is out)."""

    def __init__(self, trace: RankTrace, cause: BaseException) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.trace = trace
        self.cause = cause


def evict_dataset(plan: Plan, world: World) -> None:
    """Drop the dataset's cached pages; one rank per node does it (others wait at a barrier)."""
    if world.local_rank != 0:
        return
    plan.backend.evict([k for i in range(len(plan.keys)) for k in plan.object_keys(i)])


@dataclass
class _Step:
    """What every step of a rank's run needs."""

    config: Config
    spec: ShardSpec
    loader: Loader
    accel: Accelerator
    comm: Comm
    gradients: GradientSync
    checkpointer: Checkpointer
    watchdog: Watchdog
    timeline: Timeline
    t0: float
    meter: DeviceMeter
    cpu: CpuMeter
    global_step: int = 0


def train(plan: Plan, world: World, comm: Comm, show_progress: bool,
          run_id: str = "run", run_dir: Path | None = None) -> RankTrace:
    """Run the emulated training on this rank and return its trace.

    An exception inside the loop is recorded in the trace (with the steps done so far) and
    raised as ``TrainingFailed`` after the loader is closed, so the caller can write a
    partial result. With ``run_dir``, the rank journals what it measures there as it goes
    (``results.journal``), and a stalled job assembles its partial result from the journals
    before it ends (``results.recover``).
    """
    config = plan.config
    accel = Accelerator(config.train.computation_time, config.train.computation_time_stdev,
                        seed=config.train.seed + world.rank)
    trace = RankTrace(world.rank, world.host, Timeline(world.rank), machine_id=machine_id(),
                      memory_bytes=host_memory_bytes())
    gradients = GradientSync(config, world, comm)
    checkpointer = Checkpointer(config, world, comm, run_id)
    trace.checkpoints = checkpointer.events
    loader = make_loader(plan)
    meter, cpu = DeviceMeter(config.dataset.data_folder), CpuMeter()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    watchdog = Watchdog(config.train.stall_timeout_s, world, comm)
    journal: Journal | None = None
    figures, how = _Figures(trace, meter, cpu, loader, world, cpu0, t0), "complete"
    try:
        watchdog.beat("waiting for the other ranks to start training")
        comm.barrier()  # rank 0 has made the run folder
        journal = _open_journal(run_dir, trace, watchdog)
        latency.take()  # the reads of training only (not the dataset's preparation)
        t0 = time.perf_counter()
        figures.t0 = t0
        after_epoch = figures.journal_to(journal)
        with _live(plan, world, comm, trace, show_progress) as wake:
            ctx = _Step(config, plan.spec, loader, accel, comm, gradients, checkpointer,
                        watchdog, trace.timeline, t0, meter, cpu)
            _epochs(plan, world, ctx, trace, lambda: (after_epoch(), wake()))
        checkpointer.finish()
    except BaseException as exc:
        interrupts.ending()  # a launcher's SIGTERM must not cut the partial result short
        trace.error, how = str(exc) or type(exc).__name__, _how(exc)
        checkpointer.discard()
        raise TrainingFailed(trace, exc) from exc
    finally:
        watchdog.stop()
        gradients.close()
        _close(loader, bounded=trace.error is not None)  # workers end: their CPU time counts
        if journal is None:
            figures.take()
        else:
            figures.journal(journal)
            journal.close(how, trace.error)
    return trace


def _live(plan: Plan, world: World, comm: Comm, trace: RankTrace,
          shown: bool) -> contextlib.AbstractContextManager[Callable[[], None]]:
    """The job's live figures on rank 0 (``results.live``: a thread reads the timeline, the
    steps pay nothing); what to call after each epoch."""
    m, config = plan.config.metric, plan.config
    ranks = f" on {world.size} ranks" if world.size > 1 else ""
    return live.watch(trace.timeline.rows, plan.steps,
                      (m.exclude_start_steps, m.exclude_end_steps), world, comm, shown,
                      f"training {config.name}{ranks}", config.train.computation_time > 0)


def _epochs(plan: Plan, world: World, ctx: _Step, trace: RankTrace,
            after_epoch: Callable[[], object]) -> None:
    """Every epoch of the run, each begun together (a barrier), its check kept."""
    for epoch, n_steps in enumerate(plan.steps):
        if ctx.config.storage.drop_cache:
            evict_dataset(plan, world)
        ctx.watchdog.beat(f"waiting for the other ranks to start epoch {epoch}")
        ctx.comm.barrier()
        trace.checks.append(_epoch(ctx, epoch, n_steps))
        after_epoch()


def _how(exc: BaseException) -> str:
    """How a rank's training ended early, in one word (its journal's end record)."""
    from dliobench.comm.torch import lost_a_peer  # (a test of the message: no torch import)

    if isinstance(exc, Terminated):
        return "terminated"
    if lost_a_peer(exc):
        return "lost a peer"
    return "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"


@dataclass
class _Figures:
    """A rank's figures beside its steps (CPU, requests, device reads, the host's CPUs,
    deviations), taken into its trace at the end and journaled after each epoch."""

    trace: RankTrace
    meter: DeviceMeter
    cpu: CpuMeter
    loader: Loader
    world: World
    cpu0: float = 0.0
    t0: float = 0.0

    def take(self) -> LatencyLog | None:
        """Bring the trace's figures up to now; the object-store requests since the last
        time."""
        trace = self.trace
        trace.deviations = list(self.loader.deviations)
        trace.cpu_s, trace.cpu_wall_s = cpu_seconds() - self.cpu0, time.perf_counter() - self.t0
        trace.cpu_cores = len(os.sched_getaffinity(0)) / max(1, self.world.local_size)
        requests = latency.take()
        if requests is not None:
            if trace.requests is None:
                trace.requests = requests
            else:
                trace.requests.merge(requests)
        rows, t0 = trace.timeline.rows, self.t0
        trace.device_reads = self.meter.result(
            lambda: ((t0 + r[2], t0 + r[2] + r[3]) for r in rows))  # each step's wait
        trace.host_cpu = self.cpu.result()
        return requests

    def journal_to(self, journal: Journal | None) -> Callable[[], None]:
        """What to do after each epoch: journal the figures (nothing without a journal)."""
        return (lambda: self.journal(journal)) if journal is not None else (lambda: None)

    def journal(self, journal: Journal) -> None:
        """Take the figures and journal them (requests: those since the last time)."""
        fresh, t = self.take(), self.trace
        journal.progress((t.cpu_s, t.cpu_wall_s, t.cpu_cores), fresh, t.device_reads,
                         t.deviations, t.host_cpu)


def _open_journal(run_dir: Path | None, trace: RankTrace, watchdog: Watchdog) -> Journal | None:
    """This rank's journal in ``run_dir`` (None: not journaled, or it cannot be: said once),
    and the watchdog's rescue of a stalled job."""
    if run_dir is None:
        return None
    try:
        journal = Journal(journal_path(run_dir, trace.rank), trace)
    except OSError as exc:
        log.warning("the measurements cannot be journaled in %s (%s); the run goes on, and "
                    "its result is written at its end", run_dir, exc.strerror or exc)
        return None
    watchdog.on_stall = lambda why: _stalled(journal, run_dir, why)
    watchdog.lost = lambda: _lost(run_dir)
    return journal


def _lost(run_dir: Path) -> tuple[str, int] | None:
    """Who went silent in this run (a node whose ranks all died), and which survivor
    speaks for the job (``results.lost``)."""
    found = lost(run_dir)
    return None if found is None else (found.words, found.speaker)


def _stalled(journal: Journal, run_dir: Path, why: str) -> None:
    """The watchdog ends a stalled job: journal this rank's end, then assemble the run's
    partial result from every rank's journal (the job is about to be aborted)."""
    journal.close("stalled", why)
    try:
        where, result = recover(run_dir)
    except Exception as exc:  # the rescue of a dying job: say why, and how to do it later
        log.warning("the partial result could not be assembled (%s); %s", exc,
                    RECOVER_HINT.format(run_dir))
        return
    log.warning("what %s measured is in %s (status: %s)", held(result), where,
                result["status"])


LOADER_CLOSE_S = 20.0  # after a failure or an interruption, the loader's clean-up at most


def _close(loader: Loader, bounded: bool) -> None:
    """Close the loader; after a failure or Ctrl-C only for ``LOADER_CLOSE_S``: a library
    that hangs in its clean-up (DALI once did after Ctrl-C) must not keep the measurements
    from the user. Its workers still die with this process."""
    if not bounded:
        loader.close()
        return
    closing = threading.Thread(target=loader.close, name="loader-close", daemon=True)
    closing.start()
    closing.join(LOADER_CLOSE_S)
    if closing.is_alive():
        log.warning("the loader did not finish closing within %.0f s; leaving it to end "
                    "with the run", LOADER_CLOSE_S)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its ended children (loader workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _epoch(ctx: _Step, epoch: int, n_steps: int) -> EpochCheck:
    """One epoch: wait for each batch, compute, allreduce; record each step; check delivery.

    The device-read meter runs from the epoch's first read to the end of its counted steps,
    opened and closed between steps (never inside one): batches the loader read ahead before
    the counted window opened count where they came from. The host's CPUs are metered over
    the counted steps alone (``results.hostcpu``)."""
    ids = rank_samples(ctx.spec, epoch)
    plan = batches(ids, ctx.config.reader.batch_size, ctx.config.reader.drop_last)
    delivered: list[np.ndarray] = []
    m = ctx.config.metric
    counted = window(n_steps, m.exclude_start_steps, m.exclude_end_steps)
    ctx.meter.open()
    batches_iter = ctx.loader.epoch(ids)
    try:
        _steps(ctx, epoch, n_steps, range(counted.start), batches_iter, delivered)
        ctx.cpu.open()
        _steps(ctx, epoch, n_steps, range(counted.start, counted.stop), batches_iter, delivered)
        ctx.meter.close()
        ctx.cpu.close()
        _steps(ctx, epoch, n_steps, range(counted.stop, n_steps), batches_iter, delivered)
    finally:
        ctx.meter.close()
        ctx.cpu.close()
        batches_iter.close()
    out = np.concatenate(delivered) if delivered else np.empty(0, dtype=np.int64)
    expected = sum(b.size for b in plan[:n_steps])
    return EpochCheck(epoch, int(ids.size), int(out.size), int(ids.size - out.size),
                      complete=n_steps == len(plan),
                      exactly_once=delivered_exactly_once(ids, out, expected))


def _steps(ctx: _Step, epoch: int, n_steps: int, steps: range, batches_iter: Any,
           delivered: list[np.ndarray]) -> None:
    """The steps ``steps`` of an epoch of ``n_steps``: wait for each batch, compute,
    allreduce, checkpoint when due; record each step."""
    clock = time.perf_counter
    for step in steps:
        start = clock()
        ctx.watchdog.beat("reading the batch of step %d of epoch %d", step, epoch)
        batch = next(batches_iter)
        got = clock()
        samples, nbytes = batch.samples, batch.nbytes
        delivered.append(batch.ids)
        # the accelerator takes the batch: like ``.to(device)`` in training, the host
        # copy is released before compute (hold what training holds, not more)
        del batch
        ctx.gradients.start()
        compute = ctx.accel.compute()
        comm = ctx.gradients.finish()  # only what did not overlap compute
        ckpt = 0.0
        if ctx.checkpointer.due(epoch, step, step == n_steps - 1, ctx.global_step):
            ctx.watchdog.beat("checkpointing after step %d of epoch %d", step, epoch)
            ckpt = ctx.checkpointer.run(epoch, step)
        ctx.global_step += 1
        ctx.timeline.record(epoch, step, start - ctx.t0, got - start, compute,
                            samples, nbytes, comm=comm, ckpt=ckpt)
