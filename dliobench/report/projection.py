"""AU against accelerators for a workload, projected from a fit to real runs (``calibrate``).

n accelerators (ranks), each computing c seconds and reading s bytes per step, on a storage
of bandwidth B behind clients of ceiling C per rank: AU = min(1, c x min(C, B/n) / s). The
band is the same formula at the ends of B's and C's bands; when B is only a lower bound, so
is the AU (its band reaches what C allows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dliobench.config.schema import Config
from dliobench.errors import ConfigError
from dliobench.report.calibrate import Estimate, Fit, Point


@dataclass(frozen=True)
class Demand:
    """One accelerator of the workload: compute and bytes per step."""

    compute_s: float
    step_bytes: float
    floor: float
    source: str  # where the compute and bytes per step come from, in words


def demand(config: Config, points: list[Point]) -> Demand:
    """The workload's compute and bytes per step. Compute: what the runs measured per step
    when they emulated the same time per batch (the emulation's overshoot on these hosts is
    part of what a run measures), else ``train.computation_time``. Bytes: the batch times
    the bytes the runs read per sample when they read the same format and sample size, else
    times ``dataset.record_length_bytes``."""
    c, batch, d = config.train.computation_time, config.reader.batch_size, config.dataset
    if c <= 0:
        raise ConfigError(f"{config.name} has no compute time per batch "
                          f"(train.computation_time={c:g}), so it has no AU to project; pick "
                          "an accelerator with --accelerator, or set train.computation_time")
    timed = [p.compute_s for p in points if p.configured_compute_s == c and p.compute_s > 0]
    if timed:
        compute = sum(timed) / len(timed)
        said = f"{compute:.4g} s measured per step ({c:g} s asked)"
    else:
        compute, said = c, f"{c:g} s per step (train.computation_time)"
    same = [p.sample_bytes for p in points if p.dataset == (d.format, d.record_length_bytes)]
    if same:
        return Demand(compute, batch * sum(same) / len(same), config.metric.au,
                      f"{said}; {batch} x the bytes per sample the runs read")
    return Demand(compute, batch * d.record_length_bytes, config.metric.au,
                  f"{said}; {batch} x dataset.record_length_bytes (no run read this format "
                  "and sample size)")


def au(d: Demand, n: int, bandwidth: float, ceiling: float) -> float:
    """AU = min(1, c x min(C, B/n) / s)."""
    return min(1.0, d.compute_s * min(ceiling, bandwidth / n) / d.step_bytes)


def _c(fit: Fit) -> Estimate:
    return fit.ceiling or Estimate(math.inf, math.inf, math.inf, False, "unknown", 0)


def row(fit: Fit, d: Demand, n: int) -> dict[str, Any]:
    """The projection at n accelerators: AU, its band, the bytes/s the ranks would read."""
    b, c = fit.bandwidth, _c(fit)
    value = au(d, n, b.value, c.value)
    return {"accelerators": n, "au": value, "au_low": au(d, n, b.low, c.low),
            "au_high": au(d, n, b.high, c.high), "at_least": b.bound,
            "bytes_per_s": n * value * d.step_bytes / d.compute_s}


def most_at_floor(fit: Fit, d: Demand, bandwidth: float, ceiling: float) -> int | float:
    """The most accelerators whose AU stays at the floor (inf: no bound known)."""
    if d.compute_s * ceiling / d.step_bytes < d.floor:
        return 0  # one rank's loader is already too slow
    if math.isinf(bandwidth):
        return math.inf
    return math.floor(d.compute_s * bandwidth / (d.step_bytes * d.floor) * (1 + 1e-12))


def counts(fit: Fit, largest: int | None, also: list[int]) -> list[int]:
    """Accelerator counts to project: powers of two up to ``largest`` (default 8 times the
    most ranks run), with every measured and asked-for count."""
    top = largest or 8 * max(p.ranks for p in fit.points)
    powers = [2**k for k in range(top.bit_length()) if 2**k <= top]
    return sorted({*powers, top, *(p.ranks for p in fit.points), *also})


def _estimate(e: Estimate | None) -> dict[str, Any] | None:
    if e is None:
        return None
    inf = math.isinf
    return {"bytes_per_s": None if inf(e.value) else e.value, "low": e.low,
            "high": None if inf(e.high) else e.high, "lower_bound_only": e.bound,
            "source": e.source, "runs": e.runs}


def _point(p: Point) -> dict[str, Any]:
    return {"run_dir": p.run_dir, "ranks": p.ranks, "au": p.au, "compute_s": p.compute_s,
            "step_bytes": p.step_bytes, "bytes_per_s": p.bytes_per_s, "limiter": p.limiter}


def project(config: Config, fit: Fit, largest: int | None,
            checks: list[Point] | None = None) -> dict[str, Any]:
    """The calibrated projection as plain data (the ``calibrated`` part of ``--json``)."""
    d = demand(config, fit.points)
    checks = checks or []
    rows = [row(fit, d, n) for n in counts(fit, largest, [p.ranks for p in checks])]
    b, c = fit.bandwidth, _c(fit)
    best = most_at_floor(fit, d, b.value, c.value)
    span = (most_at_floor(fit, d, b.low, c.low), most_at_floor(fit, d, b.high, c.high))
    return {
        "workload": config.name, "accelerator": config.train.accelerator or "emulated",
        "compute_s": d.compute_s, "step_bytes": d.step_bytes, "demand_source": d.source,
        "au_floor": d.floor, "bandwidth": _estimate(b), "client_ceiling": _estimate(fit.ceiling),
        "most_at_floor": None if math.isinf(best) else best,
        "most_at_floor_band": [None if math.isinf(v) else v for v in span],
        "most_at_floor_at_least": b.bound,
        "projection": rows, "runs": [_point(p) for p in fit.points],
        "checks": [{**_point(p), **_compare(row(fit, d, p.ranks), p)} for p in checks],
        "notes": fit.notes,
    }


def _compare(r: dict[str, Any], p: Point) -> dict[str, Any]:
    """A run left out of the fit against the projection at its rank count."""
    err = None if p.au is None else p.au - r["au"]
    return {"au_projected": r["au"], "au_low": r["au_low"], "au_high": r["au_high"],
            "au_error": err}


def _mbps(value: float | None) -> str:
    return "-" if value is None or math.isinf(value) else f"{value / 1e6:,.1f}"


def _band(e: dict[str, Any], unit: str = "MB/s") -> str:
    if e["lower_bound_only"]:
        return f"at least {_mbps(e['bytes_per_s'])} {unit} ({e['source']})"
    band = "" if e["low"] == e["high"] else f" ({_mbps(e['low'])}-{_mbps(e['high'])})"
    return f"{_mbps(e['bytes_per_s'])} {unit}{band}, {e['source']}"


def table(doc: dict[str, Any]) -> str:
    """The projection as text: the fit, the most accelerators at the floor, a row per count."""
    measured: dict[int, list[float | None]] = {}
    for r in doc["runs"]:
        measured.setdefault(r["ranks"], []).append(r["au"])
    checked = {r["ranks"]: r["au"] for r in doc["checks"]}
    ceiling = doc["client_ceiling"]
    lines = [
        f"calibrated by {len(doc['runs'])} run(s): {doc['workload']} on {doc['accelerator']} "
        f"accelerators, {doc['step_bytes'] / 1e6:,.2f} MB read per step",
        f"  per step           {doc['demand_source']}",
        f"  storage bandwidth  {_band(doc['bandwidth'])}",
        "  client ceiling     " + ("unknown: no run was client-bound or recorded a ceiling "
                                   "(no per-rank cap applied)" if ceiling is None else
                                   _band(ceiling, "MB/s per rank")),
        f"  at the AU floor    {_most(doc)}",
        "",
        "  accelerators     AU projected  band         read MB/s  AU measured",
    ]
    for r in doc["projection"]:
        n = r["accelerators"]
        seen = measured.get(n, []) + ([checked[n]] if n in checked else [])
        shown = ", ".join("-" if a is None else f"{a:.3f}" for a in seen)
        if n in checked:
            shown += " (not fitted)"
        at_least = "at least " if r["at_least"] else ""
        lines.append(f"  {n:>12,}  {at_least + format(r['au'], '.3f'):>15}  "
                     f"{r['au_low']:.3f}-{r['au_high']:.3f}  {r['bytes_per_s'] / 1e6:>9,.1f}"
                     f"  {shown}")
    return "\n".join(lines + [f"  note: {n}" for n in doc["notes"]])


def _most(doc: dict[str, Any]) -> str:
    best, (low, high) = doc["most_at_floor"], doc["most_at_floor_band"]
    floor = f"{doc['au_floor']:.0%}"
    if best is None:
        return f"no bound known at {floor}"
    if doc["most_at_floor_at_least"]:
        return f"at least {best:,} accelerator(s) keep AU at or above {floor}"
    band = "" if low == high else f" ({low:,}-{'-' if high is None else f'{high:,}'})"
    return f"at most {best:,} accelerator(s){band} keep AU at or above {floor}"
