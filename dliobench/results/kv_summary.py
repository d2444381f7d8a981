"""``summary.json`` of a KV-cache run: the results file upstream's benchmark writes with
``--output FILE.json`` (mlcommons/storage ``kv_cache_benchmark/kv_cache/cli.py``@23aa82ed
``main``: ``json.dump(benchmark.results)``), built from ``result.json``'s ``kvcache``
section, so that tools made for it read our runs: mlpstorage's aggregation reads
``summary.cache_stats.tier_storage_read_bandwidth_gbps``, ``summary.cache_stats.
storage_entries`` and ``summary.storage_io_latency_ms.p95`` (``mlpstorage_py/benchmarks/
kvcache.py``@01333b68 ``_aggregate_option_results``).

The top-level keys and ``summary``'s are upstream's ``results`` and ``_calculate_stats``
(``kv_cache/benchmark.py``@0eeb5228): the counters, the ``summary`` with its latency
percentiles in ms, ``cache_stats`` (its assessment as ``storage_health``), ``qos_metrics``
and ``multi_turn_stats`` (``cache_hits``, ``cache_misses``, ``hit_rate``: 0 without turns,
as upstream's ``max(..., 1)``). Left out: upstream's per-request latency lists (we keep
binned latencies: ``result.json``), and ``throughput_timeline`` is written from our tokens
per second (cumulative tokens over the time so far each second, upstream's definition, which
it fills only when autoscaling); ``autoscaling_stats`` and ``autoscaling_summary`` are
the first rank's autoscaler's (``result.json``'s ``kvcache.autoscaling`` has every rank's).
Our own ``dliobench`` section says where it comes from.
"""

from __future__ import annotations

from typing import Any

LATENCY_KEYS = ("mean", "p50", "p95", "p99", "p999", "p9999")  # _calculate_stats's


def _latency(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: figures.get(k) for k in LATENCY_KEYS}


def _timeline(per_second: list[int]) -> list[dict[str, float]]:
    """Upstream's ``throughput_timeline``: each second, tokens so far over the time so far."""
    out, done = [], 0
    for i, tokens in enumerate(per_second, start=1):
        done += tokens
        out.append({"timestamp": float(i), "throughput_tokens_per_sec": done / i})
    return out


def _autoscaling(scaled: dict[str, Any] | None) -> dict[str, Any]:
    """Upstream's ``autoscaling_stats`` (its scaling history) and ``autoscaling_summary``
    (``benchmark.py``@23aa82ed ``_calculate_stats``): the first rank's, or [] and None."""
    if not scaled:
        return {"autoscaling_stats": [], "autoscaling_summary": None}
    rank = scaled["ranks"][0]
    return {"autoscaling_stats": rank["autoscaling_stats"],
            "autoscaling_summary": rank["autoscaling_summary"]}


def _summary(kv: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``summary`` (``_calculate_stats``) from our ``kvcache`` section."""
    turns = kv["multi_turn_stats"]
    hits, misses = turns["hits"], turns["misses"]
    return {
        "total_requests": kv["total_requests"], "total_tokens": kv["total_tokens"],
        "elapsed_time": kv["elapsed_time"],
        "avg_throughput_tokens_per_sec": kv["avg_throughput_tokens_per_sec"],
        "total_storage_io_time": kv["total_storage_io_time"],
        "storage_throughput_tokens_per_sec": kv["storage_throughput_tokens_per_sec"] or 0,
        "requests_per_second": kv["requests_per_second"],
        "end_to_end_latency_ms": _latency(kv["end_to_end_latency_ms"]),
        "storage_io_latency_ms": _latency(kv["storage_io_latency_ms"]),
        "generation_latency_ms": _latency(kv["generation_latency_ms"]),
        "cache_stats": {**kv["cache_stats"], "storage_health": kv["storage_performance"]},
        "qos_metrics": kv["qos_metrics"], "prefix_cache_stats": {},
        **_autoscaling(kv.get("autoscaling")),
        "multi_turn_stats": {"cache_hits": hits, "cache_misses": misses,
                             "hit_rate": hits / max(hits + misses, 1)}}


def kv_summary(result: dict[str, Any]) -> dict[str, Any]:
    """Upstream's results document for the KV-cache run ``result`` holds."""
    kv = result["kvcache"]
    generation = kv["generation_latency_ms"].get("mean") or 0.0
    turns = kv["multi_turn_stats"]
    return {
        "requests_completed": kv["total_requests"],
        "total_tokens_generated": kv["total_tokens"],
        "total_storage_io_latency": kv["total_storage_io_time"],
        "total_generation_latency": generation * kv["total_requests"] / 1e3,
        "throughput_timeline": _timeline(kv["tokens_per_second_timeline"]),
        "multi_turn_cache_hits": turns["hits"], "multi_turn_cache_misses": turns["misses"],
        "seed": kv["seed"],
        "summary": _summary(kv),
        "dliobench": {"result": "result.json", "run_id": result.get("run_id"),
                      "dliobench_version": result.get("dliobench_version"),
                      "status": result.get("status"),
                      "format": "kv_cache_benchmark's --output results file "
                                "(kv_cache/cli.py@23aa82ed, benchmark.py@0eeb5228); the "
                                "per-request latency lists are left out (result.json keeps "
                                "binned latencies)"}}
