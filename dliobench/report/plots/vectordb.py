"""The report's vector-database figures: each run's query latency CDF, and recall@k against
QPS (a point per run, the floor drawn), from the runs' ``vectordb`` sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, label_axes, wrap
from dliobench.report.plots.vdb_sweep import sweep_plots
from dliobench.report.runs import RunSet


def _runs(rs: RunSet) -> list[tuple[dict[str, Any], str]]:
    return [(run.result["vectordb"], label) for run, label
            in zip(rs.runs, rs.table["label"], strict=True) if "vectordb" in run.result]


def latency_cdf(runs: list[tuple[dict[str, Any], str]], out: Path) -> Plot:
    """Query latency CDF, a line per run (from its binned latencies)."""
    title = "Vector database: query latency CDF"
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for v, label in runs:
        hist = np.array(v.get("latency_hist_ms") or [], dtype=float)
        if len(hist):
            ax.step(hist[:, 0], np.cumsum(hist[:, 1]) / hist[:, 1].sum(), where="post",
                    label=wrap(label, 45))
    ax.set_xscale("log")
    label_axes(fig, ax, title, "query latency (ms, log scale)", "share of queries")
    return Plot("vectordb_latency", title, figure.save(fig, out, "vectordb_latency"),
                "A query's latency is its search call's time over the call's queries "
                "(upstream's count); bins of 100 a decade.")


def recall_qps(runs: list[tuple[dict[str, Any], str]], out: Path) -> Plot:
    """recall@k against QPS, a point per run; runs below their floor are hollow."""
    title = "Vector database: recall@k against QPS"
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for i, (v, label) in enumerate(runs):
        ax.plot(v["qps"], v["recall"], "o", color=f"C{i % 10}", label=wrap(label, 45),
                fillstyle="full" if v.get("valid") else "none")
    floors = {float(v.get("min_recall", 0)) for v, _ in runs}
    for floor in floors:
        ax.axhline(floor, color="grey", linestyle="--", linewidth=1)
    ax.set_ylim(0, 1.02)
    label_axes(fig, ax, title, "queries per second", "recall@k")
    return Plot("vectordb_recall", title, figure.save(fig, out, "vectordb_recall"),
                "Hollow: below the run's vectordb.min_recall (invalid); dashed: the floor.")


def vectordb_plots(rs: RunSet, out: Path) -> list[Plot]:
    """The two vector-database figures, where the report holds a vector-database run."""
    runs = _runs(rs)
    return [latency_cdf(runs, out), recall_qps(runs, out), *sweep_plots(runs, out)] \
        if runs else []
