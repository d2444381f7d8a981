"""The scaling figure: throughput and AU against the number of ranks, a line per set of runs
equal in everything but the rank count, with the linear line and the demand at the AU floor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from dliobench.report.labels import describe
from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, floors, wrap
from dliobench.report.runs import RunSet

# (column, axis label, scale to plot units)
METRICS = (("au", "AU (%)", 100.0), ("samples_per_s", "samples/s", 1.0),
           ("mb_per_s", "read MB/s (MB = $10^6$ bytes)", 1.0))


def _key(table: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One string per row identifying its values of ``columns`` (for grouping)."""
    if not columns:
        return pd.Series([""] * len(table), index=table.index)
    return table[columns].map(str).agg(" | ".join, axis=1)


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# solid, dashed, dash-dot-dot, long dash: none is the dotted ideal line or the dash-dotted
# demand line
LINESTYLES = ("-", "--", (0, (3, 1, 1, 1, 1, 1)), (0, (8, 2)))
SHIFT = 0.035  # a line's sideways offset, as a share of a doubling of the rank count


def offsets(ranks: pd.Index, n: int, lines: int) -> np.ndarray:
    """Line ``n``'s rank counts shifted a little sideways (multiplied by 2**(SHIFT x its place
    around the middle line), so on a log axis too), so that lines with equal values (4 read
    threads exactly where 1 is) stay side by side rather than one under the other."""
    return np.asarray(ranks, dtype=float) * 2 ** (SHIFT * (n - (lines - 1) / 2))


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
        x = offsets(by.index, n, len(groups))
        for ax, (col, _, scale) in zip(axes, METRICS, strict=True):
            line = ax.plot(x, by[col] * scale, marker=MARKERS[n % len(MARKERS)],
                           markersize=7, markerfacecolor="none" if n % 2 else None,
                           linestyle=LINESTYLES[n % len(LINESTYLES)],
                           label=wrap(label, 40), zorder=3 + len(groups) - n)[0]
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
    floors(axes[0], t)
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
    shifted = (" Lines are drawn a little apart sideways (and with their own markers and "
               "dashes), so equal lines stay visible; the tick marks the rank count."
               if len(groups) > 1 else "")
    return fig, (f"{len(groups)} line(s); runs equal in everything but the rank count share a "
                 f"line.{shifted} Dotted: linear from the fewest ranks; dash-dotted: the demand "
                 "at the AU floor (what the ranks must consume to meet it; MB/s at the bytes per "
                 "sample read).")


def scaling(rs: RunSet, out: Path) -> Plot:
    """The scaling figure as scaling.png, or the reason it is not drawn."""
    title = "Scaling with the number of ranks"
    fig, note = scaling_figure(rs)
    if fig is None:
        return Plot("scaling", title, None, note)
    return Plot("scaling", title, figure.save(fig, out, "scaling"), note)
