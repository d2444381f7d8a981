"""A vector-database run's figures, read by the result, ``summary.json``, the console and
``recover`` (results layer: nothing of the run is imported).

Each rank keeps a ``RankFigures``: its queries, recall hits, per-query latencies (a search
call's time over its batch, as upstream's ``simple_bench.py``@1d513297
``calculate_statistics`` counts them), the engine's own count of reads, the device's reads
and bytes and its CPU time. ``section`` merges the ranks' into the result's ``vectordb``
section with the verdict; ``upstream_statistics`` gives upstream's ``statistics.json``
fields (``throughput_qps``, ``mean_latency_ms``, ``p99_latency_ms``...) from the same figures.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dliobench.results.hostcpu import HostCpu, busiest, host_busy
from dliobench.results.kv_section import CLIENT_BUSY
from dliobench.results.storage_reads import read_origin
from dliobench.results.vdb_server import host_cpu_counts, server_verdict
from dliobench.storage.latency import LatencyLog

RECORD = "vectordb"  # the kind of a rank's figures record in its journal
PERCENTILES = (50, 95, 99, 99.9)
STORAGE_SHARE = 0.5  # ours: device reads per query at least this share of the engine's


@dataclass
class RankFigures:
    """One rank's figures so far (its threads add under ``lock``)."""

    rank: int
    k: int
    host: str = ""
    queries: int = 0
    calls: int = 0
    hits: int = 0
    engine_reads: float = 0.0  # the engine's reads, summed over queries (NaN: not counted)
    latencies_s: list[float] = field(default_factory=list)
    first_start: float = 0.0  # wall clock of the first call's start, of the last call's end
    last_end: float = 0.0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    user_s: float = 0.0
    cpu_cores: float = 1.0
    device_reads: int | None = None  # reads completed by the index's block device
    device_read_bytes: int | None = None  # the rank process's bytes from the block layer
    device_counter: str = ""
    host_cpu: tuple[int, int, tuple[int, ...]] | None = None  # busy, total jiffies, CPUs
    log: LatencyLog = field(default_factory=LatencyLog)  # the latencies binned (journaled)
    lock: threading.Lock | None = field(default=None, repr=False, compare=False)

    def add(self, start: float, end: float, queries: int, hits: int,
            reads_per_query: float | None) -> None:
        """One search call of ``queries`` queries, between wall-clock ``start`` and ``end``."""
        assert self.lock is not None
        per = (end - start) / max(queries, 1)
        with self.lock:
            if not self.calls:
                self.first_start = start
            self.last_end = max(self.last_end, end)
            self.calls += 1
            self.queries += queries
            self.hits += hits
            self.engine_reads += (np.nan if reads_per_query is None
                                  else reads_per_query * queries)
            self.latencies_s.extend([per] * queries)
            for _ in range(queries):
                self.log.record(per, per)

    def to_record(self) -> dict[str, Any]:
        """The figures as a journal record (latencies binned: a killed run's result is
        rebuilt from the bins)."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("lock", "latencies_s", "log")}
        out["latency_log"] = self.log.as_ints()
        out["engine_reads"] = None if np.isnan(self.engine_reads) else self.engine_reads
        return out

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> RankFigures:
        """A rank's figures from its journal record (latencies: its bins only)."""
        fields = {k: v for k, v in record.items() if k != "latency_log"}
        fields["engine_reads"] = np.nan if fields.get("engine_reads") is None \
            else fields["engine_reads"]
        return cls(**fields, log=LatencyLog.from_ints(record.get("latency_log") or [0, 0, 0, 0, 0]))


def _key(percentile: float) -> str:
    """A percentile's key: p50, p95, p99, p999 (upstream's spelling of 99.9)."""
    return "p" + f"{percentile:g}".replace(".", "")


def _percentiles(latencies_s: list[float]) -> dict[str, float]:
    if not latencies_s:
        return {}
    values = np.asarray(latencies_s) * 1e3
    out = {_key(p): float(np.percentile(values, p)) for p in PERCENTILES}
    return out | {"mean": float(values.mean()), "min": float(values.min()),
                  "max": float(values.max())}


