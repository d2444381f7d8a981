"""The report's figures (matplotlib, Agg): scaling, comparison, wait CDF, per-rank timeline.

Each function returns a ``Plot``: the PNG it wrote, or no file and the reason it was not
drawn, so the HTML can say why a figure is absent.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from dliobench.report.tables import (
    Run,
    RunSet,
    counted_steps,
    describe,
    factor_name,
    factor_text,
    fmt_value,
    load_timeline,
    plural,
    telling_keys,
)

DPI = 110
MAX_PANELS = 6
# (column, axis label, scale to plot units)
METRICS = (("au", "AU (%)", 100.0), ("samples_per_s", "samples/s", 1.0),
           ("mb_per_s", "read MB/s (MB = $10^6$ bytes)", 1.0))
SPANS = (("wait_s", "wait (loader)", "#d62728"), ("compute_s", "compute", "#2ca02c"),
         ("comm_s", "comm (allreduce)", "#ff7f0e"), ("ckpt_s", "checkpoint", "#9467bd"))


@dataclass(frozen=True)
class Plot:
    """One figure of the report: drawn (``path``) or not, with a caption or the reason why."""

    name: str
    title: str
    path: Path | None
    note: str


def _save(fig: Figure, out: Path, name: str) -> Path:
    path = out / f"{name}.png"
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def _wrap(text: str, width: int = 28) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def _key(table: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One string per row identifying its values of ``columns`` (for grouping)."""
    if not columns:
        return pd.Series([""] * len(table), index=table.index)
    return table[columns].map(str).agg(" | ".join, axis=1)


def _floors(ax: Any, table: pd.DataFrame) -> None:
    for floor in sorted(table["au_floor"].dropna().unique()):
        ax.axhline(100 * floor, color="grey", linestyle="--", linewidth=1,
                   label=f"AU floor {100 * floor:g} %")


def scaling(rs: RunSet, out: Path) -> Plot:
    """AU, samples/s and MB/s against ranks, one line per group of otherwise equal runs."""
    title = "Scaling with the number of ranks"
    t = rs.table
    cols = [f[0] for f in rs.factors]
    groups = [g for _, g in t.groupby(_key(t, cols), sort=False) if g["ranks"].nunique() > 1]
    if not groups:
        why = ("there is only one run" if len(t) == 1 else
               "no set of runs equal in everything but the rank count spans several rank counts")
        return Plot("scaling", title, None, f"Not drawn: {why}.")
    varying = [f for f in rs.factors if len({str(g[f[0]].iloc[0]) for g in groups}) > 1]
    fig = Figure(figsize=(13, 4.2), layout="constrained")
    axes = fig.subplots(1, 3)
    for g in groups:
        label = "; ".join(factor_text(f, g.iloc[0]) for f in varying) or str(g["workload"].iloc[0])
        by = g.groupby("ranks")[[c for c, _, _ in METRICS]].mean()
        for ax, (col, _, scale) in zip(axes, METRICS, strict=True):
            ax.plot(by.index, by[col] * scale, marker="o", label=_wrap(label, 40))
    ranks = sorted(int(r) for r in t["ranks"].unique())
    for ax, (_, ylabel, _) in zip(axes, METRICS, strict=True):
        ax.set_xlabel("ranks (emulated accelerators)")
        ax.set_ylabel(ylabel)
        if ranks[-1] >= 8 * ranks[0]:
            ax.set_xscale("log", base=2)
        ax.set_xticks(ranks, [str(r) for r in ranks])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    _floors(axes[0], t)
    axes[0].set_ylim(0, 105)
    axes[0].set_title("accelerator utilization")
    axes[1].set_title("samples consumed per second")
    axes[2].set_title("bytes read per second")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)))
    repeated = any(g["ranks"].duplicated().any() for g in groups)
    fig.suptitle(title + (" (mean of repeated runs)" if repeated else ""))
    note = f"{len(groups)} line(s); runs equal in everything but the rank count share a line."
    return Plot("scaling", title, _save(fig, out, "scaling"), note)


