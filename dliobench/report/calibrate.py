"""What real runs say about a storage system: its delivered bandwidth and the client ceiling.

A run of n ranks, each reading s bytes per step and computing c seconds per step, reaches
AU = min(1, c x min(C, B/n) / s): the ranks share the storage's bandwidth B and no rank's
loader goes past its client ceiling C (bytes/s per rank). A run that waited on its loader
(AU under ``SATURATED_BELOW``, or one that emulated no compute) delivered B or n x C: it
measures one of them. A run that kept up delivered less than both: B and n x C are at least
what it read, and its AU is what a step's own overhead leaves when the loader keeps up.
Everything is read from ``result.json`` (``results.files.read_result``).

B and C are rates of the runs' reads: requests of their sample size, layout and loader
(``SHAPE_KEYS``). A storage's bandwidth and a client's cost per sample depend on those, so the
fit takes runs of one shape only, and its figures describe that shape (``Fit.shape``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dliobench.base.errors import InputError
from dliobench.report.runs import find_run_dirs
from dliobench.results.files import read_result

SATURATED_BELOW = 0.95  # AU under this: the loader, not the compute, set the pace
CLIENT_SHARE = 0.9  # a read-bound rank at 90 % of its client ceiling is client-bound
STORAGE_SHARE = 0.95  # a waiting run that got less than this share of the most any run got
# from the storage was held back by its clients, not by the storage
REL_FLOOR = 0.01  # the least relative uncertainty of a fitted bandwidth (1 %)
SPREAD = 2.0  # the band is this many standard errors of a run's mean rate
SHAPE_KEYS = ("dataset.format", "dataset.record_length_bytes",
              "dataset.record_length_bytes_stdev", "dataset.num_samples_per_file",
              "reader.data_loader", "reader.odirect")  # what one read is and how it is made


@dataclass(frozen=True)
class Point:
    """One completed run, as the fit sees it (bytes and seconds per rank and step)."""

    run_dir: str
    ranks: int
    au: float | None
    compute_s: float  # measured compute per step, 0 for a read-bound run
    configured_compute_s: float  # train.computation_time
    step_bytes: float  # bytes one rank read per step
    sample_bytes: float  # bytes read per sample
    bytes_per_s: float  # delivered, all ranks together
    epoch_bytes_per_s: tuple[float, ...]  # the same, per complete epoch
    ceiling_samples_per_s: float | None  # the client ceiling the run recorded, per rank
    limiter: str  # "storage", "client", "none" (kept up) or "other"
    shape: tuple[tuple[str, Any], ...]  # (key, value) of SHAPE_KEYS the run set
    batch: int  # reader.batch_size
    mount: str  # the mount point the run read from
    ranks_per_host: int  # the most ranks one host ran

    @property
    def per_rank_bytes_per_s(self) -> float:
        """What one rank's loader delivered."""
        return self.bytes_per_s / self.ranks


@dataclass(frozen=True)
class Estimate:
    """A fitted bandwidth (bytes/s) and its band; ``bound``: only a lower bound is known."""

    value: float
    low: float
    high: float
    bound: bool
    source: str  # how it was obtained, in words
    runs: int  # runs it rests on


@dataclass(frozen=True)
class Fit:
    """The storage's bandwidth B, the client ceiling C per rank, and the runs they rest on."""

    points: list[Point]
    bandwidth: Estimate
    ceiling: Estimate | None  # None: no run says anything about it beyond B
    notes: list[str]

    @property
    def shape(self) -> dict[str, Any]:
        """The SHAPE_KEYS values every run had (``fit`` takes runs of one shape only)."""
        return dict(self.points[0].shape)


