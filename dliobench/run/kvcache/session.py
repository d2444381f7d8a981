"""A KV-cache run end to end (``workflow.kvcache``): every rank draws its schedule, serves it
through its tiers, deletes its entries; rank 0 merges the ranks' figures into the result.
The ranks journal their figures as they go (``journaling``), so a killed run is recovered
by ``dliobench recover``; the journals are removed once the result is written."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError, Terminated
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.results.assemble import build_result
from dliobench.results.files import open_run_folder, write_partial_result
from dliobench.results.kv_section import attach
from dliobench.results.kv_stats import KVStats
from dliobench.results.kv_summary import kv_summary
from dliobench.results.measured import RankTrace
from dliobench.results.timeline import Timeline
from dliobench.run.facts import run_facts
from dliobench.run.kvcache import journaling, leftovers, models, sharegpt
from dliobench.run.kvcache.cache import Waterfall
from dliobench.run.kvcache.engine import pool_size, serve_schedule
from dliobench.run.kvcache.schedule import schedule
from dliobench.run.kvcache.tiers import CpuTier, GpuTier, StorageTier, make_fill
from dliobench.storage import backend_for
from dliobench.storage.atomic import write_json_atomic

GIB = 1 << 30
log = logging.getLogger(__name__)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _rank_stats(config: Config, world: World, run_id: str, stats: KVStats) -> None:
    """Serve this rank's schedule in its own folder of the storage tier (its figures into
    ``stats``, what it served so far when it fails), then delete it."""
    kv = config.kvcache
    conversations = (sharegpt.load(kv.dataset_path, kv.max_conversations, kv.num_users)
                     if kv.dataset_path else None)
    requests = schedule(kv, world.rank, conversations)
    for sentence in leftovers.sweep_tier(kv.cache_dir):  # before the free space is taken
        log.warning("%s", sentence)
    folder = kv.cache_dir or tempfile.mkdtemp(prefix=leftovers.TEMPORARY)
    backend = backend_for(folder, config.storage, "kvcache.cache_dir")
    prefix = f"{run_id}/rank{world.rank}"
    alive: int | None = None
    try:  # an unreachable or full tier fails now, not later
        backend.make_room(prefix)
        local = backend.local_path(prefix)
        alive = leftovers.hold(local) if local is not None else None
        backend.put(f"{prefix}/.probe", b"kvcache")
        backend.delete(f"{prefix}/.probe")
    except OSError as exc:
        _remove_folders(folder, prefix, run_id, not kv.cache_dir, alive)
        where = f" ({exc.filename})" if exc.filename else ""
        raise DlioBenchError(f"the KV-cache storage tier {backend.describe()} cannot be "
                             f"written{where}: {exc.strerror or exc}; free space there or "
                             "give another kvcache.cache_dir") from None
    fill = make_fill(kv.seed)
    budgets = {"gpu": int(kv.gpu_mem_gb * kv.num_gpus * GIB * kv.entry_scale),
               "cpu": int(kv.cpu_mem_gb * GIB * kv.entry_scale)}
    capacity = _capacity(kv.storage_capacity_gb * GIB * kv.entry_scale, backend, world.size)
    if capacity is not None:
        budgets["storage"] = capacity
    storage = StorageTier(backend, prefix, kv.direct_io, fill)
    cache = Waterfall(budgets, GpuTier(kv.gpu_bandwidth_gbps * 1e9), CpuTier(fill), storage,
                      stats)
    per_token = models.PRESETS[kv.model].kv_bytes_per_token * kv.entry_scale \
        / kv.tensor_parallel
    try:
        serve_schedule(kv, requests, cache, stats, per_token)
    except OSError as exc:  # the first failed request stopped the run
        raise DlioBenchError(f"the KV-cache storage tier {backend.describe()} failed during "
                             f"the run: {exc.strerror or exc}; free space there or give "
                             "another kvcache.cache_dir") from None
    finally:
        cache.clear_storage()
        _remove_folders(folder, prefix, run_id, not kv.cache_dir, alive)
    stats.direct_io = storage.direct and kv.direct_io


def _capacity(given: float, backend: Any, ranks: int) -> int | None:
    """The storage tier's capacity: the one given, else 90 % of the free space over the
    ranks (upstream's 0: auto-detect), or none where the storage says no free space (S3)."""
    if given:
        return int(given)
    free = backend.free_bytes()
    return None if free is None else int(free * 0.9 / ranks)


def _remove_folders(folder: str, prefix: str, run_id: str, temporary: bool,
                    alive: int | None) -> None:
    """The run's emptied folders of a local storage tier (a temporary one whole), its
    live mark first (``leftovers``)."""
    if alive is not None:
        leftovers.release(alive, str(Path(folder) / prefix))
    if "://" in folder:
        return
    if temporary:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for path in (Path(folder) / prefix, Path(folder) / run_id):
        with contextlib.suppress(OSError):  # another rank's folder is still there
            path.rmdir()


def facts(config: Config, ranks: int) -> dict[str, Any]:
    """The model, its entry sizes and the options that shape the load, for the result."""
    kv = config.kvcache
    model = models.PRESETS[kv.model]
    return {"model": kv.model, "model_name": model.name,
            "kv_bytes_per_token": model.kv_bytes_per_token, "model_source": models.UPSTREAM,
            "entry_scale": kv.entry_scale, "num_users": kv.num_users, "clients": ranks,
            "io_depth": pool_size(kv), "generation_mode": kv.generation_mode,
            "gpu_mem_gb": kv.gpu_mem_gb, "cpu_mem_gb": kv.cpu_mem_gb, "seed": kv.seed,
            "num_gpus": kv.num_gpus, "tensor_parallel": kv.tensor_parallel,
            "performance_profile": kv.performance_profile,
            "duration": kv.duration, "max_requests": kv.max_requests,
            "max_concurrent_allocs": kv.max_concurrent_allocs,
            "multi_turn": not kv.disable_multi_turn,
            "prefix_caching": not kv.disable_prefix_caching,
            "replayed": bool(kv.dataset_path)}


def run(config: Config, world: World, comm: Comm, warnings: list[str],
        save: Any) -> tuple[Path | None, Any, str | None]:
    """Run the KV-cache benchmark; rank 0 returns (run folder, result, problem), others
    Nones. ``save`` commits the result files (``session.save``). A rank that fails leaves
    what it served as a partial result (``write_partial_result``)."""
    run_id, run_dir = open_run_folder(config, world, comm)
    started = _now()
    stats = KVStats(rank=world.rank, cpu_cores=float(len(os.sched_getaffinity(0))))
    extra = {"warnings": warnings, "launcher": world.launcher, "ranks_launched": world.size}
    known = _facts(config, world.size)
    if world.is_root:
        journaling.header(run_dir, config, (run_id, started), extra, known, world.size)
    journal = journaling.KVJournal(run_dir, world, stats)
    try:
        _rank_stats(config, world, run_id, stats)
    except BaseException as exc:
        journal.close("error", str(exc) or type(exc).__name__)
        _partial(config, world, (run_id, run_dir, started), stats, exc, (extra, known))
        raise
    journal.close("complete")
    traces, gathered = comm.gather(_trace(world, stats)), comm.gather(stats)
    where, result, problem = None, None, None
    if world.is_root and traces is not None and gathered is not None:
        result = _result(config, (run_id, "complete", started), traces, gathered,
                         (extra, known))
        where, problem = save(run_dir, result, [t.timeline for t in traces], config)
        problem = problem or _upstream_file(config.kvcache.output_json, result, where)
    if comm.bcast(where == run_dir):  # the result holds every journaled figure
        journaling.drop(run_dir, world)
    return where, result, problem


def _facts(config: Config, ranks: int) -> dict[str, Any]:
    """The run's facts (``run_facts``) with the storage tier's in place of the dataset
    folder's, and the ``kvcache`` facts: taken once, kept in the journal header."""
    folder = config.kvcache.cache_dir or tempfile.gettempdir()
    return {**run_facts(config),
            "storage": backend_for(folder, config.storage, "kvcache.cache_dir").facts(),
            "kvcache": facts(config, ranks)}


def _trace(world: World, stats: KVStats, error: str | None = None) -> RankTrace:
    trace = RankTrace(world.rank, world.host, Timeline(world.rank), error=error)
    trace.cpu_s, trace.cpu_wall_s, trace.cpu_cores = stats.cpu_s, stats.elapsed_s, \
        stats.cpu_cores
    return trace


def _result(config: Config, run: tuple[str, str, str], traces: list[RankTrace],
            stats: list[KVStats], known: tuple[dict[str, Any], dict[str, Any]]) -> Any:
    """The result document: the common part, the storage tier's facts, ``kvcache`` and its
    verdict. ``run``: (id, status, start time); ``known``: (extra, ``_facts``)."""
    run_id, status, started = run
    extra, run_facts_ = known
    result: Any = build_result(config, run_id, status, traces, started, _now(), 0, extra,
                               run_facts_)
    return attach(result, stats, run_facts_["kvcache"])


def _partial(config: Config, world: World, run: tuple[str, Path, str], stats: KVStats,
             exc: BaseException, known: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """After a rank failed: what it served, as its partial result (its place said in the
    error's sentence); nothing served, no empty run folder is left."""
    run_id, run_dir, started = run
    gone = "the cache entries are deleted"
    if not stats.requests:
        journaling.drop(run_dir, world)
        if world.is_root:
            with contextlib.suppress(OSError):
                run_dir.rmdir()
        if isinstance(exc, Terminated):
            exc.kept = f"no request was served, so there is no result; {gone}"
        return
    error = str(exc) or type(exc).__name__
    result = _result(config, (run_id, "partial", started), [_trace(world, stats, error)],
                     [stats], known)
    if isinstance(exc, Terminated):  # until the partial result is written
        exc.kept = f"no partial result could be written in {run_dir}; {gone}"
    with contextlib.suppress(DlioBenchError, OSError):
        run_dir.mkdir(parents=True, exist_ok=True)
        where = write_partial_result(run_dir, result, world.rank)
        said = f"what rank {world.rank} served before it is in {where} (status: partial)"
        if isinstance(exc, DlioBenchError) and len(exc.args) == 1:
            exc.args = (f"{exc.args[0]}; {said}",)
        elif isinstance(exc, Terminated):
            exc.kept = f"{said}; {gone}"


def _upstream_file(path: str, result: Any, where: Path) -> str | None:
    """Write upstream's results file (``results.kv_summary``) when asked; a sentence when it
    cannot be written (the run's own files are already saved)."""
    if not path:
        return None
    try:
        write_json_atomic(path, {**kv_summary(result), "run_dir": str(where)})
    except OSError as exc:
        return f"cannot write kvcache.output_json {path}: {exc.strerror}; the run's files are " \
               f"in {where}"
    return None
