"""One benchmark run end to end: dataset, training, result files. Called by the CLI."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError, Terminated
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset import prepare as dataset_mod
from dliobench.dataset import staging
from dliobench.dataset.lock import locked
from dliobench.results.assemble import build_result
from dliobench.results.files import (
    RESULT_NAME,
    open_run_folder,
    write_leaf_outputs,
    write_partial_result,
    write_result,
)
from dliobench.results.journal import FOLDER as JOURNALS
from dliobench.results.journal import drop as drop_journal
from dliobench.results.journal import ended, journal_path
from dliobench.results.measured import RankTrace
from dliobench.results.nodes import staging_by_host
from dliobench.results.recover import RECOVER_HINT, held, recover, write_header
from dliobench.results.schema import RunResult
from dliobench.results.timeline import Timeline, write_csv
from dliobench.run import ceiling
from dliobench.run.facts import run_facts
from dliobench.run.io_trace import finish, traced_plan
from dliobench.run.judge import judge_client
from dliobench.run.loop import TrainingFailed, train
from dliobench.run.metadata import metadata_phase
from dliobench.run.planning import check_run, resolve

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    """Where the run's files are and what they say (rank 0 only; None elsewhere)."""

    run_dir: Path | None
    result: RunResult | None
    problem: str | None = None  # files that could not go to output.folder, and where they went


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def run(config: Config, world: World, comm: Comm, warnings: list[str],
        show_progress: bool = True) -> RunOutcome:
    """Generate what is missing, train, and write ``<output.folder>/<run-id>/``.

    The data folder is locked for the run: shared while it is read, exclusively only while
    the run writes it (``dataset.lock``), so runs reading one dataset run at once. The
    checkpoint-only workflow is another session (``run.commands.run_benchmark`` picks it).
    """
    plan = resolve(config, world, comm)
    check_run(plan.config, world)  # an existing dataset's files decide its layout
    with locked(plan.manifest_backend, world, exclusive=False, doing="by a run",
                wait_s=config.storage.lock_wait_s) as lock:
        ready = dataset_mod.prepare(plan, world, comm, show_progress, lock)
        lock.share()
        return _train_and_report(ready, world, comm, warnings, show_progress)


def _train_and_report(ready: dataset_mod.ReadyDataset, world: World, comm: Comm,
                      warnings: list[str], show_progress: bool) -> RunOutcome:
    """The run once its dataset is ready: stage, train, write the result."""
    config = ready.plan.config
    extra: dict[str, Any] = {"warnings": warnings, "launcher": world.launcher}
    if ready.generated and ready.generated.files_written:
        g = ready.generated
        extra["generation"] = {"files": g.files_written, "bytes": g.bytes_written,
                               "mean_file_bytes": g.bytes_written / g.files_written,
                               "seconds": g.seconds,
                               "bytes_per_s": g.bytes_written / g.seconds if g.seconds else None}
    if config.workflow.metadata:
        extra.update(metadata_phase(ready.plan, world, comm))
    if not config.workflow.train:
        return RunOutcome(None, None)
    run_id, run_dir = open_run_folder(config, world, comm)
    started = _now()
    staged, facts = None, None
    try:
        staged = _stage(ready, world, comm, run_id, extra)
        reads = staged.plan if staged else ready.plan  # the result keeps the source folder
        reads = traced_plan(reads, run_dir)
        if world.is_root:
            facts = _journal_header(config, world, run_id, run_dir, started,
                                    ready.total_bytes, extra)
        trace = train(reads, world, comm, show_progress, run_id, run_dir)
        finish(reads)
    except BaseException as exc:
        if isinstance(exc, TrainingFailed):
            _end_early(config, world, run_id, run_dir, exc, started, ready.total_bytes, extra)
        elif world.is_root:  # nothing measured (staging failed, or before the first step)
            shutil.rmtree(run_dir / JOURNALS, ignore_errors=True)
            with contextlib.suppress(OSError):
                run_dir.rmdir()  # only if empty
        if staged is not None and not config.storage.keep_staged and world.local_rank == 0:
            shutil.rmtree(staged.folder, ignore_errors=True)  # no barrier: the job is failing
        if isinstance(exc, TrainingFailed):
            raise exc.cause from None
        raise
    if staged is not None and not config.storage.keep_staged:
        staging.remove(staged, world, comm)  # the source is what the result records
    traces = comm.gather(trace)
    result = None
    if world.is_root and traces is not None:
        result = build_result(config, run_id, "complete", traces, started, _now(),
                              ready.total_bytes, extra, facts or run_facts(config))
    judge_client(config, world, comm, result, _probe_runner(world, comm))
    where, problem = None, None
    if result is not None and traces is not None:
        where, problem = save(run_dir, result, [t.timeline for t in traces], config)
    if comm.bcast(where == run_dir):  # the result holds every journaled record
        _drop_journal(run_dir, world)
    return RunOutcome(where, result, problem)


