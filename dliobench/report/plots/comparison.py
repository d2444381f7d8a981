"""The comparison figure: one bar chart per metric (AU with its floor, samples/s, MB/s, wait
p99), a group of bars per value of the setting with most values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from dliobench.report.labels import factor_text, label_parts, plural
from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, floors, wrap
from dliobench.report.runs import RunSet

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
        floors(ax, t[t["au"].notna()])
        ax.set_ylim(0, 112)
    ax.set_xticks(x, [wrap(g, 16) for g in groups], fontsize=9)
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
    return Plot("comparison", title, figure.save(fig, out, "comparison"), note)
