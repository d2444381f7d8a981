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
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from dliobench.report.tables import (
    Run,
    RunSet,
    counted_mask,
    describe,
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


DEMAND = "demand at the AU floor: ranks x batch x floor / compute per batch"


def _demand(g: pd.DataFrame, col: str) -> pd.Series | None:
    """What a group's ranks must consume to run at the AU floor, per rank count: samples/s,
    or MB/s at the bytes per sample the runs actually read. None without emulated compute."""
    row = g.iloc[0]
    compute, floor, batch = row["compute_s_per_batch"], row["au_floor"], row["batch"]
    if not compute or compute != compute or floor != floor or not batch:
        return None
    ranks = np.array(sorted(g["ranks"].unique()), dtype=float)
    samples = pd.Series(ranks * float(batch) * float(floor) / float(compute), index=ranks)
    if col == "samples_per_s":
        return samples
    per_sample = (g["mb_per_s"] / g["samples_per_s"]).mean()  # MB actually read per sample
    return None if per_sample != per_sample else samples * per_sample


def _scaling_lines(axes: Any, groups: list[pd.DataFrame], names: list[str]) -> None:
    """Per group: its measured line, the ideal-linear line from its fewest ranks and the
    demand at its AU floor (the last two in the line's colour, dotted and dash-dotted)."""
    demand_drawn = False
    for n, (g, label) in enumerate(zip(groups, names, strict=True)):
        by = g.groupby("ranks")[[c for c, _, _ in METRICS]].mean()
        for ax, (col, _, scale) in zip(axes, METRICS, strict=True):
            line = ax.plot(by.index, by[col] * scale, marker=MARKERS[n % len(MARKERS)],
                           markersize=7, markerfacecolor="none" if n % 2 else None,
                           label=_wrap(label, 40), zorder=3 + len(groups) - n)[0]
            if col == "au":
                continue
            ax.plot(by.index, by[col].iloc[0] * scale * by.index / by.index[0], linestyle=":",
                    color=line.get_color(), linewidth=1,
                    label="ideal: linear from the fewest ranks" if n == 0 else None)
            need = _demand(g, col)
            if need is not None:
                ax.plot(need.index, need * scale, linestyle="-.", color=line.get_color(),
                        linewidth=1.2, alpha=0.8, label=None if demand_drawn else DEMAND)
                demand_drawn = demand_drawn or col == METRICS[-1][0]


def _scaling_axes(axes: Any, t: pd.DataFrame) -> None:
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
    for ax, text in zip(axes, ("accelerator utilization", "samples consumed per second",
                               "bytes read per second"), strict=True):
        ax.set_title(text)


def _series_names(rs: RunSet, groups: list[pd.DataFrame]) -> list[str]:
    """A line's name: the sweep's own name for the series, else what tells its runs from the
    other lines' (only what differs, shortest first), else the workload."""
    varying = [f for f in rs.factors if len({str(g[f[0]].iloc[0]) for g in groups}) > 1]
    firsts = pd.DataFrame([g.iloc[0] for g in groups]).reset_index(drop=True)
    names = []
    for n, g in enumerate(groups):
        named = {str(v) for v in g.get("user_label", pd.Series(dtype=str)) if v}
        names.append(named.pop() if len(named) == 1 else
                     describe(firsts, varying, n) or str(g["workload"].iloc[0]))
    return names


def scaling_figure(rs: RunSet) -> tuple[Figure | None, str]:
    """AU, samples/s and MB/s against ranks, one line per group of otherwise equal runs;
    or None and why it is not drawn."""
    t = rs.table
    cols = [f[0] for f in rs.factors]
    groups = [g for _, g in t.groupby(_key(t, cols), sort=False) if g["ranks"].nunique() > 1]
    if not groups:
        why = ("there is only one run" if len(t) == 1 else
               "no set of runs equal in everything but the rank count spans several rank counts")
        return None, f"Not drawn: {why}."
    fig = Figure(figsize=(13, 4.6), layout="constrained")
    axes = fig.subplots(1, 3)
    _scaling_lines(axes, groups, _series_names(rs, groups))
    _scaling_axes(axes, t)
    handles, labels = axes[0].get_legend_handles_labels()
    ideal = [(h, lab) for h, lab in zip(*axes[2].get_legend_handles_labels(), strict=True)
             if lab.startswith("ideal") or lab == DEMAND]
    handles, labels = handles + [h for h, _ in ideal], labels + [lab for _, lab in ideal]
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)))
    repeated = any(g["ranks"].duplicated().any() for g in groups)
    fig.suptitle("Scaling with the number of ranks" +
                 (" (mean of repeated runs)" if repeated else ""))
    return fig, (f"{len(groups)} line(s); runs equal in everything but the rank count share a "
                 "line. Dotted: linear from the fewest ranks; dash-dotted: the demand at the AU "
                 "floor (what the ranks must consume to meet it; MB/s at the bytes per sample "
                 "read).")


def scaling(rs: RunSet, out: Path) -> Plot:
    """The scaling figure as scaling.png, or the reason it is not drawn."""
    title = "Scaling with the number of ranks"
    fig, note = scaling_figure(rs)
    if fig is None:
        return Plot("scaling", title, None, note)
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