def _limiter(doc: dict[str, Any], au: float | None, compute: float, per_rank_samples: float,
             ceiling: float | None) -> str:
    """What set the pace of a run (see the module docstring)."""
    shares = doc.get("time_shares") or {}
    waiting = shares.get("wait", 0.0) >= max(shares.get(k, 0.0)
                                             for k in ("comm", "checkpoint", "other"))
    if compute <= 0:
        saturated = True
    elif au is None or not waiting:
        return "other"
    else:
        saturated = au < SATURATED_BELOW
    if not saturated:
        return "none"
    batch = doc["config"]["reader"]["batch_size"]
    demand = batch / compute if compute > 0 else float("inf")
    if ceiling is not None and (demand > ceiling if compute > 0
                                else per_rank_samples >= CLIENT_SHARE * ceiling):
        return "client"
    return "storage"


def point(run_dir: Path) -> Point | None:
    """A run folder as a fit point; None for a run that did not complete or read nothing."""
    doc: dict[str, Any] = dict(read_result(run_dir))
    try:
        return _point(run_dir, doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{run_dir / 'result.json'} lacks a figure the fit needs ({exc}); "
                         "leave that folder out") from None


def _point(run_dir: Path, doc: dict[str, Any]) -> Point | None:
    m = doc["metrics"]
    steps, samples, nbytes = m.get("steps") or 0, m.get("samples") or 0, m.get("bytes") or 0
    if doc["status"] != "complete" or not steps or not samples or not m.get("bytes_per_s"):
        return None
    ranks = int(doc.get("ranks_count") or 1)
    configured = float(doc["config"]["train"]["computation_time"])
    compute = float(m["compute_s"]) / steps if configured else 0.0
    verdict = doc.get("verdict") or {}
    ceiling = verdict.get("client_ceiling_samples_per_s_per_rank")
    au = m.get("au") if compute > 0 else None
    epochs = tuple(float(e["bytes_per_s"]) for e in doc.get("epochs") or []
                   if e.get("complete", True) and e.get("bytes_per_s"))
    per_rank_samples = float(m["samples_per_s"]) / ranks
    return Point(str(run_dir), ranks, au, compute, configured, nbytes / steps, nbytes / samples,
                 float(m["bytes_per_s"]), epochs, ceiling,
                 _limiter(doc, au, compute, per_rank_samples, ceiling), _shape(doc["config"]),
                 int(doc["config"]["reader"]["batch_size"]),
                 str((doc.get("storage") or {}).get("mount") or "unknown"),
                 max((len(n.get("ranks") or []) for n in doc.get("nodes") or []), default=ranks))


def _shape(config: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The run's SHAPE_KEYS values (a key its result does not record is left out)."""
    pairs = ((key, config[key.split(".")[0]].get(key.split(".")[1])) for key in SHAPE_KEYS)
    return tuple((key, value) for key, value in pairs if value is not None)


def shape_text(shape: dict[str, Any], keys: list[str] | None = None) -> str:
    """``key=value`` of a shape's keys (all of them by default), as overrides are written."""
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                    for k, v in shape.items() if keys is None or k in keys)


def _one_shape(points: list[Point]) -> None:
    """Refuse runs of different shapes: B and C are rates of one kind of read."""
    shapes: dict[tuple[tuple[str, Any], ...], int] = {}
    for p in points:
        shapes[p.shape] = shapes.get(p.shape, 0) + 1
    if len(shapes) > 1:
        (first, n1), (second, n2) = sorted(shapes.items(), key=lambda kv: -kv[1])[:2]
        a, b = dict(first), dict(second)
        keys = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
        raise InputError(f"the runs read {len(shapes)} shapes of samples ({n1} run(s) with "
                         f"{shape_text(a, keys)}, {n2} with {shape_text(b, keys)}), and a "
                         "storage's bandwidth depends on them; give --from the runs of one "
                         "shape at a time")


