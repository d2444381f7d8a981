"""The timeline figure: each rank's steps along time as wait, compute, comm and checkpoint
spans, the steps the metrics leave out pale and hatched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from dliobench.report.labels import plural
from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot
from dliobench.report.runs import Run, RunSet, counted_mask, load_timeline

SPANS = (("wait_s", "wait (loader)", "#d62728"), ("compute_s", "compute", "#2ca02c"),
         ("comm_s", "comm (allreduce)", "#ff7f0e"), ("ckpt_s", "checkpoint", "#9467bd"))


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
    return Plot("timeline", title, figure.save(fig, out, "timeline"), note)
