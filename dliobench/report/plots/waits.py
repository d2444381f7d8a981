"""The wait figure: the cumulative distribution of per-step wait over each run's counted
steps.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, wrap
from dliobench.report.runs import Run, RunSet, counted_mask, load_timeline

MANY_RUNS = 12  # more runs than this: legends below the plot, in columns, abbreviated


def _counted_waits(run: Run) -> np.ndarray | None:
    timeline = load_timeline(run)
    if timeline is None or timeline.empty:
        return None
    return timeline.loc[counted_mask(run, timeline), "wait_s"].to_numpy() * 1e3


def wait_cdf(rs: RunSet, out: Path) -> Plot:
    """Cumulative distribution of per-step wait over the counted steps of each run."""
    title = "Wait per step (cumulative distribution)"
    many = len(rs.runs) > MANY_RUNS  # then the legend goes below, in columns, abbreviated
    rows = -(-len(rs.runs) // 3) if many else 0
    fig = Figure(figsize=(10, 5.5 + 0.22 * rows), layout="constrained")
    ax = fig.subplots()
    drawn = 0
    for i, (run, label) in enumerate(zip(rs.runs, rs.table["label"], strict=True)):
        waits = _counted_waits(run)
        if waits is None or not waits.size:
            continue
        x = np.sort(np.maximum(waits, 1e-3))
        y = np.arange(1, x.size + 1) / x.size * 100
        name = textwrap.shorten(label, 38, placeholder="...") if many else wrap(label, 45)
        ax.step(x, y, where="post", label=name, color=f"C{i % 10}",
                linestyle=("-", "--", ":")[i // 10 % 3], linewidth=1.6)
        drawn += 1
    if not drawn:
        return Plot("wait_cdf", title, None, "Not drawn: no run has counted steps in a "
                    "timeline.csv.")
    ax.set_xscale("log")
    ax.set_xlabel("wait for the next batch (ms, log scale; values under 1 µs shown at 1 µs)")
    ax.set_ylabel("counted steps waiting at most this long (%)")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    for pct in (50, 99):
        ax.axhline(pct, color="grey", linewidth=0.8, linestyle=":")
        ax.annotate(f"p{pct}", (1.0, pct), xycoords=("axes fraction", "data"),
                    xytext=(3, -3), textcoords="offset points", color="grey", fontsize=8)
    ax.set_ylim(0, 101)
    ax.grid(which="both", alpha=0.3)
    if many:
        fig.legend(loc="outside lower center", fontsize=7, ncols=3)
    else:
        fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(title + ", all ranks, counted steps only")
    note = "Lines far left and steep: the loader kept up. A tail to the right: steps that waited."
    return Plot("wait_cdf", title, figure.save(fig, out, "wait_cdf"), note)
