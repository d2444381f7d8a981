"""``result.json``'s ``kvcache``: the ranks' figures merged, under the names of upstream's
``summary`` (mlcommons/storage ``kv_cache_benchmark/kv_cache/cli.py``@23aa82ed, the keys its
spreadsheet export reads), plus ours: per-tier bytes, operations, latencies and entry-size
histograms, each rank's storage read P95 and the worst of them (v3.0 scores the worst
rank's), the client's CPU share, and what limited the run."""

from __future__ import annotations

from typing import Any

from dliobench.results.kv_stats import TIERS, KVStats, TierOps
from dliobench.storage.latency import LatencyLog

GB = 1e9
QUANTILES = (("p50", 50), ("p95", 95), ("p99", 99), ("p999", 99.9), ("p9999", 99.99))
# QoS targets (p95, p99 ms): mlcommons/storage kv_cache/models.py@64f05b37 _DEFAULT_QOS_PROFILES
QOS_TARGETS_MS = {"interactive": (50, 100), "responsive": (100, 200), "batch": (1000, 5000)}
# the latency profile's criteria: (name, value's key path, target, below): kv-cache.py@17335a71
# _evaluate_storage_performance (storage write P95 < 500 ms, read P95 < 200 ms, CPU tier P95
# < 150 ms, hit rate > 30 %)
CRITERIA = (("NVMe Write P95 < 500ms", "storage_write_p95_ms", 500.0, True),
            ("NVMe Read P95 < 200ms", "storage_read_p95_ms", 200.0, True),
            ("CPU RAM P95 < 150ms", "cpu_p95_ms", 150.0, True),
            ("Cache Hit Rate > 30%", "cache_hit_rate", 0.3, False))
SATURATED_WAIT_S = 0.05  # ours: a median queue wait above this means requests piled up
CLIENT_BUSY = 0.9  # ours: CPU share of the rank's cores above which the client limits


def _ms(log: LatencyLog, total_s: float | None = None) -> dict[str, float | None]:
    """Percentiles in ms under upstream's key names, and the ``mean`` when the sum of the
    times (``total_s``) is known (the bins keep none)."""
    out: dict[str, float | None] = {}
    if total_s is not None:
        out["mean"] = total_s / log.count * 1e3 if log.count else None
    for name, q in QUANTILES:
        value = log.total_percentile(q)
        out[name] = None if value is None else value * 1e3
    out["max"] = log.total_max_s * 1e3 if log.count else None
    return out


def _tier(reads: TierOps, writes: TierOps, elapsed: float) -> dict[str, Any]:
    return {"read_bytes": reads.bytes, "write_bytes": writes.bytes,
            "reads": reads.count, "writes": writes.count,
            "read_latency_ms": _ms(reads.latency), "write_latency_ms": _ms(writes.latency),
            "read_latency_hist_ms": [[round(v * 1e3, 6), n]
                                     for v, n in reads.latency.total_bins()],
            "read_sizes_log2": {str(k): v for k, v in sorted(reads.sizes.items())},
            "write_sizes_log2": {str(k): v for k, v in sorted(writes.sizes.items())},
            "read_bandwidth_bytes_per_s": reads.bytes / elapsed if elapsed else None}


def _cache_stats(t: KVStats, worst_p95: float | None) -> dict[str, Any]:
    """Upstream's ``cache_stats`` keys."""
    el = t.elapsed_s or 1e-9
    read = sum(t.reads[x].bytes for x in TIERS)
    write = sum(t.writes[x].bytes for x in TIERS)
    hits = t.hits + t.multi_turn_hits  # every access, as upstream's access_cache counts
    accesses = hits + t.misses + t.multi_turn_misses
    out: dict[str, Any] = {
        "cache_hit_rate": hits / accesses if accesses else None,
        "read_write_ratio": read / write if write else None,
        "total_read_gb": read / GB, "total_write_gb": write / GB,
        "decode_bytes_read_gb": t.decode_bytes_read / GB}
    for x in TIERS:
        out[f"tier_{x}_kv_bytes_written_gb"] = t.writes[x].bytes / GB
        out[f"tier_{x}_kv_bytes_read_gb"] = t.reads[x].bytes / GB
        out[f"tier_{x}_read_bandwidth_gbps"] = t.reads[x].bytes / el / GB
        out[f"tier_{x}_write_bandwidth_gbps"] = t.writes[x].bytes / el / GB
        out[f"{x}_entries"] = t.writes[x].count
    for op, ops in (("read", t.reads["storage"]), ("write", t.writes["storage"])):
        for name, value in _ms(ops.latency).items():
            out[f"storage_{op}_{name}_ms"] = value
            out[f"storage_{op}_device_{name}_ms"] = value  # no bpftrace: the call's time
    out["storage_read_device_p95_ms_worst_rank"] = worst_p95
    return out


