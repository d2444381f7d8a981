"""``vectordb.mode sweep`` (upstream's ``--benchmark-mode sweep``, whose ``enhanced_bench.py``
steps the load; ours is a grid): one timed window of ``vectordb.runtime`` per point of
``sweep_threads`` (client threads per rank; the ranks are the launch's, upstream's
``--num-query-processes``) x ``sweep_search_list`` (DiskANN's search list, HNSW's ef,
IVF's nprobe), every rank at the same point together. Each point's figures are merged over
the ranks as a run's are (``vdb_figures.section``). The run's own figures (journaled once a
second) are the current point's, reset in place between points: the last point's are the
result's ``vectordb`` section, and a sweep stopped or killed mid-way keeps its current
point's as its partial result. The points go in the section's ``sweep`` list, which
``report`` draws: QPS and p99 against concurrency, recall against QPS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dliobench.base.errors import ConfigError
from dliobench.comm.world import Comm, World
from dliobench.config.vectordb_keys import VectorDBConfig
from dliobench.results.vdb_figures import RankFigures, section
from dliobench.run.vectordb.engines.base import Engine
from dliobench.run.vectordb.manifest import Index
from dliobench.run.vectordb.search import run_window


def _numbers(text: str, key: str) -> list[int]:
    try:
        out = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise ConfigError(f"vectordb.{key} {text!r} is not a list of positive whole numbers; "
                          "give e.g. 1,2,4")
    return out


def grid(cfg: VectorDBConfig) -> list[tuple[int, int]]:
    """The points (threads per rank, search list), concurrency inner, in the order run."""
    threads = _numbers(cfg.sweep_threads, "sweep_threads")
    lists = _numbers(cfg.sweep_search_list, "sweep_search_list") \
        if cfg.sweep_search_list else [cfg.search_list]
    return [(t, s) for s in lists for t in threads]


def point_of(merged: dict[str, Any], threads: int, search_list: int) -> dict[str, Any]:
    """One point's figures, as the report draws them."""
    lat = merged["latency_ms"]
    return {"threads_per_rank": threads, "clients": merged["clients"],
            "search_list": search_list, "qps": merged["qps"], "queries": merged["queries"],
            "p50_ms": lat.get("p50"), "p95_ms": lat.get("p95"), "p99_ms": lat.get("p99"),
            "recall": merged["recall"], "valid": merged["valid"],
            "limiter": merged["verdict"]["limiter"]}


def run_sweep(engine: Engine, index: Index, cfg: VectorDBConfig, figures: RankFigures,
              world: World, comm: Comm, log: Path,
              merge: Callable[[list[RankFigures], dict[str, Any]], dict[str, Any]],
              facts: dict[str, Any]) -> None:
    """Run every point into ``figures`` (reset between points). ``facts`` (the run's, which
    its section starts from) is kept to the current point's load, and on rank 0 gains each
    finished point under ``sweep``: a complete or partial result then carries both."""
    for n, (threads, search_list) in enumerate(grid(cfg)):
        at = dataclasses.replace(cfg, query_threads=threads, search_list=search_list,
                                 mode="timed")
        wide = max(search_list, cfg.k)
        facts.update(query_threads=threads, clients=world.size * threads, search_list=wide)
        if n:
            _reset(figures)
        searcher = engine.open(index.folder, at, log)
        try:
            comm.barrier()
            run_window(searcher, index, at, figures, world.rank, world.size)
        finally:
            searcher.close()
        gathered = comm.gather(dataclasses.replace(figures, lock=None))
        if gathered is not None:
            merged = merge(gathered, {k: v for k, v in facts.items() if k != "sweep"})
            facts.setdefault("sweep", []).append(point_of(merged, threads, wide))


def _reset(figures: RankFigures) -> None:
    """``figures`` as new (the journal holds this object: it is emptied, not replaced)."""
    assert figures.lock is not None
    fresh = RankFigures(rank=figures.rank, k=figures.k, host=figures.host)
    with figures.lock:
        for f in dataclasses.fields(RankFigures):
            if f.name != "lock":
                setattr(figures, f.name, getattr(fresh, f.name))


def merger(min_recall: float, cpu_floor: float | None) -> Callable[
        [list[RankFigures], dict[str, Any]], dict[str, Any]]:
    """Merge one point's rank figures as a run's section is merged."""
    def merge(ranks: list[RankFigures], facts: dict[str, Any]) -> dict[str, Any]:
        return section(ranks, facts, min_recall, cpu_floor)
    return merge