def load_points(paths: list[str]) -> tuple[list[Point], list[str]]:
    """The completed runs below ``paths`` and a note per run left out."""
    points, notes = [], []
    for run_dir in find_run_dirs(paths):
        p = point(run_dir)
        if p is None:
            notes.append(f"{run_dir}: left out (not complete, or no counted step read bytes)")
        else:
            points.append(p)
    if not points:
        raise InputError(f"no completed run that read data in {', '.join(paths)}; give the "
                         "folders of runs that completed (dliobench run or sweep)")
    return sorted(points, key=lambda p: (p.ranks, p.run_dir)), notes


def _measured(values: list[float], epochs: list[list[float]], source: str) -> Estimate:
    """The mean of per-run rates. The band: the runs' own scatter (``_noise``), or the
    farthest run from the mean when runs disagree more."""
    mean = statistics.fmean(values)
    half = max(_noise(values, epochs), max(abs(v - mean) for v in values))
    return Estimate(mean, max(0.0, mean - half), mean + half, False, source, len(values))


def _noise(values: list[float], epochs: list[list[float]]) -> float:
    """``SPREAD`` standard errors of a run's mean rate, from the scatter of each run's epochs
    around their own mean (pooled over runs), and at least ``REL_FLOOR`` of the mean."""
    squares = [(e - statistics.fmean(run)) ** 2 for run in epochs for e in run]
    dof = sum(len(run) - 1 for run in epochs if run)
    per_run = max(1.0, len(squares) / len(values))
    spread = SPREAD * (sum(squares) / dof / per_run) ** 0.5 if dof > 0 else 0.0
    return max(spread, REL_FLOOR * statistics.fmean(values))


def _ranks_text(points: list[Point]) -> str:
    counts = sorted({p.ranks for p in points})
    return "/".join(map(str, counts)) + (" rank" if counts == [1] else " ranks")


def _bandwidth(points: list[Point]) -> Estimate:
    """B from the storage-bound runs, else at least the most any run delivered."""
    bound = [p for p in points if p.limiter == "storage"]
    if bound:
        return _measured([p.bytes_per_s for p in bound],
                         [list(p.epoch_bytes_per_s) for p in bound],
                         f"delivered by {len(bound)} storage-bound run(s) at "
                         f"{_ranks_text(bound)}")
    best = max(points, key=lambda p: p.bytes_per_s)
    return Estimate(best.bytes_per_s, best.bytes_per_s, float("inf"), True,
                    f"at least what {best.ranks} rank(s) read while keeping up", 0)


def _ceiling(points: list[Point]) -> tuple[Estimate | None, int]:
    """C per rank from the client-bound runs, else the ceiling the runs recorded (measured
    from memory by ``dliobench ceiling``, in bytes via the bytes read per sample); and the
    fewest ranks per host it was seen at."""
    bound = [p for p in points if p.limiter == "client"]
    if bound:
        return _measured([p.per_rank_bytes_per_s for p in bound],
                         [[e / p.ranks for e in p.epoch_bytes_per_s] for p in bound],
                         f"delivered by {len(bound)} client-bound run(s) at "
                         f"{_ranks_text(bound)}"), min(p.ranks_per_host for p in bound)
    recorded = [p for p in points if p.ceiling_samples_per_s]
    if recorded:  # a host's CPUs shared by more ranks give each less: the most ranks per host
        most = max(p.ranks_per_host for p in recorded)
        values = [(p.ceiling_samples_per_s or 0.0) * p.sample_bytes for p in recorded
                  if p.ranks_per_host == most]
        value = statistics.median(values)
        return Estimate(value, value, value, False, f"the client ceiling recorded at {most} "
                        "rank(s) per host (read from memory, dliobench ceiling)",
                        len(values)), most
    return None, 0


def _delivered(p: Point) -> float:
    """Bytes/s one rank's loader delivered: what it read, or what its AU says it did."""
    return max(p.per_rank_bytes_per_s, p.au * p.step_bytes / p.compute_s if p.au else 0.0)