def _rank(s: KVStats) -> dict[str, Any]:
    p95 = s.reads["storage"].latency.total_percentile(95)
    return {"rank": s.rank, "requests": s.requests, "tokens": s.tokens,
            "decode_bytes_read": s.decode_bytes_read, "elapsed_s": s.elapsed_s,
            "storage_read_p95_ms": None if p95 is None else p95 * 1e3,
            "cpu_share": s.cpu_s / (s.elapsed_s * s.cpu_cores) if s.elapsed_s else None,
            "user_cpu_of_one_core": s.user_s / s.elapsed_s if s.elapsed_s else None}


def verdict(t: KVStats, ranks: list[KVStats]) -> dict[str, Any]:
    """What limited the run: none when requests did not queue (the users' pace set it);
    else the client's CPU when its cores, or one core's worth of interpreter (the GIL) on
    some rank, were busy; else the tier where the I/O time went."""
    wait = t.queue_wait.total_percentile(50) or 0.0
    cpu = t.cpu_s / (t.elapsed_s * t.cpu_cores) if t.elapsed_s else 0.0
    gil = max((s.user_s / s.elapsed_s for s in ranks if s.elapsed_s), default=0.0)
    if wait <= SATURATED_WAIT_S and not t.cancelled:
        return {"limiter": "none", "reason": f"requests waited {wait * 1e3:.1f} ms (median) "
                "for a thread: the users' pace, not the system, set the load"}
    if cpu >= CLIENT_BUSY or gil >= CLIENT_BUSY:
        return {"limiter": "client CPU", "reason": f"requests queued while the client used "
                f"{cpu:.0%} of its cores ({gil:.0%} of one core in user mode, the "
                "interpreter's bound)"}
    spent = {x: sum(_seconds(o[x]) for o in (t.reads, t.writes))
             for x in TIERS}
    worst = max(spent, key=lambda x: spent[x])
    limiter = "storage" if worst == "storage" else "memory tier"
    return {"limiter": limiter, "reason": f"requests queued (median wait {wait * 1e3:.0f} ms) "
            f"and the {worst} tier took most of the I/O time"}


def _seconds(ops: TierOps) -> float:
    """Approximate seconds spent in ``ops``: count x median latency."""
    median = ops.latency.total_percentile(50)
    return 0.0 if median is None else ops.count * median


def assessment(stats: dict[str, Any], profile: str, storage_tokens_per_s: float) -> dict[str, Any]:
    """Upstream's storage performance assessment: the latency profile's four criteria (each
    judged when it has data), or the throughput profile's storage tokens/s > 0."""
    if profile == "throughput":
        criteria = [{"name": "Throughput (tok/s)", "target": ">0",
                     "actual": storage_tokens_per_s, "passed": storage_tokens_per_s > 0}]
    else:
        criteria = [{"name": name, "target": target, "actual": stats[key],
                     "passed": stats[key] < target if below else stats[key] > target}
                    for name, key, target, below in CRITERIA if stats.get(key) is not None]
    return {"overall_status": "PASS" if all(c["passed"] for c in criteria) else "FAIL",
            "criteria": criteria, "passed_count": sum(c["passed"] for c in criteria),
            "total_count": len(criteria)}


def _performance(total: KVStats, cache_stats: dict[str, Any],
                 facts: dict[str, Any]) -> dict[str, Any]:
    """``assessment`` of the run: the CPU tier's reads and writes together for its P95, and
    the tokens the storage tier moved (its bytes over the entry bytes per token)."""
    cpu = LatencyLog()
    for ops in (total.reads["cpu"], total.writes["cpu"]):
        cpu.merge(ops.latency)
    p95 = cpu.total_percentile(95)
    judged = {**cache_stats, "cpu_p95_ms": None if p95 is None else p95 * 1e3}
    per_token = float(facts.get("kv_bytes_per_token", 1)) * float(facts.get("entry_scale", 1))
    moved = total.reads["storage"].bytes + total.writes["storage"].bytes
    return assessment(judged, str(facts.get("performance_profile")),
                      moved / max(per_token, 1e-9) / (total.elapsed_s or 1e-9))


