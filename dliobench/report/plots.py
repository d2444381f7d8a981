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
    factor_text,
    label_parts,
    load_timeline,
    plural,
)

DPI = 110
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


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
MANY_RUNS = 12  # more runs than this: legends below the plot, in columns, abbreviated


def _floors(ax: Any, table: pd.DataFrame) -> None:
    """One dashed AU floor per floor value, named by the workloads it belongs to."""
    for floor in sorted(table["au_floor"].dropna().unique()):
        names = sorted({str(w) for w in table.loc[table["au_floor"] == floor, "workload"]})
        ax.axhline(100 * floor, color="grey", linestyle="--", linewidth=1,
                   label=f"AU floor {100 * floor:g} % ({', '.join(names)})")


def _spans_decades(values: pd.Series) -> bool:
    """Positive values whose largest is at least 100 times their smallest."""
    positive = values[values > 0]
    return len(positive) > 1 and positive.max() >= 100 * positive.min()


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
    fig = Figure(figsize=(13, 4.6), layout="constrained")
    axes = fig.subplots(1, 3)
    for n, g in enumerate(groups):
        named = {str(v) for v in g.get("user_label", pd.Series(dtype=str)) if v}
        label = (named.pop() if len(named) == 1 else  # the sweep's own name for the series
                 "; ".join(factor_text(f, g.iloc[0]) for f in varying)
                 or str(g["workload"].iloc[0]))
        by = g.groupby("ranks")[[c for c, _, _ in METRICS]].mean()
        marker = MARKERS[n % len(MARKERS)]
        for ax, (col, _, scale) in zip(axes, METRICS, strict=True):
            line = ax.plot(by.index, by[col] * scale, marker=marker, markersize=7,
                           markerfacecolor="none" if n % 2 else None, label=_wrap(label, 40),
                           zorder=3 + len(groups) - n)[0]
            if col != "au":  # ideal scaling: the smallest run's rate per rank, times ranks
                first = by.index[0]
                ax.plot(by.index, by[col].iloc[0] * scale * by.index / first, linestyle=":",
                        color=line.get_color(), linewidth=1,
                        label="ideal: linear from the fewest ranks" if n == 0 else None)
    ranks = sorted(int(r) for r in t["ranks"].unique())
    for ax, (col, ylabel, _) in zip(axes, METRICS, strict=True):
        ax.set_xlabel("ranks (emulated accelerators)")
        ax.set_ylabel(ylabel)
        if ranks[-1] >= 8 * ranks[0]:
            ax.set_xscale("log", base=2)
        ax.set_xticks(ranks, [str(r) for r in ranks])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        if col != "au" and _spans_decades(t[col]):
            ax.set_yscale("log")  # BERT's 0.1 MB/s next to UNet3D's GB/s
            ax.set_ylabel(ylabel + ", log scale")
        else:
            ax.set_ylim(bottom=0)
    _floors(axes[0], t)
    axes[0].set_ylim(0, 105)
    axes[0].set_title("accelerator utilization")
    axes[1].set_title("samples consumed per second")
    axes[2].set_title("bytes read per second")
    handles, labels = axes[0].get_legend_handles_labels()
    ideal = [(h, lab) for h, lab in zip(*axes[1].get_legend_handles_labels(), strict=True)
             if lab.startswith("ideal")]
    handles, labels = handles + [h for h, _ in ideal], labels + [lab for _, lab in ideal]
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)))
    repeated = any(g["ranks"].duplicated().any() for g in groups)
    fig.suptitle(title + (" (mean of repeated runs)" if repeated else ""))
    note = f"{len(groups)} line(s); runs equal in everything but the rank count share a line."
    return Plot("scaling", title, _save(fig, out, "scaling"), note)


# (column, panel title, axis label, scale, digits) of the comparison's panels
BARS = (("au", "accelerator utilization", "AU (%)", 100.0, 1),
        ("samples_per_s", "samples consumed per second", "samples/s", 1.0, 0),
        ("mb_per_s", "bytes read per second", "read MB/s (MB = $10^6$ bytes)", 1.0, 0),
        ("wait_p99_ms", "99th percentile of the wait for a batch", "wait p99 (ms)", 1.0, 2))


def _value_names(rs: RunSet, factor: tuple[str, ...]) -> list[str]:
    """Each run's name for its value of ``factor``: the sweep's label for it, else
    ``key=value`` of its telling keys."""
    return label_parts(rs.table, factor) or [factor_text(factor, row)
                                             for _, row in rs.table.iterrows()]


def _groups_and_bars(rs: RunSet) -> tuple[list[str], list[str]]:
    """Per run: the group it is drawn in and its bar's name within the group.

    With one setting differing, each run is its own group. With several that form a full
    grid (every combination ran), the setting with the most values makes the groups (loaders)
    and the others name the bars (thread counts); otherwise each run is its own group.
    """
    t = rs.table
    if len(rs.factors) < 2:
        return list(t["label"]), [""] * len(t)
    named = {f: _value_names(rs, f) for f in rs.factors}
    outer = max(rs.factors, key=lambda f: len(set(named[f])))
    rest = [f for f in rs.factors if f != outer]
    bars = [" / ".join(named[f][i] for f in rest) for i in range(len(t))]
    if t["ranks"].nunique() > 1:
        bars = [" / ".join(p for p in (b, plural(r, "rank")) if p)
                for b, r in zip(bars, t["ranks"], strict=True)]
    groups = named[outer]
    if len(set(zip(groups, bars, strict=True))) < len(set(groups)) * len(set(bars)):
        return list(t["label"]), [""] * len(t)  # not a full grid: a bar per run reads better
    return groups, bars