def _merged(ranks: list[RankFigures]) -> LatencyLog:
    log = LatencyLog()
    for r in ranks:
        log.merge(r.log)
    return log


def _latency(ranks: list[RankFigures], log: LatencyLog) -> tuple[dict[str, float], str]:
    """Latency figures over every query of every rank; for recovered ranks (their samples
    were not journaled) from the ranks' bins (100 a decade: within 2.3 %)."""
    samples = [x for r in ranks for x in r.latencies_s]
    if samples:
        return _percentiles(samples), "every query"
    if not log.count:
        return {}, "no query"
    bins = log.total_bins()
    out = {_key(p): 1e3 * float(log.total_percentile(p) or 0) for p in PERCENTILES}
    return out | {"mean": 1e3 * sum(v * n for v, n in bins) / log.count,
                  "min": 1e3 * bins[0][0], "max": 1e3 * log.total_max_s}, \
        "the ranks' journaled bins (recovered)"


def verdict(host: tuple[str, float] | None, floor: float | None, gil: float,
            device_per_query: float | None, engine_per_query: float | None) -> dict[str, Any]:
    """What limited the queries: the client's CPU when a host's CPUs were at least
    ``metric.client_cpu_busy`` busy over the window (the training verdict's rule,
    ``results.hostcpu``), or one core's worth of interpreter was (``CLIENT_BUSY``, the KV
    cache's); else storage when the device served at least half the reads the index asked
    for; else the index's own work (graph walk and distances over reads served from
    memory)."""
    if floor is not None and host is not None and host[1] >= floor:
        return {"limiter": "client CPU", "reason": f"{host[0]}'s CPUs were {host[1]:.0%} busy "
                f"over the window (metric.client_cpu_busy {floor:g})"}
    if gil >= CLIENT_BUSY:
        return {"limiter": "client CPU", "reason": f"a rank's interpreter used {gil:.0%} of "
                "one core in user mode"}
    if device_per_query is not None and engine_per_query and \
            device_per_query >= STORAGE_SHARE * engine_per_query:
        return {"limiter": "storage", "reason": f"each query waited on {device_per_query:.1f} "
                f"device reads of the {engine_per_query:.1f} the index made"}
    said = ("the device's reads were not counted" if device_per_query is None else
            f"only {device_per_query:.1f} device reads per query of the index's "
            f"{engine_per_query or 0:.1f}")
    return {"limiter": "index", "reason": f"{said}: the index's own work (graph walk, "
            "distances, reads served from memory) set the pace"}


