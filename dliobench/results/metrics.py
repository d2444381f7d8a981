"""Pure functions from step timelines to the metrics docs/results.md defines ("What the numbers
mean").

AU (rank, epoch) = sum(compute) / wall time of the counted steps, where the counted steps
skip the first ``exclude_start`` and the last ``exclude_end`` steps of the epoch and the wall
time runs from the first counted step's start to the last counted step's end. Throughput uses
the same window. Numbers that cannot be computed (no counted step) are None, never a guess.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PERCENTILES = (50, 90, 99)


def window(n_steps: int, exclude_start: int, exclude_end: int) -> slice:
    """The counted steps of an epoch of ``n_steps`` steps (possibly empty)."""
    return slice(min(exclude_start, n_steps), max(min(exclude_start, n_steps),
                                                  n_steps - exclude_end))


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def epoch_metrics(cols: dict[str, np.ndarray], exclude_start: int,
                  exclude_end: int) -> dict[str, Any]:
    """Metrics of one rank's epoch from its timeline columns."""
    n = cols["step"].size
    span = cols["wait_s"] + cols["compute_s"] + cols["comm_s"] + cols["ckpt_s"]
    out: dict[str, Any] = {
        "first_step_s": float(span[0]) if n else None,
        "first_wait_s": float(cols["wait_s"][0]) if n else None,
        "total_steps": n,
    }
    win = window(n, exclude_start, exclude_end)
    counted = {k: v[win] for k, v in cols.items()}
    steps = counted["step"].size
    wall = 0.0
    if steps:
        wall = float(counted["t_start_s"][-1] + span[win][-1] - counted["t_start_s"][0])
    compute = float(counted["compute_s"].sum())
    samples = int(counted["samples"].sum())
    nbytes = int(counted["bytes"].sum())
    out.update({
        "steps": steps, "samples": samples, "bytes": nbytes, "wall_s": wall,
        "compute_s": compute, "comm_s": float(counted["comm_s"].sum()),
        "wait_s": float(counted["wait_s"].sum()), "ckpt_s": float(counted["ckpt_s"].sum()),
        "au": _ratio(compute, wall),
        "samples_per_s": _ratio(samples, wall),
        "bytes_per_s": _ratio(nbytes, wall),
    })
    out.update(wait_percentiles(counted["wait_s"]))
    return out


def wait_percentiles(waits: np.ndarray) -> dict[str, float | None]:
    """p50/p90/p99/max of per-step wait times (None when there are none)."""
    out: dict[str, float | None] = {}
    for p in PERCENTILES:
        out[f"wait_p{p}_s"] = float(np.percentile(waits, p)) if waits.size else None
    out["wait_max_s"] = float(waits.max()) if waits.size else None
    return out


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def rank_summary(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """One rank over all epochs: AU is the mean of epoch AUs; rates are totals over walls."""
    wall = sum(e["wall_s"] for e in epochs)
    samples = sum(e["samples"] for e in epochs)
    nbytes = sum(e["bytes"] for e in epochs)
    return {
        "au": _mean([e["au"] for e in epochs]),
        "steps": sum(e["steps"] for e in epochs),
        "samples": samples, "bytes": nbytes, "wall_s": wall,
        "compute_s": sum(e["compute_s"] for e in epochs),
        "comm_s": sum(e["comm_s"] for e in epochs),
        "wait_s": sum(e["wait_s"] for e in epochs),
        "ckpt_s": sum(e["ckpt_s"] for e in epochs),
        "samples_per_s": _ratio(samples, wall),
        "bytes_per_s": _ratio(nbytes, wall),
    }


def combine_ranks(per_rank_epochs: list[list[dict[str, Any]]],
                  counted_waits: np.ndarray) -> dict[str, Any]:
    """Run-level metrics: AU averaged over ranks and epochs, rates summed over ranks."""
    ranks = [rank_summary(epochs) for epochs in per_rank_epochs]
    all_epochs = [e for epochs in per_rank_epochs for e in epochs]
    rank_aus = [r["au"] for r in ranks if r["au"] is not None]
    rates = [r["samples_per_s"] for r in ranks]
    byte_rates = [r["bytes_per_s"] for r in ranks]
    out: dict[str, Any] = {
        "au": _mean([e["au"] for e in all_epochs]),
        "au_min": min(rank_aus) if rank_aus else None,
        "samples_per_s": sum(rates) if all(r is not None for r in rates) and rates else None,
        "bytes_per_s": sum(byte_rates) if all(r is not None for r in byte_rates) and byte_rates
        else None,
        "steps": sum(r["steps"] for r in ranks),
        "samples": sum(r["samples"] for r in ranks),
        "bytes": sum(r["bytes"] for r in ranks),
        "compute_s": sum(r["compute_s"] for r in ranks),
        "comm_s": sum(r["comm_s"] for r in ranks),
        "wait_s": sum(r["wait_s"] for r in ranks),
        "ckpt_s": sum(r["ckpt_s"] for r in ranks),
        "wall_s": sum(r["wall_s"] for r in ranks),
        "first_step_s": max((e[0]["first_step_s"] for e in per_rank_epochs
                             if e and e[0]["first_step_s"] is not None), default=None),
    }
    out.update(wait_percentiles(counted_waits))
    return out


STRAGGLER_FRACTION = 0.9


def stragglers(per_rank: list[dict[str, Any]]) -> list[int]:
    """Ranks whose samples/s fall below 90% of the median rank's: the ones holding others up."""
    rates = [r["samples_per_s"] for r in per_rank if r["samples_per_s"] is not None]
    if len(rates) < 2:
        return []
    median = float(np.median(rates))
    return [r["rank"] for r in per_rank
            if r["samples_per_s"] is not None and r["samples_per_s"] < STRAGGLER_FRACTION * median]