def _comparison_rows(rs: RunSet) -> tuple[pd.DataFrame | None, str]:
    """The runs the comparison draws (those with a training figure; AU only where compute
    was emulated), each with its group and bar; or None and why nothing is drawn."""
    if not rs.factors:
        return None, ("there is only one run" if len(rs.runs) == 1 else
                      "the runs do not differ in any setting but the rank count")
    t = rs.table.copy()
    t.loc[~(t["compute_s_per_batch"].fillna(0) > 0), "au"] = np.nan  # no compute: no AU
    t["group"], t["bar"] = _groups_and_bars(rs)
    measured = t[[c for c, *_ in BARS]].notna().any(axis=1)
    left_out = "" if measured.all() else (
        f"{plural(int((~measured).sum()), 'run')} without training figures (checkpoint-only: "
        "see the checkpoint figure) left out. ")
    t = t[measured]
    if len(t) < 2:
        return None, (f"{'no run' if t.empty else 'only one run'} read training data (the "
                      "checkpoint figure shows checkpoint-only runs)")
    return t, left_out


def _panel(ax: Any, t: pd.DataFrame, points: pd.DataFrame, bars: list[str],
           spec: tuple[str, str, str, float, int]) -> None:
    """One metric's bars: a group per value of the outer setting, a bar per other value."""
    col, panel, ylabel, scale, digits = spec
    groups = list(dict.fromkeys(t["group"]))
    x = np.arange(len(groups))

    def per_group(bar: str, column: str, factor: float) -> np.ndarray:
        return np.array([points.loc[(g, bar), column] * factor if (g, bar) in points.index
                         else np.nan for g in groups])
    # bars with no value anywhere (AU of read-bound runs) leave no empty slot
    shown = [b for b in bars if not np.isnan(per_group(b, col, scale)).all()] or bars
    slot = 0.8 / len(shown)
    for k, bar in enumerate(shown):
        values = per_group(bar, col, scale)
        below = (col == "au") & (values < 100 * np.nan_to_num(per_group(bar, "au_floor", 1)))
        colors: Any = f"C{bars.index(bar) % 10}"  # the same colour in every panel
        if len(bars) == 1:
            colors = ["#d62728" if b else "#2ca02c" for b in below] if col == "au" \
                else "#1f77b4"
        drawn = ax.bar(x + (k - (len(shown) - 1) / 2) * slot, np.nan_to_num(values),
                       width=slot * 0.92, color=colors,
                       hatch=["//" if b and len(bars) > 1 else "" for b in below],
                       edgecolor="white", label=bar or None)
        ax.bar_label(drawn, [f"{v:,.{digits}f}" if v == v else "n/a" for v in values],
                     fontsize=7 if len(shown) > 2 else 8, padding=2)
    if col == "au":
        _floors(ax, t[t["au"].notna()])
        ax.set_ylim(0, 112)
    ax.set_xticks(x, [_wrap(g, 16) for g in groups], fontsize=9)
    ax.set_title(panel, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.margins(y=0.15)


def comparison_figure(rs: RunSet) -> tuple[Figure | None, str]:
    """The comparison's figure and caption, or None and why it is not drawn. A panel per
    metric some run has a value of: no panel of n/a bars only."""
    t, left_out = _comparison_rows(rs)
    if t is None:
        return None, f"Not drawn: {left_out}."
    cols = [c for c, *_ in BARS] + ["au_floor"]
    points = t.groupby(["group", "bar"], sort=False)[cols].mean()
    groups = list(dict.fromkeys(t["group"]))
    bars = sorted(dict.fromkeys(t["bar"]), key=lambda b: _order(t, b))
    panels = [b for b in BARS if t[b[0]].notna().any()]
    width = max(8.0, 1.0 + (1.6 if len(bars) == 1 else 0.55 * len(bars) + 0.6) * len(groups))
    fig = Figure(figsize=(width, 2.7 * len(panels) + 0.8 + 0.25 * (len(bars) > 1)),
                 layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, spec in zip(axes, panels, strict=True):
        _panel(ax, t, points, bars, spec)
    # one legend under the figure: the bars' names (several per group) and the AU floors
    handles, labels = axes[-1].get_legend_handles_labels() if len(bars) > 1 else ([], [])
    if panels[0][0] == "au":
        floors = [(h, lab) for h, lab in zip(*axes[0].get_legend_handles_labels(), strict=True)
                  if lab.startswith("AU floor")]
        handles, labels = handles + [h for h, _ in floors], labels + [lab for _, lab in floors]
    if labels:
        fig.legend(handles, labels, loc="outside lower center", fontsize=9,
                   ncols=min(4, len(labels)))
    fig.suptitle("Comparison of the runs")
    return fig, left_out + _comparison_note(t, len(bars))


def _comparison_note(t: pd.DataFrame, bars: int) -> str:
    computes = t["au"].notna()
    floor_rule = ("AU bars hatched below the AU floor." if bars > 1 else
                  "AU bars green at or above the AU floor, red below it.")
    note = ("A group of bars per value of the setting with the most values, a bar per value "
            "of the others; " if bars > 1 else "A bar per run; ")
    note += "runs with the same name averaged. "
    return note + (floor_rule + (" No AU for runs without emulated compute (n/a)."
                                 if not computes.all() else "") if computes.any() else
                   "No AU panel: the runs emulate no compute (0 s per batch), so they measure "
                   "the storage and client alone.")


def comparison(rs: RunSet, out: Path) -> Plot:
    """One bar chart per metric (AU with its floor, samples/s, MB/s, wait p99): a group of
    bars per value of the setting with most values, a bar per value of the other settings,
    named by the sweep's labels or the short description of what sets each apart."""
    title = "Comparison of the runs"
    fig, note = comparison_figure(rs)
    if fig is None:
        return Plot("comparison", title, None, note)
    return Plot("comparison", title, _save(fig, out, "comparison"), note)


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


UNCOUNTED = "steps not counted (pale, hatched: metric.exclude_start_steps / exclude_end_steps)"


def _spans(ax: Any, rows: pd.DataFrame, y: int, present: set[str], counted: bool,
           first: bool) -> None:
    """One rank's steps as wait, then compute, comm and checkpoint spans; the steps the
    metrics leave out pale and hatched, so their waits do not read as counted ones."""
    begin = rows["t_start_s"].to_numpy()
    for col, label, color in SPANS:
        dur = rows[col].to_numpy()
        keep = dur > 0
        if col in present and keep.any():
            style: dict[str, Any] = ({"facecolors": color, "label": label if first else None}
                                     if counted else
                                     {"facecolors": color, "alpha": 0.3, "hatch": "////",
                                      "edgecolor": "grey", "linewidth": 0})
            ax.broken_barh(list(zip(begin[keep], dur[keep], strict=True)), (y - 0.4, 0.8),
                           gid=f"{col}:{'counted' if counted else 'uncounted'}", **style)
        begin = begin + dur


def _draw_timeline(ax: Any, timeline: pd.DataFrame, counted: pd.Series,
                   hosts: dict[int, str]) -> list[Any]:
    """A row per rank; returns the legend's handles (a span kind each, then uncounted)."""
    ranks = sorted(timeline["rank"].unique())
    present = {col for col, _, _ in SPANS if (timeline[col] > 0).any()}
    for y, rank in enumerate(ranks):
        mine = timeline["rank"] == rank
        _spans(ax, timeline[mine & counted], y, present, True, first=True)
        _spans(ax, timeline[mine & ~counted], y, present, False, first=False)
    ax.set_yticks(range(len(ranks)), [f"rank {r} ({hosts.get(int(r), '?')})" for r in ranks],
                  fontsize=10 if len(ranks) <= 24 else 6)
    ax.invert_yaxis()
    handles = {h.get_label(): h for h in ax.get_legend_handles_labels()[0]}
    out = [handles[label] for _, label, _ in SPANS if label in handles]
    if not counted.all():
        out.append(Patch(facecolor="#dddddd", hatch="////", edgecolor="grey", label=UNCOUNTED))
    return out


def timeline_figure(run: Run, data: pd.DataFrame) -> Figure:
    """The timeline of ``run`` (its timeline.csv as ``data``) as a figure."""
    hosts = {int(r["rank"]): str(r.get("host", "?")) for r in run.result.get("ranks") or []}
    n = data["rank"].nunique()
    fig = Figure(figsize=(13, 1.8 + min(0.45 * n, 14)), layout="constrained")
    ax = fig.subplots()
    handles = _draw_timeline(ax, data, counted_mask(run, data), hosts)
    for t in data[data["step"] == 0].groupby("epoch")["t_start_s"].min():
        ax.axvline(t, color="black", linewidth=0.8, alpha=0.5)
    ax.set_xlabel("seconds since the start of training (vertical lines: epoch starts)")
    fig.legend(handles=handles, loc="outside lower center", ncols=min(5, len(handles)))
    ax.set_title(f"Step timeline of {run.run_id} ({plural(n, 'rank')})")
    return fig


def timeline(rs: RunSet, out: Path, run_id: str | None = None) -> Plot:
    """Stacked wait / compute / comm / checkpoint spans along time, a row per rank."""
    if run_id is None:  # the last run that has steps (checkpoint-only runs have none)
        stepped = [r for r in rs.runs if (r.path / "timeline.csv").is_file()] or rs.runs
        run = stepped[-1]
    else:
        run = next(r for r in rs.runs if r.run_id == run_id)
    title = f"Step timeline of {run.run_id}"
    data = load_timeline(run)
    if data is None or data.empty:
        return Plot("timeline", title, None, f"Not drawn: {run.run_id} has no timeline.csv.")
    fig = timeline_figure(run, data)
    note = ("Each step is drawn as its wait, then compute, comm and checkpoint time; the "
            "steps the metrics leave out (timeline.csv column counted = 0) pale and hatched.")
    return Plot("timeline", title, _save(fig, out, "timeline"), note)
