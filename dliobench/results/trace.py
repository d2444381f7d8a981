"""A run's timeline as a Chrome / Perfetto trace (``trace.json``, Trace Event Format).

One process per rank (``pid`` = rank, named "rank N (host)"), one thread (``tid`` 0, the
training loop), and per step "X" (complete) events ``wait``, ``compute``, ``comm``, ``ckpt``
laid end to end from the step's start, times in microseconds since the rank's training start.
Open it in https://ui.perfetto.dev or chrome://tracing. Made from the result files only, so it
can be written after the fact (``dliobench report --trace RUN_DIR``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError
from dliobench.results.files import read_result
from dliobench.storage.atomic import write_json_atomic

SPANS = (("wait", "wait_s"), ("compute", "compute_s"), ("comm", "comm_s"), ("ckpt", "ckpt_s"))
US = 1e6


def _metadata(rank: int, host: str) -> list[dict[str, Any]]:
    """Name and order the rank's process and its training-loop thread."""
    return [
        {"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
         "args": {"name": f"rank {rank} ({host})"}},
        {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0,
         "args": {"sort_index": rank}},
        {"name": "thread_name", "ph": "M", "pid": rank, "tid": 0,
         "args": {"name": "training loop"}},
    ]


def _step_events(row: dict[str, str]) -> list[dict[str, Any]]:
    """The spans of one timeline row, end to end from the step's start."""
    rank = int(row["rank"])
    at = float(row["t_start_s"]) * US
    args = {"epoch": int(row["epoch"]), "step": int(row["step"]),
            "samples": int(row["samples"]), "bytes": int(row["bytes"])}
    events = []
    for name, column in SPANS:
        dur = float(row[column]) * US
        if dur > 0:
            events.append({"name": name, "cat": "step", "ph": "X", "ts": round(at, 3),
                           "dur": round(dur, 3), "pid": rank, "tid": 0, "args": args})
        at += dur
    return events


def trace_events(run_dir: str | Path) -> dict[str, Any]:
    """The trace document of a run folder (from its timeline.csv and result.json)."""
    run_dir = Path(run_dir)
    result = read_result(run_dir)
    hosts = {int(r["rank"]): str(r.get("host", "?")) for r in result.get("ranks") or []}
    events: list[dict[str, Any]] = []
    seen: set[int] = set()
    if not (run_dir / "timeline.csv").is_file():
        raise DlioBenchError(f"{run_dir}: no timeline.csv, so no trace (the run took no step)")
    with open(run_dir / "timeline.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            rank = int(row["rank"])
            if rank not in seen:
                seen.add(rank)
                events.extend(_metadata(rank, hosts.get(rank, "?")))
            events.extend(_step_events(row))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run_id": result.get("run_id", run_dir.name),
                          "workload": result.get("workload"),
                          "dliobench_version": result.get("dliobench_version"),
                          "commit": result.get("commit")}}


def write_trace(run_dir: str | Path, path: Path | None = None) -> Path:
    """Write the run's trace to ``path`` (default ``<run_dir>/trace.json``); return it."""
    path = path or Path(run_dir) / "trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, trace_events(run_dir), indent=None)
    return path