def _comparisons(rs: RunSet) -> list[tuple[tuple[str, ...], str, pd.DataFrame]]:
    """Per factor, the largest set of runs differing in it only (rank count included)."""
    t = rs.table
    found = []
    for factor in rs.factors:
        others = [f[0] for f in rs.factors if f != factor] + ["ranks"]
        panels = [g for _, g in t.groupby(_key(t, others), sort=False)
                  if g[factor[0]].map(str).nunique() > 1]
        if not panels:
            continue
        g = max(panels, key=lambda p: p[factor[0]].map(str).nunique())
        row = g.iloc[0]
        context = plural(row["ranks"], "rank") if t["ranks"].nunique() > 1 else ""
        if len(panels) > 1:
            rest = [f for f in rs.factors if f != factor]
            context = "; ".join(p for p in (describe(row, t, rest), context) if p)
        found.append((factor, context, g))
    return found


def _bar_values(factor: tuple[str, ...], g: pd.DataFrame) -> pd.DataFrame:
    """Mean metrics per value of ``factor`` within one comparison, numeric order when possible."""
    keys = list(factor)
    agg = g.groupby(keys, sort=False, dropna=False)[[c for c, _, _ in METRICS]].mean().reset_index()
    numeric = pd.to_numeric(agg[keys[0]], errors="coerce")
    order = numeric.argsort() if numeric.notna().all() else agg[keys[0]].map(str).argsort()
    agg = agg.iloc[order.to_numpy()]
    shown = telling_keys(factor)
    agg["tick"] = [" / ".join(fmt_value(k, v) for k, v in zip(shown, values, strict=True))
                   for values in zip(*(agg[k] for k in shown), strict=True)]
    return agg


def _bar_column(axes: Any, factor: tuple[str, ...], context: str, g: pd.DataFrame,
                first: bool) -> None:
    """One comparison: AU, samples/s and MB/s bars (top to bottom) per value of ``factor``."""
    bars = _bar_values(factor, g)
    name = factor_name(factor)
    axes[0].set_title(_wrap(name + (f" ({context})" if context else ""), 34), fontsize=10)
    x = np.arange(len(bars))
    for i, (col, ylabel, scale) in enumerate(METRICS):
        colors = [f"C{i}"] * len(bars)
        if col == "au":
            colors = ["#d62728" if v < g["au_floor"].max() else "C0" for v in bars[col]]
        rects = axes[i].bar(x, bars[col] * scale, color=colors, width=0.6)
        axes[i].bar_label(rects, fmt="%.0f" if col == "samples_per_s" else "%.1f", fontsize=8)
        for xi in x[bars[col].isna().to_numpy()]:
            axes[i].annotate("n/a", (xi, 0), ha="center", va="bottom", fontsize=8)
        axes[i].set_xticks(x, [_wrap(s, 14) for s in bars["tick"]], fontsize=9)
        axes[i].set_xlim(-0.6, len(bars) - 0.4)
        axes[i].set_ylabel(ylabel if first else "")
        axes[i].margins(y=0.15)
        axes[i].grid(axis="y", alpha=0.3)
    _floors(axes[0], g)
    axes[0].set_ylim(0, 112)
    axes[2].set_xlabel(name)


def comparison(rs: RunSet, out: Path) -> Plot:
    """One bar group per differing config value, among runs equal in everything else."""
    title = "Comparison of differing settings"
    if not rs.factors:
        why = ("there is only one run" if len(rs.runs) == 1 else
               "the runs do not differ in any setting but the rank count")
        return Plot("comparison", title, None, f"Not drawn: {why}.")
    found = _comparisons(rs)
    if not found:
        return Plot("comparison", title, None, "Not drawn: the settings that differ always "
                    "change together with others, so no two runs differ in one setting only.")
    shown = found[:MAX_PANELS]
    fig = Figure(figsize=(max(7.0, 2.0 + 3.2 * len(shown)), 9), layout="constrained")
    axes = fig.subplots(3, len(shown), squeeze=False)
    for j, (factor, context, g) in enumerate(shown):
        _bar_column(axes[:, j], factor, context, g, first=j == 0)
    axes[0, 0].legend(loc="lower left", fontsize=8)
    fig.suptitle(title + ": AU, samples/s and MB/s per value")
    note = ("Each panel holds runs that differ in that setting only (the rank count included); "
            "red AU bars are below the AU floor.")
    drawn = {f for f, _, _ in shown}
    left = [factor_name(f) for f in rs.factors if f not in drawn]
    if left:
        note += (" Not drawn (no runs differing in it alone, or more than "
                 f"{MAX_PANELS} panels): {', '.join(left)}; see the table.")
    return Plot("comparison", title, _save(fig, out, "comparison"), note)


