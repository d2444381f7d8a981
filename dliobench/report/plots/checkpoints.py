"""The report's checkpoint figure: GB/s of every write and read, per repetition, per run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, wrap
from dliobench.report.runs import RunSet

OPS = (("write", "o-", "#1f77b4"), ("read", "s--", "#ff7f0e"))


def checkpoints(rs: RunSet, out: Path) -> Plot:
    """Aggregate GB/s (the checkpoint's bytes over its slowest rank's time) of each write
    and read, against the repetition, a line per run and direction."""
    title = "Checkpoints: GB/s per repetition, write vs read"
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    drawn = 0
    for i, (run, label) in enumerate(zip(rs.runs, rs.table["label"], strict=True)):
        ckpt = run.result.get("checkpoint") or {}
        if ckpt.get("workflow") != "checkpoint-only":
            continue
        for op, style, color in OPS:
            rows = (ckpt.get(op) or {}).get("checkpoints") or []
            rates = [r["aggregate_bytes_per_s"] or np.nan for r in rows]
            if not rates:
                continue
            ax.plot(np.arange(1, len(rates) + 1), np.array(rates) / 1e9, style,
                    color=color if len(rs.runs) == 1 else f"C{i % 10}",
                    label=wrap(f"{op}: {label}", 45))
            drawn += 1
    if not drawn:
        return Plot("checkpoints", title, None, "Not drawn: no checkpoint-only run "
                    "(workflow.train: false, workflow.checkpoint: true).")
    ax.set_xlabel("repetition (checkpoint written, then read)")
    ax.set_ylabel("GB/s (GB = $10^9$ bytes), all ranks")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(title)
    note = ("Each point is one checkpoint: its bytes over the slowest rank's time (MLPerf "
            "Storage's duration). Reads follow eviction unless the run says otherwise.")
    return Plot("checkpoints", title, figure.save(fig, out, "checkpoints"), note)
