"""A vector-database run end to end (``workflow.vectordb``): every rank opens the index its
keys name (checked against its manifest), runs its clients' timed window, and rank 0 merges
the ranks' figures into the result's ``vectordb`` section. The ranks journal their figures
once a second (``journaling``), so a run killed by SIGKILL is recovered by ``dliobench
recover``; SIGTERM and Ctrl-C end the window and leave a partial result. DiskANN's own
output goes to the run's ``engine.log``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import threading
from pathlib import Path
from typing import Any

from dliobench.base.errors import ConfigError, DlioBenchError
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.results.assemble import build_result
from dliobench.results.files import open_run_folder, write_partial_result
from dliobench.results.measured import RankTrace
from dliobench.results.timeline import Timeline
from dliobench.results.vdb_figures import RankFigures, attach
from dliobench.run.facts import run_facts
from dliobench.run.vectordb import journaling, manifest
from dliobench.run.vectordb.build import refuse_url
from dliobench.run.vectordb.engines import engine_for
from dliobench.run.vectordb.search import run_window
from dliobench.run.vectordb.sweep import merger, run_sweep
from dliobench.storage import backend_for

ENGINE_LOG = "engine.log"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def facts(config: Config, index: manifest.Index, ranks: int) -> dict[str, Any]:
    """What the result records of the index and the load (taken once, in the header)."""
    v, doc = config.vectordb, index.doc
    return {"engine": v.engine, "index_type": doc["index_type"], "metric_type": v.metric_type,
            "mode": v.mode, "runtime_s": v.runtime if v.mode == "timed" else None,
            "queries_asked": v.queries if v.mode == "query_count" else None,
            "batch_size": v.batch_size, "query_threads": v.query_threads, "ranks": ranks,
            "clients": ranks * v.query_threads, "search_list": max(v.search_list, v.k),
            "beam_width": v.beam_width, "cache_nodes": v.cache_nodes,
            "num_query_vectors": len(index.queries),
            "index": {"folder": str(index.folder), "vectors": doc["vectors"],
                      "params": doc["params"], "build": doc["build"],
                      "bytes": sum(doc["files"].values()), "created_at": doc["created_at"],
                      "num_shards": doc.get("num_shards", 1)},
            "deviations": doc.get("deviations", [])}


def _run_facts(config: Config) -> dict[str, Any]:
    folder = config.vectordb.index_dir
    return {**run_facts(config),
            "storage": backend_for(folder, config.storage, "vectordb.index_dir").facts()}


def _trace(world: World, figures: RankFigures, error: str | None = None) -> RankTrace:
    trace = RankTrace(world.rank, world.host, Timeline(world.rank), error=error)
    trace.cpu_s, trace.cpu_wall_s, trace.cpu_cores = figures.cpu_s, figures.elapsed_s, \
        figures.cpu_cores
    return trace


def run(config: Config, world: World, comm: Comm, warnings: list[str],
        save: Any) -> tuple[Path | None, Any, str | None]:
    """Run the vector-database benchmark; rank 0 returns (run folder, result, problem),
    others Nones. ``save`` commits the result files (``run.session.save``)."""
    v = config.vectordb
    refuse_url(v)
    if v.mode == "query_count" and not v.queries:
        raise ConfigError("vectordb.mode query_count needs a query count: give --queries N "
                          "(or run timed with --runtime S)")
    engine = engine_for(v.engine)
    index = manifest.load(v)
    run_id, run_dir = open_run_folder(config, world, comm)
    started = _now()
    known = {**_run_facts(config), "vectordb": facts(config, index, world.size)}
    extra = {"warnings": warnings, "launcher": world.launcher, "ranks_launched": world.size}
    if world.is_root:
        journaling.header(run_dir, config, (run_id, started), extra, known, world.size)
    figures = RankFigures(rank=world.rank, k=v.k, host=world.host, lock=threading.Lock())
    journal = journaling.VDBJournal(run_dir, world, figures)
    try:
        if v.mode == "sweep":
            run_sweep(engine, index, v, figures, world, comm, run_dir / ENGINE_LOG,
                      merger(v.min_recall, _cpu_floor(config)), known["vectordb"])
        else:
            searcher = engine.open(index.folder, v, run_dir / ENGINE_LOG)
            try:
                comm.barrier()
                run_window(searcher, index, v, figures, world.rank, world.size)
            finally:
                searcher.close()
    except BaseException as exc:
        journal.close("error", str(exc) or type(exc).__name__)
        _partial(config, world, (run_id, run_dir, started), figures, exc, (extra, known))
        raise
    journal.close("complete")
    traces = comm.gather(_trace(world, figures))
    gathered = comm.gather(dataclasses.replace(figures, lock=None))  # a lock does not travel
    where, result, problem = None, None, None
    if world.is_root and traces is not None and gathered is not None:
        result = _result(config, (run_id, "complete", started), traces, gathered,
                         (extra, known))
        where, problem = save(run_dir, result, [t.timeline for t in traces], config)
    if comm.bcast(where == run_dir):
        journaling.drop(run_dir, world)
    return where, result, problem


def _result(config: Config, run: tuple[str, str, str], traces: list[RankTrace],
            ranks: list[RankFigures], known: tuple[dict[str, Any], dict[str, Any]]) -> Any:
    run_id, status, started = run
    extra, facts_ = known
    result: Any = build_result(config, run_id, status, traces, started, _now(), 0, extra,
                               facts_)
    return attach(result, ranks, facts_["vectordb"], config.vectordb.min_recall,
                  _cpu_floor(config))


def _cpu_floor(config: Config) -> float | None:
    busy = config.metric.client_cpu_busy
    return None if busy == "off" else float(busy)


def _partial(config: Config, world: World, run: tuple[str, Path, str], figures: RankFigures,
             exc: BaseException, known: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """After a rank failed or was stopped: what it measured, as its partial result (its
    place said in the error's sentence); nothing measured, no result and no run folder
    left (the error's sentence carries what DiskANN said)."""
    run_id, run_dir, started = run
    if not figures.queries:
        journaling.drop(run_dir, world)
        if world.is_root:
            with contextlib.suppress(OSError):
                (run_dir / ENGINE_LOG).unlink(missing_ok=True)
                run_dir.rmdir()
        return
    result = _result(config, (run_id, "partial", started),
                     [_trace(world, figures, str(exc) or type(exc).__name__)], [figures],
                     known)
    with contextlib.suppress(DlioBenchError, OSError):
        where = write_partial_result(run_dir, result, world.rank)
        said = f"what rank {world.rank} measured before it is in {where} (status: partial)"
        if isinstance(exc, DlioBenchError) and len(exc.args) == 1:
            exc.args = (f"{exc.args[0]}; {said}",)
