"""One benchmark run end to end: dataset, training, result files. Called by the CLI."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset import prepare as dataset_mod
from dliobench.dataset import staging
from dliobench.dataset.lock import locked
from dliobench.errors import DlioBenchError
from dliobench.plan import check_run, resolve
from dliobench.results.assemble import build_result
from dliobench.results.files import (
    RESULT_NAME,
    open_run_folder,
    write_partial_result,
    write_result,
)
from dliobench.results.measured import RankTrace
from dliobench.results.metadata import metadata_phase
from dliobench.results.schema import RunResult
from dliobench.results.timeline import Timeline, write_csv
from dliobench.results.verdict import verdict
from dliobench.run import ceiling
from dliobench.run.loop import TrainingFailed, train

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    """Where the run's files are and what they say (rank 0 only; None elsewhere)."""

    run_dir: Path | None
    result: RunResult | None
    problem: str | None = None  # files that could not go to output.folder, and where they went


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def run(config: Config, world: World, comm: Comm, warnings: list[str],
        show_progress: bool = True) -> RunOutcome:
    """Generate what is missing, train, and write ``<output.folder>/<run-id>/``.

    The data folder is locked for the run: shared while it is read, exclusively only while
    the run writes it (``dataset.lock``), so runs reading one dataset run at once.
    """
    if config.workflow.checkpoint and not config.workflow.train:
        from dliobench.run import ckpt_session

        return RunOutcome(*ckpt_session.run(config, world, comm, warnings, save))
    plan = resolve(config, world, comm)
    check_run(plan.config, world)  # an existing dataset's files decide its layout
    with locked(plan.manifest_backend, world, exclusive=False, doing="by a run") as lock:
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
    staged = None
    try:
        staged = _stage(ready, world, comm, run_id, extra)
        reads = staged.plan if staged else ready.plan  # the result keeps the source folder
        trace = train(reads, world, comm, show_progress, run_id)
    except BaseException as exc:
        if isinstance(exc, TrainingFailed):
            _write_partial(config, world, run_id, run_dir, exc.trace, started,
                           ready.total_bytes, extra)
        if world.is_root:  # nothing measured (staging failed, or before the first step)
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
                              ready.total_bytes, extra)
    _judge_client(config, world, comm, result)
    if result is None or traces is None:
        return RunOutcome(None, None)
    where, problem = save(run_dir, result, [t.timeline for t in traces], config)
    return RunOutcome(where, result, problem)


def save(run_dir: Path, result: RunResult, timelines: list[Timeline],
         config: Config) -> tuple[Path, str | None]:
    """Commit result.json (small: first) and timeline.csv. When the output folder cannot
    take them (a full disk), both go to a folder under the system's temporary directory
    instead: (where they are, a sentence saying what was not written where)."""
    m = config.metric
    try:
        write_result(run_dir, result)
        write_csv(run_dir / "timeline.csv", timelines, m.exclude_start_steps, m.exclude_end_steps)
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


def _judge_client(config: Config, world: World, comm: Comm, result: RunResult | None) -> None:
    """A run that waited below its floor with ``metric.client_ceiling: auto``: find (cached
    under the load the host has now, or measured now by every rank) what this host's loader
    delivers from memory, and judge the run against it (rank 0 holds the result)."""
    waited = result is not None and result["verdict"]["limiter"] == "storage"
    if not comm.bcast(waited and config.metric.client_ceiling == "auto"):
        return
    load = ceiling.host_load() if world.is_root else None
    value = comm.bcast(ceiling.cached(config, world, load=load) if world.is_root else None)
    source = "cached"
    if value is None:
        value, source = ceiling.measure(config, world, comm, load), "measured"
    if result is not None and value > 0:
        judged = replace(config, metric=replace(config.metric, client_ceiling=str(value)))
        result["verdict"] = {**verdict(judged, dict(result["metrics"]), result["time_shares"],
                                       result["honesty"]),
                             "client_ceiling_source": source, "client_ceiling_load": load}


def _stage(ready: dataset_mod.ReadyDataset, world: World, comm: Comm, run_id: str,
           extra: dict[str, Any]) -> staging.Staged | None:
    """Copy the dataset to ``storage.stage_to`` when asked; its figures go into ``extra``."""
    config = ready.plan.config
    if not config.storage.stage_to:
        return None
    staged = staging.stage(ready.plan, world, comm, run_id)
    parts = comm.gather(staged)
    if parts:
        extra["staging"] = {"source": config.dataset.data_folder,
                            "scope": config.storage.stage_scope, **staging.summary(parts)}
    return staged


def _write_partial(config: Config, world: World, run_id: str, run_dir: Path,
                   trace: RankTrace, started: str, dataset_bytes: int,
                   extra: dict[str, Any]) -> None:
    """Write what this rank measured before the run ended early, marked partial.

    Under MPI a failing rank aborts the job, so the other ranks' measurements are lost; the
    failing rank's own are kept: the first rank to end early owns ``result.json`` (with its
    timeline), a later one writes ``partial-rank<N>.json`` beside it.
    """
    result = build_result(config, run_id, "partial", [trace], started, _now(), dataset_bytes,
                          {**extra, "ranks_launched": world.size})
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