def _probe_runner(world: World, comm: Comm) -> ceiling.ProbeRunner:
    """A run of the client ceiling's probe configuration on these ranks (its result)."""
    return lambda probe: run(probe, world, comm, [], show_progress=False).result


def measure_ceiling(config: Config, world: World, comm: Comm,
                    load: dict[str, float] | None = None) -> float:
    """The client ceiling of ``config``'s reading settings on this host, measured now by a
    probe run (``dliobench ceiling``; a run's verdict measures it through ``run.judge``)."""
    return ceiling.measure(config, world, comm, _probe_runner(world, comm), load)


def _drop_journal(run_dir: Path, world: World) -> None:
    """Remove this rank's journal once the run's result is committed (rank 0: the header
    too), and the folders it leaves empty (a node whose output folder is not rank 0's)."""
    drop_journal(run_dir, world.rank, world.is_root)
    with contextlib.suppress(OSError):
        run_dir.rmdir()  # only if empty


def _journal_header(config: Config, world: World, run_id: str, run_dir: Path, started: str,
                    dataset_bytes: int, extra: dict[str, Any]) -> dict[str, Any]:
    """Rank 0, before training: the run's facts, kept with the journals so that they alone
    make a result (``dliobench recover``); a job of several ranks says so, since its
    launcher may kill every rank at once (MPICH's does, with SIGKILL)."""
    facts = run_facts(config)
    try:
        write_header(run_dir, config, run_id, started, dataset_bytes, extra, facts, world.size)
    except (DlioBenchError, OSError) as exc:
        log.warning("%s; a run killed before its end cannot be recovered", exc)
        return facts
    if world.size > 1:
        log.info("the ranks journal their measurements in %s; should the job be killed, %s",
                 run_dir / JOURNALS, RECOVER_HINT.format(run_dir))
    return facts