def _outread(c: Estimate | None, per_host: int,
             points: list[Point]) -> tuple[Estimate | None, list[str]]:
    """A ceiling that a run's ranks read past, with as many ranks per host or more, is
    contradicted by that run (the client-bound runs met a passing load): its band reaches
    what they read, so the projection keeps that run within it."""
    over = [p for p in points if c is not None and p.ranks_per_host >= per_host
            and _delivered(p) > c.high]
    if c is None or not over:
        return c, []
    top = max(over, key=_delivered)
    rate = _delivered(top)
    return replace(c, high=rate), [
        f"{Path(top.run_dir).name} ({top.ranks} rank(s)) read {rate / 1e6:,.1f} MB/s per rank, "
        f"more than the client ceiling fitted ({c.value / 1e6:,.1f} MB/s): the ceiling's band "
        "reaches it (was the host busier during the client-bound runs?)"]


def _consistency(points: list[Point], b: Estimate) -> list[str]:
    """Warnings about runs that do not fit one storage of one bandwidth."""
    notes = []
    if not b.bound and (over := [p for p in points if p.bytes_per_s > b.high]):
        notes.append(f"{len(over)} run(s) delivered more than the fitted bandwidth's band "
                     f"(up to {max(p.bytes_per_s for p in over) / 1e6:,.1f} MB/s): are all "
                     "the runs on the same storage?")
    bound = sorted((p for p in points if p.limiter == "storage"), key=lambda p: p.ranks)
    if bound and bound[-1].ranks > bound[0].ranks:
        first = statistics.fmean(p.bytes_per_s for p in bound if p.ranks == bound[0].ranks)
        last = statistics.fmean(p.bytes_per_s for p in bound if p.ranks == bound[-1].ranks)
        noise = _noise([p.bytes_per_s for p in bound],
                       [list(p.epoch_bytes_per_s) for p in bound])
        if last - first > 2 * noise:  # more than the runs' own scatter explains
            notes.append(f"the storage delivered more at more ranks ({first / 1e6:,.1f} MB/s "
                         f"at {bound[0].ranks}, {last / 1e6:,.1f} MB/s at {bound[-1].ranks}): "
                         "it may not be saturated yet, so the projection may be pessimistic")
    mounts = {p.mount for p in points}
    if len(mounts) > 1:
        notes.append(f"the runs read from {len(mounts)} mounts ({', '.join(sorted(mounts))}): "
                     "the fit assumes one storage system")
    return notes


def _held_back(points: list[Point]) -> tuple[list[Point], list[str]]:
    """Waiting runs that read clearly less than another run got from the same storage were
    limited by their clients (CPU, one client's link): relabelled ``client``."""
    top = max(p.bytes_per_s for p in points)
    out, notes = [], []
    for p in points:
        if p.limiter == "storage" and p.bytes_per_s < STORAGE_SHARE * top:
            notes.append(f"{Path(p.run_dir).name} ({p.ranks} rank(s)) waited while reading "
                         f"{p.bytes_per_s / 1e6:,.1f} MB/s, less than the {top / 1e6:,.1f} "
                         "MB/s another run got from the storage: taken as limited by its "
                         "clients")
            p = replace(p, limiter="client")
        out.append(p)
    return out, notes


def fit(paths: list[str]) -> Fit:
    """Fit B and C to the completed runs below ``paths``."""
    points, notes = load_points(paths)
    _one_shape(points)
    points, held = _held_back(points)
    notes += held
    b = _bandwidth(points)
    if b.bound:
        notes.append(f"no run saturated the storage (every AU at or above {SATURATED_BELOW:.2f}"
                     ", or the runs that waited were held back by their clients): its "
                     f"bandwidth is only a lower bound, at least {b.value / 1e6:,.1f} "
                     "MB/s, and the AU projected is a lower bound too; run more ranks, or "
                     "train.computation_time=0, to saturate it")
    c, outread = _outread(*_ceiling(points), points)
    return Fit(points, b, c, notes + outread + _consistency(points, b))