def _qos(level: str, log: LatencyLog) -> dict[str, Any]:
    """One QoS class's requests against upstream's targets: ``sla.met`` when its P95 and P99
    are within them, ``sla.compliance`` the share of requests within the P95 target."""
    p95, p99 = QOS_TARGETS_MS[level]
    latency = _ms(log)
    within = sum(n for v, n in log.total_bins() if v * 1e3 <= p95)
    met = (latency["p95"] or 0) <= p95 and (latency["p99"] or 0) <= p99
    return {"total_requests": log.count, "latency_ms": latency,
            "sla": {"target_latency_p95_ms": p95, "target_latency_p99_ms": p99, "met": met,
                    "compliance": within / log.count if log.count else None}}


def summarize(stats: list[KVStats], facts: dict[str, Any]) -> dict[str, Any]:
    """The ``kvcache`` section from every rank's stats; ``facts``: model, sizes, options."""
    total = KVStats()
    for s in stats:
        total.merge(s)
    el = total.elapsed_s or 1e-9
    ranks = [_rank(s) for s in stats]
    p95s = [r["storage_read_p95_ms"] for r in ranks if r["storage_read_p95_ms"] is not None]
    worst = max(p95s) if p95s else None
    turns = total.multi_turn_hits + total.multi_turn_misses
    cache_stats = _cache_stats(total, worst)
    return {
        **facts, "total_requests": total.requests, "scheduled_requests": total.scheduled,
        "dropped_requests": total.cancelled, "unfinished_requests": total.unfinished,
        "total_tokens": total.tokens,
        "elapsed_time": total.elapsed_s,
        "avg_throughput_tokens_per_sec": total.tokens / el,
        "storage_throughput_tokens_per_sec": (total.tokens / total.storage_io_s
                                              if total.storage_io_s else None),
        "requests_per_second": total.requests / el,
        "total_storage_io_time": total.storage_io_s,
        "end_to_end_latency_ms": _ms(total.e2e, total.e2e_s),
        "storage_io_latency_ms": _ms(total.storage_io, total.storage_io_s),
        "generation_latency_ms": _ms(total.generation, total.generation_s),
        "queue_wait_ms": _ms(total.queue_wait),
        "aggregated_read_bandwidth_gbps": sum(
            s.reads["storage"].bytes / s.elapsed_s for s in stats if s.elapsed_s) / GB,
        "cache_stats": cache_stats,
        "storage_performance": _performance(total, cache_stats, facts),
        "multi_turn_stats": {"hits": total.multi_turn_hits, "misses": total.multi_turn_misses,
                             "hit_rate": total.multi_turn_hits / turns if turns else None},
        "qos_metrics": {q: _qos(q, log) for q, log in sorted(total.qos.items())},
        "tiers": {x: _tier(total.reads[x], total.writes[x], el) for x in TIERS},
        "tokens_per_second_timeline": [total.tokens_per_second.get(i, 0)
                                       for i in range(int(el) + 1)],
        "client_cpu_share": total.cpu_s / (el * total.cpu_cores) if total.cpu_cores else None,
        "direct_io": total.direct_io, "ranks": ranks,
        "worst_rank_storage_read_p95_ms": worst, "verdict": verdict(total, stats),
        "autoscaling": autoscaling(stats)}


def autoscaling(stats: list[KVStats]) -> dict[str, Any] | None:
    """The autoscalers' figures (``run/kvcache/autoscale.py``): users summed over the ranks,
    the first rank's timeline and why it stopped, each rank's record; None without it."""
    records = [s.autoscaling for s in stats if s.autoscaling]
    if not records:
        return None
    first = records[0]
    summed = {k: sum(r["autoscaling_summary"][k] for r in records)
              for k in ("initial_users", "final_users", "total_scale_events")}
    return {"mode": first["mode"], "interval_s": first["interval_s"],
            "max_users": sum(r["max_users"] for r in records), **summed,
            "most_users": sum(r["most_users"] for r in records),
            "stopped": next((r["stopped"] for r in records if r["stopped"]), ""),
            "timeline": first["timeline"], "ranks": records}


def attach(result: Any, stats: list[KVStats], facts: dict[str, Any]) -> Any:
    """Put the ``kvcache`` section of the ranks' ``stats`` into ``result`` and its verdict
    into the run's (the run's figures at its end, or a killed run's from its journals)."""
    result["kvcache"] = summarize(stats, facts)
    kv_verdict = result["kvcache"]["verdict"]
    limiter = {"none": "none", "storage": "storage", "client CPU": "client"}
    result["verdict"] = {**result["verdict"], "meets_floor": None,
                         "limiter": limiter.get(kv_verdict["limiter"], "other"),
                         "reason": kv_verdict["reason"]}
    return result
