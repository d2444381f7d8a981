"""The report's KV-cache figures: each tier's read latency CDF, users against the worst
rank's storage read P95, and tokens per second over each run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, wrap
from dliobench.report.runs import RunSet

NONE = "Not drawn: no KV-cache run (dliobench kvcache)."


def _kv_runs(rs: RunSet) -> list[tuple[dict[str, Any], str]]:
    return [(run.result["kvcache"], label) for run, label
            in zip(rs.runs, rs.table["label"], strict=True) if "kvcache" in run.result]


def latency_cdf(rs: RunSet, out: Path) -> Plot:
    """Read latency CDF of every tier that served reads, a line per run and tier."""
    title = "KV cache: read latency CDF per tier"
    runs = _kv_runs(rs)
    if not runs:
        return Plot("kvcache_latency", title, None, NONE)
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for kv, label in runs:
        for tier, data in kv["tiers"].items():
            hist = np.array(data.get("read_latency_hist_ms") or [], dtype=float)
            if not len(hist):
                continue
            ax.step(hist[:, 0], np.cumsum(hist[:, 1]) / hist[:, 1].sum(), where="post",
                    label=wrap(f"{tier}: {label}", 45))
    ax.set_xscale("log")
    ax.set_xlabel("read latency (ms, log scale)")
    ax.set_ylabel("share of reads")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(title)
    return Plot("kvcache_latency", title, figure.save(fig, out, "kvcache_latency"),
                "Each entry read whole; the storage tier's times are the calls' (O_DIRECT "
                "where the file system takes it).")


def users_p95(rs: RunSet, out: Path) -> Plot:
    """Users (all ranks') against the worst rank's storage read P95, a point per run."""
    title = "KV cache: users vs worst rank's storage read P95"
    runs = [(kv, label) for kv, label in _kv_runs(rs)
            if kv.get("worst_rank_storage_read_p95_ms") is not None]
    if not runs:
        return Plot("kvcache_users", title, None, NONE + " (or none read from storage)")
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for i, (kv, label) in enumerate(runs):
        ax.plot(kv["num_users"] * kv["clients"], kv["worst_rank_storage_read_p95_ms"], "o",
                color=f"C{i % 10}", label=wrap(label, 45))
    ax.set_xlabel("users (all ranks)")
    ax.set_ylabel("storage read P95, worst rank (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(title)
    return Plot("kvcache_users", title, figure.save(fig, out, "kvcache_users"),
                "MLPerf Storage v3.0 scores the worst rank's storage read P95.")


def tokens_over_time(rs: RunSet, out: Path) -> Plot:
    """Generated tokens per second of the run, a line per run."""
    title = "KV cache: tokens/s over the run"
    runs = [(kv, label) for kv, label in _kv_runs(rs) if kv.get("tokens_per_second_timeline")]
    if not runs:
        return Plot("kvcache_tokens", title, None, NONE)
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for kv, label in runs:
        line = kv["tokens_per_second_timeline"]
        ax.plot(np.arange(len(line)), line, "-", label=wrap(label, 45))
    ax.set_xlabel("second of the run")
    ax.set_ylabel("tokens/s (requests completed in that second)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(title)
    return Plot("kvcache_tokens", title, figure.save(fig, out, "kvcache_tokens"),
                "A request's tokens count in the second it completed, generation time "
                "included.")


def kvcache_plots(rs: RunSet, out: Path) -> list[Plot]:
    """The three KV-cache figures."""
    return [latency_cdf(rs, out), users_p95(rs, out), tokens_over_time(rs, out)]
