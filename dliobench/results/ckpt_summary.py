"""Figures of the checkpoint-only workflow, as MLPerf Storage states them and beside them.

MLPerf Storage's Submission_guidelines.md section 2.2.3
(mlcommons/storage@caa90c9c7d6a543de815222fff834a846823f922): per checkpoint, the duration is
the maximum time across ranks and the throughput the minimum across ranks. Beside those we
give the aggregate rate (the checkpoint's bytes over that duration: what the storage
sustained), and p50/p99 of the ranks' times and of the aggregate rate over the repetitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dliobench.results.measured import CheckpointOp, RankTrace

HONEST_MEMORY_MULTIPLE = 3  # the rules' alternative to evicting: write >= 3x client memory


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _one(index: int, ops: list[CheckpointOp]) -> dict[str, Any]:
    """One checkpoint's write or read, over the ranks that did it."""
    nbytes = sum(o.nbytes for o in ops)
    duration = max(o.seconds for o in ops)
    rates = [o.nbytes / o.seconds for o in ops if o.nbytes and o.seconds > 0]
    seconds = [o.seconds for o in ops]
    return {"index": index, "bytes": nbytes, "files": sum(o.files for o in ops),
            "duration_s": duration,
            "throughput_bytes_per_s": min(rates) if rates else None,
            "aggregate_bytes_per_s": nbytes / duration if duration > 0 else None,
            "rank_s_p50": _pct(seconds, 50), "rank_s_p99": _pct(seconds, 99)}


def op_summary(traces: list[RankTrace], op: str) -> dict[str, Any] | None:
    """Every checkpoint's figures for ``op`` ("write" or "read") and their summary."""
    by_index: dict[int, list[CheckpointOp]] = {}
    for trace in traces:
        for o in trace.checkpoint_ops:
            if o.op == op:
                by_index.setdefault(o.index, []).append(o)
    if not by_index:
        return None
    rows = [_one(i, ops) for i, ops in sorted(by_index.items())]
    aggregate = [r["aggregate_bytes_per_s"] for r in rows if r["aggregate_bytes_per_s"]]
    mlperf = [r["throughput_bytes_per_s"] for r in rows if r["throughput_bytes_per_s"]]
    seconds = [o.seconds for ops in by_index.values() for o in ops]
    total_s = sum(r["duration_s"] for r in rows)
    total_bytes = sum(r["bytes"] for r in rows)
    return {"count": len(rows), "bytes": total_bytes,
            "bytes_per_checkpoint": total_bytes / len(rows),
            "duration_s_mean": total_s / len(rows),
            "throughput_bytes_per_s_mean": float(np.mean(mlperf)) if mlperf else None,
            "aggregate_bytes_per_s": total_bytes / total_s if total_s > 0 else None,
            "aggregate_bytes_per_s_p50": _pct(aggregate, 50),
            "aggregate_bytes_per_s_p99": _pct(aggregate, 99),
            "rank_s_p50": _pct(seconds, 50), "rank_s_p99": _pct(seconds, 99),
            "checkpoints": rows}


def read_honesty(evicted: bool, written: int, host_memory: int, hosts: int,
                 reads: int) -> dict[str, Any]:
    """Could the reads have come from the page cache? Honest when the files were evicted
    before each read, or when the checkpoints written exceed 3x the clients' memory."""
    ratio = written / (host_memory * hosts) if host_memory else None
    big = ratio is not None and ratio >= HONEST_MEMORY_MULTIPLE
    how = "evicted" if evicted else f"written >= {HONEST_MEMORY_MULTIPLE}x memory" if big else None
    return {"evicted": evicted, "written_bytes": written, "host_memory_bytes": host_memory,
            "written_to_memory_ratio": ratio, "reads_honest": how is not None or not reads,
            "made_honest_by": how}


def warning(honesty: dict[str, Any]) -> str | None:
    """A sentence when the reads may have come from the page cache, else None."""
    if honesty["reads_honest"]:
        return None
    ratio = honesty["written_to_memory_ratio"]
    return ("checkpoint reads may have come from the page cache: the files were not evicted "
            f"and the checkpoints written are {ratio or 0:.2f}x the clients' memory (under "
            f"{HONEST_MEMORY_MULTIPLE}x); set checkpoint.evict_before_read=true")