def save(run_dir: Path, result: RunResult, timelines: list[Timeline],
         config: Config) -> tuple[Path, str | None]:
    """Commit result.json (small: first) and timeline.csv. When the output folder cannot
    take them (a full disk), both go to a folder under the system's temporary directory
    instead: (where they are, a sentence saying what was not written where)."""
    m = config.metric
    try:
        write_result(run_dir, result)
        write_csv(run_dir / "timeline.csv", timelines, m.exclude_start_steps, m.exclude_end_steps)
        write_leaf_outputs(run_dir, result, timelines)  # mlpstorage's layout: DLIO's files
        return run_dir, None
    except (DlioBenchError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        written = "result.json" if (run_dir / "result.json").exists() else "nothing"
        fallback = Path(tempfile.gettempdir()) / "dliobench-results" / run_dir.name
        fallback.mkdir(parents=True, exist_ok=True)
        write_result(fallback, result)
        write_csv(fallback / "timeline.csv", timelines, m.exclude_start_steps,
                  m.exclude_end_steps)
        return fallback, (f"could not write the run's files in {run_dir} ({reason}; {written} "
                          f"is there); result.json and timeline.csv are in {fallback}")


def _stage(ready: dataset_mod.ReadyDataset, world: World, comm: Comm, run_id: str,
           extra: dict[str, Any]) -> staging.Staged | None:
    """Copy the dataset to ``storage.stage_to`` when asked; its figures go into ``extra``."""
    config = ready.plan.config
    if not config.storage.stage_to:
        return None
    staged = staging.stage(ready.plan, world, comm, run_id)
    parts = comm.gather((world.host, staged))
    if parts:
        extra["staging"] = {"source": config.dataset.data_folder,
                            "scope": config.storage.stage_scope,
                            **staging.summary([s for _, s in parts]),
                            "nodes": staging_by_host([(h, s.files, s.nbytes, s.seconds)
                                                      for h, s in parts])}
    return staged


ENDS_WAIT_S = 2.0  # rank 0, terminated: how long the other ranks' end records may take


def _end_early(config: Config, world: World, run_id: str, run_dir: Path, exc: TrainingFailed,
               started: str, dataset_bytes: int, extra: dict[str, Any]) -> None:
    """The run ended early on this rank: assemble the partial result from every rank's
    journal (``results.recover``) and say where it is, or why there is none.

    Rank 0 does it, and any rank that failed on its own; a rank stopped by SIGTERM (which a
    batch system sends every rank) leaves it to rank 0 if rank 0 journals its end within
    ``ENDS_WAIT_S`` (rank 0 gone, killed, it does it itself), and rank 0 first waits as long
    for the other ranks' end records. Without journals (they could not be written), this
    rank's own measurements go into the partial result, as before journals.
    """
    terminated = isinstance(exc.cause, Terminated)
    if terminated and not world.is_root and _await_ends(run_dir, [0], ENDS_WAIT_S):
        return
    if terminated and world.is_root and world.size > 1:
        _await_ends(run_dir, list(range(world.size)), ENDS_WAIT_S)
    try:
        where, result = recover(run_dir)
    except (DlioBenchError, OSError) as problem:
        log.warning("the partial result could not be assembled from the journals (%s); "
                    "this rank's own measurements are kept instead", problem)
        try:
            _write_partial(config, world, run_id, run_dir, exc.trace, started, dataset_bytes,
                           extra)
        except (DlioBenchError, OSError) as again:  # the original error is the one to raise
            log.warning("no partial result could be written (%s); %s", again,
                        RECOVER_HINT.format(run_dir))
        return
    log.warning("the run ended early; what %s measured is in %s (status: %s)", held(result),
                where, result["status"])


def _await_ends(run_dir: Path, ranks: list[int], seconds: float) -> bool:
    """Wait up to ``seconds`` for the journals of ``ranks`` to hold their end records;
    whether they all do."""
    deadline = time.monotonic() + seconds
    waiting = ranks
    while True:
        waiting = [r for r in waiting if not ended(journal_path(run_dir, r))]
        if not waiting or time.monotonic() >= deadline:
            return not waiting
        time.sleep(0.05)


def _write_partial(config: Config, world: World, run_id: str, run_dir: Path,
                   trace: RankTrace, started: str, dataset_bytes: int,
                   extra: dict[str, Any]) -> None:
    """Write what this rank measured before the run ended early, marked partial.

    Under MPI a failing rank aborts the job, so the other ranks' measurements are lost; the
    failing rank's own are kept: the first rank to end early owns ``result.json`` (with its
    timeline), a later one writes ``partial-rank<N>.json`` beside it.
    """
    result = build_result(config, run_id, "partial", [trace], started, _now(), dataset_bytes,
                          {**extra, "ranks_launched": world.size}, run_facts(config))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        where = write_partial_result(run_dir, result, world.rank)
        if where.name == RESULT_NAME:
            write_csv(run_dir / "timeline.csv", [trace.timeline],
                      config.metric.exclude_start_steps, config.metric.exclude_end_steps)
    except (DlioBenchError, OSError):  # a full output disk: the measurements go elsewhere
        where, problem = save(run_dir, result, [trace.timeline], config)
        log.warning("%s", problem)
    log.warning("the run ended early; what rank %d measured is in %s (status: partial)",
                world.rank, where)
