"""The report's checkpoint figure: per checkpoint-only run, a write bar and a read bar (the
mean GB/s of its checkpoints) with each checkpoint's GB/s as a dot on its bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, wrap
from dliobench.report.runs import RunSet

OPS = (("write", "#1f77b4"), ("read", "#ff7f0e"))
WIDTH = 0.38


def _rates(result: Any, op: str) -> list[float]:
    """GB/s of each checkpoint the run wrote (``op="write"``) or read."""
    rows = ((result.get("checkpoint") or {}).get(op) or {}).get("checkpoints") or []
    return [r["aggregate_bytes_per_s"] / 1e9 for r in rows if r.get("aggregate_bytes_per_s")]


def checkpoints(rs: RunSet, out: Path) -> Plot:
    """Aggregate GB/s (the checkpoint's bytes over its slowest rank's time) of the writes and
    reads of each checkpoint-only run: a bar of their mean per direction, a dot per
    checkpoint, the runs named by their labels along the x axis."""
    title = "Checkpoints: GB/s of each write and read"
    drawn = [(run, label) for run, label in zip(rs.runs, rs.table["label"], strict=True)
             if (run.result.get("checkpoint") or {}).get("workflow") == "checkpoint-only"]
    if not drawn:
        return Plot("checkpoints", title, None, "Not drawn: no checkpoint-only run "
                    "(workflow.train: false, workflow.checkpoint: true).")
    fig = Figure(figsize=(max(6.0, 2.5 + 2.2 * len(drawn)), 4.8), layout="constrained")
    ax = fig.subplots()
    named: set[str] = set()  # legend entries drawn so far: each once

    def once(name: str) -> str | None:
        new = name not in named
        named.add(name)
        return name if new else None

    for k, (op, color) in enumerate(OPS):
        shift = (k - 0.5) * WIDTH
        for i, (run, _) in enumerate(drawn):
            rates = _rates(run.result, op)
            if not rates:
                continue
            mean = float(np.mean(rates))
            bar = ax.bar(i + shift, mean, WIDTH * 0.92, color=color, alpha=0.75,
                         label=once(f"{op}: mean"))
            ax.bar_label(bar, [f"{mean:,.3f}"], fontsize=8, padding=2)
            ax.plot(np.full(len(rates), i + shift), rates, "o", color="black", markersize=3.5,
                    label=once("one checkpoint"))
    ax.set_xticks(np.arange(len(drawn)), [wrap(label, 20) for _, label in drawn], fontsize=8)
    ax.set_xlim(-0.7, len(drawn) - 0.3)
    ax.set_ylabel("GB/s (GB = $10^9$ bytes), all ranks")
    ax.set_ylim(bottom=0)
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title)
    note = ("A bar per run and direction: the mean GB/s of its checkpoints; each dot is one "
            "checkpoint, its bytes over the slowest rank's time (MLPerf Storage's duration). "
            "Reads follow eviction unless the run says otherwise (column \"reads from "
            "storage\").")
    return Plot("checkpoints", title, figure.save(fig, out, "checkpoints"), note)
