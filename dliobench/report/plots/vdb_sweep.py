"""The report's vector-database sweep curves (``vectordb.mode sweep``, run/vectordb/sweep.py),
from each run's ``vectordb.sweep`` points: QPS and p99 latency against concurrency (the
clients over all ranks), a line per run and search list; recall@k against QPS, a line per
run and concurrency, its points the search lists (the floor dashed)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from dliobench.report.plots import figure
from dliobench.report.plots.figure import Plot, label_axes, wrap

Runs = list[tuple[dict[str, Any], str]]


def _lines(runs: Runs, by: str) -> dict[str, list[dict[str, Any]]]:
    """The runs' sweep points grouped into lines by ``by`` (a label each)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for v, label in runs:
        for p in v.get("sweep") or []:
            name = f"{v.get('engine', '?')} {label}, {by.replace('_', ' ')} {p[by]}"
            out[name].append(p)
    return out


def concurrency(runs: Runs, out: Path) -> Plot:
    """QPS and p99 latency against the clients, a line per run and search list."""
    title = "Vector database: QPS and p99 latency against concurrency"
    fig = Figure(figsize=(10, 7), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    for i, (name, points) in enumerate(_lines(runs, "search_list").items()):
        points = sorted(points, key=lambda p: p["clients"])
        xs = [p["clients"] for p in points]
        top.plot(xs, [p["qps"] for p in points], "o-", color=f"C{i % 10}", label=wrap(name, 50))
        bottom.plot(xs, [p["p99_ms"] for p in points], "o-", color=f"C{i % 10}")
    top.set_ylabel("queries per second")
    top.grid(alpha=0.3)
    label_axes(fig, bottom, "", "concurrent clients (ranks x threads)", "p99 latency (ms)")
    top.set_title(title)
    bottom.set_xticks(sorted({p["clients"] for v, _ in runs for p in v.get("sweep") or []}))
    return Plot("vectordb_concurrency", title, figure.save(fig, out, "vectordb_concurrency"),
                "A point per sweep window; a line per run and search list (ef, nprobe).")


def recall_curve(runs: Runs, out: Path) -> Plot:
    """recall@k against QPS, a line per run and concurrency over its search lists."""
    title = "Vector database: recall@k against QPS over the search list"
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for i, (name, points) in enumerate(_lines(runs, "clients").items()):
        points = sorted(points, key=lambda p: p["search_list"])
        ax.plot([p["qps"] for p in points], [p["recall"] for p in points], "o-",
                color=f"C{i % 10}", label=wrap(name, 50))
        for p in points:
            ax.annotate(str(p["search_list"]), (p["qps"], p["recall"]), fontsize="x-small")
    for floor in {float(v.get("min_recall", 0)) for v, _ in runs}:
        ax.axhline(floor, color="grey", linestyle="--", linewidth=1)
    label_axes(fig, ax, title, "queries per second", "recall@k")
    return Plot("vectordb_recall_curve", title, figure.save(fig, out, "vectordb_recall_curve"),
                "Each point is labelled with its search list (ef, nprobe); dashed: the floor.")


def sweep_plots(runs: Runs, out: Path) -> list[Plot]:
    """The two curves, where a run holds a sweep."""
    if not any(v.get("sweep") for v, _ in runs):
        return []
    return [concurrency(runs, out), recall_curve(runs, out)]