def _counted_waits(run: Run) -> np.ndarray | None:
    timeline = load_timeline(run)
    if timeline is None or timeline.empty:
        return None
    start = int(run.config("metric.exclude_start_steps", 1))
    end = int(run.config("metric.exclude_end_steps", 0))
    return counted_steps(timeline, start, end)["wait_s"].to_numpy() * 1e3


def wait_cdf(rs: RunSet, out: Path) -> Plot:
    """Cumulative distribution of per-step wait over the counted steps of each run."""
    title = "Wait per step (cumulative distribution)"
    fig = Figure(figsize=(10, 5.5), layout="constrained")
    ax = fig.subplots()
    drawn = 0
    for i, (run, label) in enumerate(zip(rs.runs, rs.table["label"], strict=True)):
        waits = _counted_waits(run)
        if waits is None or not waits.size:
            continue
        x = np.sort(np.maximum(waits, 1e-3))
        y = np.arange(1, x.size + 1) / x.size * 100
        ax.step(x, y, where="post", label=_wrap(label, 45), color=f"C{i % 10}",
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
    fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(title + ", all ranks, counted steps only")
    note = "Lines far left and steep: the loader kept up. A tail to the right: steps that waited."
    return Plot("wait_cdf", title, _save(fig, out, "wait_cdf"), note)


def _draw_timeline(ax: Any, timeline: pd.DataFrame, hosts: dict[int, str]) -> None:
    ranks = sorted(timeline["rank"].unique())
    present = {col for col, _, _ in SPANS if (timeline[col] > 0).any()}
    for y, rank in enumerate(ranks):
        rows = timeline[timeline["rank"] == rank]
        begin = rows["t_start_s"].to_numpy()
        for col, label, color in SPANS:
            dur = rows[col].to_numpy()
            keep = dur > 0
            if col in present:
                ax.broken_barh(list(zip(begin[keep], dur[keep], strict=True)), (y - 0.4, 0.8),
                               color=color, label=label if y == 0 else None)
            begin = begin + dur
    ax.set_yticks(range(len(ranks)), [f"rank {r} ({hosts.get(int(r), '?')})" for r in ranks],
                  fontsize=10 if len(ranks) <= 24 else 6)
    ax.invert_yaxis()


def timeline(rs: RunSet, out: Path, run_id: str | None = None) -> Plot:
    """Stacked wait / compute / comm / checkpoint spans along time, a row per rank."""
    run = rs.runs[-1] if run_id is None else next(r for r in rs.runs if r.run_id == run_id)
    title = f"Step timeline of {run.run_id}"
    data = load_timeline(run)
    if data is None or data.empty:
        return Plot("timeline", title, None, f"Not drawn: {run.run_id} has no timeline.csv.")
    hosts = {int(r["rank"]): str(r.get("host", "?")) for r in run.result.get("ranks") or []}
    n = data["rank"].nunique()
    fig = Figure(figsize=(13, 1.8 + min(0.45 * n, 14)), layout="constrained")
    ax = fig.subplots()
    _draw_timeline(ax, data, hosts)
    for t in data[data["step"] == 0].groupby("epoch")["t_start_s"].min():
        ax.axvline(t, color="black", linewidth=0.8, alpha=0.5)
    ax.set_xlabel("seconds since the start of training (vertical lines: epoch starts)")
    fig.legend(loc="outside lower center", ncols=4)
    ax.set_title(f"{title} ({plural(n, 'rank')})")
    note = "Each step is drawn as its wait, then compute, comm and checkpoint time."
    return Plot("timeline", title, _save(fig, out, "timeline"), note)
