"""AU against accelerators for a workload, projected from a fit to real runs (``calibrate``).

n accelerators (ranks), each computing c seconds and reading s bytes per step, on a storage
of bandwidth B behind clients of ceiling C per rank: AU = min(A, c x min(C, B/n) / s), where
A is the AU the runs reached while their loaders kept up (a step's own overhead: 1 when no
run kept up). The band is the same formula at the ends of A's, B's and C's bands and of the
compute per step the runs measured (the emulation overshoots more on a busier host); when B
is only a lower bound, so is the AU (its band reaches what C allows).

B and C are rates of the runs' reads, so the workload projected must read what they read:
its ``calibrate.SHAPE_KEYS`` must be the runs' (else ``ConfigError`` names the keys that
differ and the overrides that project the runs' shape). Its compute per batch and its batch
size may differ: the formula rescales them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from dliobench.base.errors import ConfigError
from dliobench.config.schema import Config
from dliobench.report.calibrate import Estimate, Fit, Point, shape_text

UNIT = 1e6  # MB/s in sentences, as the table's


@dataclass(frozen=True)
class Demand:
    """One accelerator of the workload: compute and bytes per step, and the AU it reaches
    when its loader keeps up."""

    compute_s: float
    step_bytes: float
    floor: float
    source: str  # where the compute and bytes per step come from, in words
    configured_s: float  # train.computation_time of the workload projected
    batch: int
    cap: Estimate  # A: the AU when the loader keeps up (value, band), from the runs
    compute_band: tuple[float, float]  # the least and most compute per step the runs measured


def check_shape(config: Config, shape: dict[str, Any], runs: str) -> None:
    """Refuse a workload that reads samples of another shape than ``runs`` did."""
    asked = {k: getattr(getattr(config, k.split(".")[0]), k.split(".")[1]) for k in shape}
    keys = [k for k in shape if asked[k] != shape[k]]
    if keys:
        differ = "; ".join(f"{k}: {shape_text({k: shape[k]})[len(k) + 1:]} in the runs, "
                           f"{shape_text({k: asked[k]})[len(k) + 1:]} asked" for k in keys)
        raise ConfigError(
            f"the {runs} read other samples than {config.name} asks ({differ}), and a "
            "bandwidth measured on one sample size and layout does not carry over to another; "
            f"add `{shape_text(shape, keys)}` to project the runs' samples, or give runs of "
            f"{config.name}'s own samples")


def demand(config: Config, points: list[Point]) -> Demand:
    """The workload's compute and bytes per step. Compute: what the runs measured per step
    when they emulated the same time per batch (the emulation's overshoot on these hosts is
    part of what a run measures), else ``train.computation_time``. Bytes: the batch times
    the bytes per sample the runs read (``check_shape``: the same samples)."""
    c, batch = config.train.computation_time, config.reader.batch_size
    if c <= 0:
        raise ConfigError(f"{config.name} has no compute time per batch "
                          f"(train.computation_time={c:g}), so it has no AU to project; pick "
                          "an accelerator with --accelerator, or set train.computation_time")
    timed = [p.compute_s for p in points if p.configured_compute_s == c and p.compute_s > 0]
    if timed:
        compute = statistics.fmean(timed)
        said = f"{compute:.4g} s measured per step ({c:g} s asked)"
    else:
        compute, said = c, f"{c:g} s per step (train.computation_time)"
    sample = statistics.fmean(p.sample_bytes for p in points)
    return Demand(compute, batch * sample, config.metric.au,
                  f"{said}; {batch} x the {sample / UNIT:,.3f} MB per sample the runs read",
                  c, batch, _cap(points, c, compute),
                  (min(timed), max(timed)) if timed else (c, c))


def _cap(points: list[Point], configured: float, compute: float) -> Estimate:
    """A, the AU when the loader keeps up, from the runs that neither the storage nor their
    clients held back: their AU at the same time per batch, else what their overhead per
    step leaves of ``compute``."""
    kept = [(p, p.au) for p in points if p.au and p.limiter not in ("storage", "client")]
    if not kept:
        return Estimate(1.0, 1.0, 1.0, False, "no run kept up", 0)
    caps = [a if p.configured_compute_s == configured else
            compute / (compute + p.compute_s * (1 / a - 1)) for p, a in kept]
    said = (f"the AU of {len(kept)} run(s) that kept up" if all(
        p.configured_compute_s == configured for p, _ in kept) else
        f"what the overhead per step of {len(kept)} run(s) that kept up leaves of "
        f"{compute:g} s")
    return Estimate(statistics.fmean(caps), min(caps), max(caps), False, said, len(kept))


def au(d: Demand, n: int, bandwidth: float, ceiling: float, cap: float,
       compute: float | None = None) -> float:
    """AU = min(A, c x min(C, B/n) / s) (c: the demand's, unless ``compute`` is given)."""
    c = d.compute_s if compute is None else compute
    return min(cap, c * min(ceiling, bandwidth / n) / d.step_bytes)


def _c(fit: Fit) -> Estimate:
    return fit.ceiling or Estimate(math.inf, math.inf, math.inf, False, "unknown", 0)


def row(fit: Fit, d: Demand, n: int) -> dict[str, Any]:
    """The projection at n accelerators: AU, its band, the bytes/s the ranks would read."""
    b, c, a, (least, most) = fit.bandwidth, _c(fit), d.cap, d.compute_band
    value = au(d, n, b.value, c.value, a.value)
    return {"accelerators": n, "au": value, "au_low": au(d, n, b.low, c.low, a.low, least),
            "au_high": au(d, n, b.high, c.high, a.high, most), "at_least": b.bound,
            "bytes_per_s": n * value * d.step_bytes / d.compute_s}


def most_at_floor(d: Demand, bandwidth: float, ceiling: float, cap: float) -> int | float:
    """The most accelerators whose AU stays at the floor (inf: no bound known; 0: not even
    one, ``_why`` says why)."""
    if cap < d.floor or d.compute_s * ceiling / d.step_bytes < d.floor:
        return 0  # keeping up is not enough, or one rank's loader is already too slow
    if math.isinf(bandwidth):
        return math.inf
    return math.floor(d.compute_s * bandwidth / (d.step_bytes * d.floor) * (1 + 1e-12))


def _why(fit: Fit, d: Demand) -> str:
    """Why not even one accelerator stays at the floor, or why no count is known."""
    b, c, floor = fit.bandwidth, _c(fit), f"{d.floor:.0%}"
    need = d.step_bytes * d.floor / d.compute_s  # one accelerator's bytes/s at the floor
    if d.cap.value < d.floor:
        return (f"not even one accelerator keeps AU at {floor}: with a loader that keeps up, "
                f"AU reaches {d.cap.value:.3f} only ({d.cap.source})")
    if d.compute_s * c.value / d.step_bytes < d.floor:
        return (f"not even one accelerator keeps AU at {floor}: one rank's loader delivers "
                f"{c.value / UNIT:,.1f} MB/s, under the {need / UNIT:,.1f} MB/s one "
                "accelerator reads at the floor")
    if b.bound:
        return (f"no count known: the runs never saturated the storage and read at least "
                f"{b.value / UNIT:,.1f} MB/s, under the {need / UNIT:,.1f} MB/s one accelerator "
                "reads at the floor; run more ranks, or train.computation_time=0, to measure it")
    return (f"not even one accelerator keeps AU at {floor}: the storage delivers "
            f"{b.value / UNIT:,.1f} MB/s, under the {need / UNIT:,.1f} MB/s one accelerator "
            "reads at the floor")


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


def _point(p: Point, d: Demand) -> dict[str, Any]:
    """A run as the document shows it; ``comparable``: it ran the compute per batch and batch
    size projected, so its AU is the projection's to reproduce."""
    return {"run_dir": p.run_dir, "ranks": p.ranks, "au": p.au, "compute_s": p.compute_s,
            "step_bytes": p.step_bytes, "bytes_per_s": p.bytes_per_s, "limiter": p.limiter,
            "comparable": p.configured_compute_s == d.configured_s and p.batch == d.batch}


def _most(fit: Fit, d: Demand) -> dict[str, Any]:
    """The most accelerators at the floor, its band, and why when it is none or unknown."""
    b, c, a = fit.bandwidth, _c(fit), d.cap
    best = most_at_floor(d, b.value, c.value, a.value)
    span = [most_at_floor(d, b.low, c.low, a.low), most_at_floor(d, b.high, c.high, a.high)]
    why = None if best else _why(fit, d)
    if not best and b.bound and most_at_floor(d, math.inf, c.value, a.value):
        best = math.inf  # only a lower bound of the bandwidth stops one: "at least 0" is no count
    return {"most_at_floor": None if math.isinf(best) else best,
            "most_at_floor_band": [None if math.isinf(v) else v for v in span],
            "most_at_floor_at_least": b.bound, "most_at_floor_why": why}


def project(config: Config, fit: Fit, largest: int | None,
            checks: list[Point] | None = None) -> dict[str, Any]:
    """The calibrated projection as plain data (the ``calibrated`` part of ``--json``)."""
    check_shape(config, fit.shape, "runs given to --from")
    checks = checks or []
    for p in checks:
        check_shape(config, dict(p.shape), "runs given to --check")
    d = demand(config, fit.points)
    rows = [row(fit, d, n) for n in counts(fit, largest, [p.ranks for p in checks])]
    return {
        "workload": config.name, "accelerator": config.train.accelerator or "emulated",
        "compute_s": d.compute_s, "step_bytes": d.step_bytes, "demand_source": d.source,
        "shape": fit.shape, "au_floor": d.floor, "bandwidth": _estimate(fit.bandwidth),
        "client_ceiling": _estimate(fit.ceiling),
        "kept_up_au": {"au": d.cap.value, "low": d.cap.low, "high": d.cap.high,
                       "source": d.cap.source, "runs": d.cap.runs},
        **_most(fit, d),
        "projection": rows, "runs": [_point(p, d) for p in fit.points],
        "checks": [{**_point(p, d), **_compare(row(fit, d, p.ranks), p)} for p in checks],
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


def _measured(doc: dict[str, Any]) -> dict[int, str]:
    """The AUs measured at each count, fitted and checked; a run of another compute per
    batch or batch size than projected is starred (its AU is not the projection's)."""
    seen: dict[int, list[str]] = {}
    for r in doc["runs"] + doc["checks"]:
        text = "-" if r["au"] is None else f"{r['au']:.3f}" + ("" if r["comparable"] else "*")
        seen.setdefault(r["ranks"], []).append(text)
    checked = {r["ranks"] for r in doc["checks"]}
    return {n: ", ".join(v) + (" (not fitted)" if n in checked else "")
            for n, v in seen.items()}


def table(doc: dict[str, Any]) -> str:
    """The projection as text: the fit, the most accelerators at the floor, a row per count."""
    measured = _measured(doc)
    ceiling, cap = doc["client_ceiling"], doc["kept_up_au"]
    capped = "" if cap["low"] == cap["high"] else f" ({cap['low']:.3f}-{cap['high']:.3f})"
    lines = [
        f"calibrated by {len(doc['runs'])} run(s): {doc['workload']} on {doc['accelerator']} "
        f"accelerators, {doc['step_bytes'] / 1e6:,.2f} MB read per step",
        f"  per step           {doc['demand_source']}",
        f"  storage bandwidth  {_band(doc['bandwidth'])}",
        "  client ceiling     " + ("unknown: no run was client-bound or recorded a ceiling "
                                   "(no per-rank cap applied)" if ceiling is None else
                                   _band(ceiling, "MB/s per rank")),
        f"  keeping up         AU {cap['au']:.3f}{capped}, {cap['source']}",
        f"  at the AU floor    {_most_text(doc)}",
        "",
        "  accelerators     AU projected  band         read MB/s  AU measured",
    ]
    for r in doc["projection"]:
        n = r["accelerators"]
        at_least = "at least " if r["at_least"] else ""
        lines.append(f"  {n:>12,}  {at_least + format(r['au'], '.3f'):>15}  "
                     f"{r['au_low']:.3f}-{r['au_high']:.3f}  {r['bytes_per_s'] / 1e6:>9,.1f}"
                     f"  {measured.get(n, '')}")
    if any("*" in v for v in measured.values()):
        lines.append("  * measured at another compute per batch or batch size than projected")
    return "\n".join(lines + [f"  note: {n}" for n in doc["notes"]])


def _most_text(doc: dict[str, Any]) -> str:
    best, (low, high) = doc["most_at_floor"], doc["most_at_floor_band"]
    floor = f"{doc['au_floor']:.0%}"
    if doc["most_at_floor_why"]:
        return str(doc["most_at_floor_why"])
    if best is None:
        return f"no bound known at {floor}"
    if doc["most_at_floor_at_least"]:
        return f"at least {best:,} accelerator(s) keep AU at or above {floor}"
    top = "no bound" if high is None else f"{high:,}"
    band = "" if low == high else f" (band: {f'{low:,}' if low else 'none'} to {top})"
    return f"at most {best:,} accelerator(s){band} keep AU at or above {floor}"