def _order(t: pd.DataFrame, bar: str) -> tuple[Any, ...]:
    """Bars in the order of their settings' values (1 thread before 4), numbers first."""
    rows = t[t["bar"] == bar]
    row = rows.iloc[0]
    keys = [c for c in t.columns if "." in c and t[c].map(str).nunique() > 1
            and rows[c].map(str).nunique() == 1]  # the settings this bar stands for
    out: list[Any] = []
    for key in keys:
        value = row[key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        out.append((0, float(value), "") if number else (1, 0.0, str(value)))
    return tuple(out)


def comparison(rs: RunSet, out: Path) -> Plot:
    """One bar chart per metric (AU with its floor, samples/s, MB/s, wait p99): a group of
    bars per value of the setting with most values, a bar per value of the other settings,
    named by the sweep's labels or the short description of what sets each apart."""
    title = "Comparison of the runs"
    t = rs.table.copy()
    if not rs.factors:
        why = ("there is only one run" if len(rs.runs) == 1 else
               "the runs do not differ in any setting but the rank count")
        return Plot("comparison", title, None, f"Not drawn: {why}.")
    computes = t["compute_s_per_batch"].fillna(0) > 0
    t.loc[~computes, "au"] = np.nan  # AU means nothing without emulated compute
    t["group"], t["bar"] = _groups_and_bars(rs)
    cols = [c for c, *_ in BARS] + ["au_floor"]
    points = t.groupby(["group", "bar"], sort=False)[cols].mean()
    groups = list(dict.fromkeys(t["group"]))
    bars = sorted(dict.fromkeys(t["bar"]), key=lambda b: _order(t, b))
    panels = [b for b in BARS if computes.any() or b[0] != "au"]
    width = max(8.0, 1.0 + (1.6 if len(bars) == 1 else 0.55 * len(bars) + 0.6) * len(groups))
    fig = Figure(figsize=(width, 2.7 * len(panels) + 0.8 + 0.25 * (len(bars) > 1)),
                 layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    x = np.arange(len(groups))
    for ax, (col, panel, ylabel, scale, digits) in zip(axes, panels, strict=True):
        values_of = {bar: np.array([points.loc[(g, bar), col] * scale
                                    if (g, bar) in points.index else np.nan for g in groups])
                     for bar in bars}
        floors_of = {bar: np.array([points.loc[(g, bar), "au_floor"]
                                    if (g, bar) in points.index else np.nan for g in groups])
                     for bar in bars}
        # bars with no value anywhere (AU of read-bound runs) leave no empty slot
        shown = [b for b in bars if not np.isnan(values_of[b]).all()] or bars
        slot = 0.8 / len(shown)
        for k, bar in enumerate(shown):
            j = bars.index(bar)  # the same colour in every panel
            values = values_of[bar]
            below = (col == "au") & (values < 100 * np.nan_to_num(floors_of[bar]))
            if len(bars) == 1:
                colors: Any = (["#d62728" if b else "#2ca02c" for b in below] if col == "au"
                               else "#1f77b4")
            else:
                colors = f"C{j % 10}"
            drawn = ax.bar(x + (k - (len(shown) - 1) / 2) * slot, np.nan_to_num(values),
                           width=slot * 0.92, color=colors,
                           hatch=["//" if b and len(bars) > 1 else "" for b in below],
                           edgecolor="white", label=bar or None)
            ax.bar_label(drawn, [f"{v:,.{digits}f}" if v == v else "n/a" for v in values],
                         fontsize=7 if len(shown) > 2 else 8, padding=2)
        if col == "au":
            _floors(ax, t[computes])
            ax.set_ylim(0, 112)
        ax.set_xticks(x, [_wrap(g, 16) for g in groups], fontsize=9)
        ax.set_title(panel, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.15)
    # one legend under the figure: the bars' names (several per group) and the AU floors
    handles, labels = axes[-1].get_legend_handles_labels() if len(bars) > 1 else ([], [])
    if panels[0][0] == "au":
        floors = [(h, lab) for h, lab in zip(*axes[0].get_legend_handles_labels(), strict=True)
                  if lab.startswith("AU floor")]
        handles, labels = handles + [h for h, _ in floors], labels + [lab for _, lab in floors]
    if labels:
        fig.legend(handles, labels, loc="outside lower center", fontsize=9,
                   ncols=min(4, len(labels)))
    fig.suptitle(title)
    floor_rule = ("AU bars hatched below the AU floor." if len(bars) > 1 else
                  "AU bars green at or above the AU floor, red below it.")
    note = ("A group of bars per value of the setting with the most values, a bar per value "
            "of the others; " if len(bars) > 1 else "A bar per run; ")
    note += "runs with the same name averaged. "
    note += (floor_rule + (" No AU for runs without emulated compute (n/a)."
                           if not computes.all() else "") if computes.any() else
             "No AU panel: the runs emulate no compute (0 s per batch), so they measure the "
             "storage and client alone.")
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
        name = textwrap.shorten(label, 38, placeholder="...") if many else _wrap(label, 45)
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
