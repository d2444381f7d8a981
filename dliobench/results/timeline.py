"""Per-step spans of one rank on the monotonic clock: wait, compute, comm, checkpoint."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

COLUMNS = ("rank", "epoch", "step", "t_start_s", "wait_s", "compute_s", "comm_s", "ckpt_s",
           "samples", "bytes", "counted")


class Timeline:
    """Rows of (epoch, step, t_start, wait, compute, comm, ckpt, samples, bytes) for one rank.

    ``t_start_s`` is seconds since the run's start on this rank (``time.perf_counter``).
    """

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.rows: list[tuple[int, int, float, float, float, float, float, int, int]] = []

    def record(self, epoch: int, step: int, t_start: float, wait: float, compute: float,
               samples: int, nbytes: int, comm: float = 0.0, ckpt: float = 0.0) -> None:
        """Add one step."""
        self.rows.append((epoch, step, t_start, wait, compute, comm, ckpt, samples, nbytes))

    def epoch_arrays(self, epoch: int) -> dict[str, np.ndarray]:
        """Columns of one epoch's steps as arrays (keys as in COLUMNS without rank/epoch)."""
        rows = [r for r in self.rows if r[0] == epoch]
        return columns_of(rows)

    def epochs(self) -> list[int]:
        """Epochs that have at least one step, in order."""
        return sorted({r[0] for r in self.rows})

    def by_epoch(self) -> dict[int, dict[str, np.ndarray]]:
        """``epoch_arrays`` of every epoch, in order, from one pass over the rows (one
        ``epoch_arrays`` per epoch scans them all each time: epochs x steps)."""
        groups: dict[int, list[tuple[int, int, float, float, float, float, float, int, int]]] = {}
        for row in self.rows:
            groups.setdefault(row[0], []).append(row)
        return {epoch: columns_of(groups[epoch]) for epoch in sorted(groups)}


def columns_of(rows: list[tuple[int, int, float, float, float, float, float, int, int]]
               ) -> dict[str, np.ndarray]:
    """Turn timeline rows into named column arrays."""
    table = np.array([r[1:] for r in rows], dtype=np.float64).reshape(-1, 8)
    names = ("step", "t_start_s", "wait_s", "compute_s", "comm_s", "ckpt_s", "samples", "bytes")
    return {name: table[:, i] for i, name in enumerate(names)}


def write_csv(path: Path, timelines: list[Timeline], exclude_start: int = 0,
              exclude_end: int = 0) -> None:
    """Write all ranks' steps to one CSV (the ``timeline.csv`` of a run); ``counted`` is 1
    for the steps the metrics count (each epoch's steps but the first ``exclude_start`` and
    the last ``exclude_end``)."""
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(COLUMNS)
        for tl in timelines:
            per_epoch: dict[int, int] = {}
            for row in tl.rows:
                per_epoch[row[0]] = per_epoch.get(row[0], 0) + 1
            seen: dict[int, int] = {}
            for e, s, t, w, c, m, k, n, b in tl.rows:
                index = seen[e] = seen.get(e, -1) + 1
                counted = exclude_start <= index < per_epoch[e] - exclude_end
                out.writerow((tl.rank, e, s, f"{t:.6f}", f"{w:.6f}", f"{c:.6f}", f"{m:.6f}",
                              f"{k:.6f}", n, b, int(counted)))