def section(ranks: list[RankFigures], facts: dict[str, Any], min_recall: float,
            cpu_floor: float | None) -> dict[str, Any]:
    """The result's ``vectordb`` section from the ranks' figures and the run's facts (the
    index's manifest, parameters, mode); ``cpu_floor``: ``metric.client_cpu_busy``."""
    queries = sum(r.queries for r in ranks)
    k = ranks[0].k if ranks else int(facts.get("k", 10))
    starts = [r.first_start for r in ranks if r.calls]
    window = (max(r.last_end for r in ranks if r.calls) - min(starts)) if starts else 0.0
    recall = sum(r.hits for r in ranks) / (k * queries) if queries else 0.0
    log = _merged(ranks)
    latency, over = _latency(ranks, log)
    engine = [r.engine_reads for r in ranks]
    engine_pq = None if not queries or any(np.isnan(e) for e in engine) else sum(engine) / queries
    # the block device's counter is the host's: ranks of one host read the same one (its
    # largest window counts), hosts add up; the bytes are each rank process's own
    per_host: dict[str, int] = {}
    for r in ranks:
        if r.device_reads is not None:
            per_host[r.host] = max(per_host.get(r.host, 0), r.device_reads)
    counted = all(r.device_reads is not None for r in ranks)
    device_pq = sum(per_host.values()) / queries if queries and counted else None
    known_bytes = [r.device_read_bytes for r in ranks if r.device_read_bytes is not None]
    bytes_pq = sum(known_bytes) / queries if queries and len(known_bytes) == len(ranks) \
        else None
    cpu_s, elapsed = sum(r.cpu_s for r in ranks), max((r.elapsed_s for r in ranks), default=0)
    cores = sum(r.cpu_cores for r in ranks) or 1.0
    cpu_share = cpu_s / (elapsed * cores) if elapsed else 0.0
    gil = max((r.user_s / r.elapsed_s for r in ranks if r.elapsed_s), default=0.0)
    hosts = host_busy((r.host, None if r.host_cpu is None else
                       HostCpu(r.host_cpu[0], r.host_cpu[1], tuple(r.host_cpu[2])))
                      for r in ranks)
    top = busiest(hosts)
    valid = queries > 0 and recall >= min_recall
    return {
        **facts,
        "queries": queries, "search_calls": sum(r.calls for r in ranks),
        "window_s": window, "qps": queries / window if window else 0.0,
        f"recall_at_{k}": recall, "recall": recall, "k": k, "min_recall": min_recall,
        "valid": valid,
        "invalid_reason": None if valid else (
            "no query finished" if not queries else
            f"recall@{k} {recall:.4f} is below vectordb.min_recall {min_recall}"),
        "latency_ms": latency, "latency_over": over,
        "latency_hist_ms": [[round(v * 1e3, 6), n] for v, n in log.total_bins()],
        "reads_per_query": {"index": engine_pq, "device": device_pq,
                            "device_bytes": bytes_pq,
                            "device_counter": ranks[0].device_counter if ranks else ""},
        # over the span the counter was read around (the clients' start to their end)
        "device_reads_per_s": sum(per_host.values()) / elapsed if counted and elapsed
        else None,
        "cpu": {"share_of_cores": cpu_share, "user_of_one_core": gil, "cpu_s": cpu_s,
                "host_cpu_busy_share": hosts},
        "verdict": server_verdict(facts, verdict(top if host_cpu_counts(facts) else None,
                                                 cpu_floor, gil, device_pq, engine_pq)),
        "per_rank": [{"rank": r.rank, "queries": r.queries, "hits": r.hits,
                      "elapsed_s": r.elapsed_s} for r in ranks],
    }


def attach(result: Any, ranks: list[RankFigures], facts: dict[str, Any], min_recall: float,
           cpu_floor: float | None) -> Any:
    """Put the ``vectordb`` section into ``result``, its verdict into the run's, and where
    its reads came from into ``honesty`` (the run's end, or a killed run's journals)."""
    result["vectordb"] = section(ranks, facts, min_recall, cpu_floor)
    said = result["vectordb"]["verdict"]
    limiter = {"storage": "storage", "client CPU": "client"}
    result["verdict"] = {**result["verdict"], "meets_floor": None,
                         "limiter": limiter.get(said["limiter"], "other"),
                         "reason": said["reason"]}
    result["honesty"]["page_cache_possible"] = bool(read_origin(result).page_cache_possible)
    return result


def upstream_statistics(section_: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``statistics.json`` fields (simple_bench.py@1d513297
    ``calculate_statistics``) from the section: the summary.json mlpstorage's reportgen
    reads (``mlpstorage_py/benchmarks/vdb_summary.py``@cf22cf56: ``recall`` a scalar)."""
    lat = section_["latency_ms"]
    return {"total_queries": section_["queries"], "total_time_seconds": section_["window_s"],
            "min_latency_ms": lat.get("min"), "max_latency_ms": lat.get("max"),
            "mean_latency_ms": lat.get("mean"), "median_latency_ms": lat.get("p50"),
            "p95_latency_ms": lat.get("p95"), "p99_latency_ms": lat.get("p99"),
            "p999_latency_ms": lat.get("p999"), "throughput_qps": section_["qps"],
            "batch_count": section_["search_calls"], "recall": section_["recall"]}


def summary_json(result: dict[str, Any]) -> dict[str, Any]:
    """A vector-database run's ``summary.json``: upstream's fields, then ours."""
    s = result["vectordb"]
    return {**upstream_statistics(s),
            "dliobench": {"run_id": result.get("run_id"), "status": result.get("status"),
                          "valid": s["valid"], "invalid_reason": s["invalid_reason"],
                          f"recall_at_{s['k']}": s["recall"],
                          "reads_per_query": s["reads_per_query"],
                          "verdict": s["verdict"], "index": s.get("index", {})}}
