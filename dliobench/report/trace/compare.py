"""How closely a replay's I/O matches the trace it was made from (``workload compare``):
files touched, bytes and requests per epoch, the request-size histogram (power-of-two
bins), reads per step and step times. The replay's reads come from its own trace
(``run --trace-io`` writes ``<run-dir>/io-trace/``), its epochs and steps from its
``result.json`` and ``timeline.csv``.
"""

from __future__ import annotations

import csv
import itertools
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from dliobench.base.errors import InputError
from dliobench.report.trace import datafiles
from dliobench.report.trace.events import BATCH, COMPUTE, Trace
from dliobench.report.trace.infer import accesses
from dliobench.report.trace.load import load
from dliobench.results.files import read_result

TOLERANCE = 0.02  # bytes, requests and reads per step: within 2 % (the bound)


@dataclass
class Side:
    """One side's figures: per epoch, and the step times (seconds) when known."""

    files: int
    epochs: int
    bytes: float
    requests: float
    bins: Counter[int]
    steps: float | None
    step_times: list[float]


@dataclass
class Row:
    """One line of the table: what, the trace's and the replay's values, and the verdict."""

    what: str
    trace: str
    replay: str
    diff: str
    ok: bool | None  # None: shown, not judged


def size_bin(n: int) -> int:
    """The power-of-two bin of a request of ``n`` bytes: [2^k, 2^(k+1))."""
    return max(n, 1).bit_length() - 1


def bin_label(k: int) -> str:
    """A bin's range in words."""
    def words(n: int) -> str:
        return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"
    return f"{words(1 << k)}-{words(1 << (k + 1))}"


def trace_side(trace: Trace) -> Side:
    """The traced job's figures (epochs from how often files were opened)."""
    files = datafiles.find(trace)
    paths = set(files.paths)
    reads = trace.reads(paths)
    per_file = Counter(a.path for a in accesses(trace, paths))
    epochs = max(1, round(statistics.median(per_file.values()))) if per_file else 1
    marks = [e for e in trace.events if e.op in (BATCH, COMPUTE)]
    steps = len(marks) / epochs if marks else None
    per = max(1, round(steps)) if steps else 1
    times = [b.ts - a.ts for i, (a, b) in enumerate(itertools.pairwise(marks)) if (i + 1) % per]
    return _side(len(paths), epochs, reads, steps, times)


def replay_side(run_dir: Path) -> Side:
    """A replay's figures: its trace's reads, its result's epochs and steps."""
    folder = run_dir / "io-trace"
    if not folder.is_dir():
        raise InputError(f"{run_dir} has no io-trace/ folder; run the workload with "
                         "`dliobench run ... --trace-io` and compare that run")
    result = read_result(run_dir)
    epochs = int(result["config"]["train"]["epochs"])
    trace = load(folder)
    rows = _timeline(run_dir / "timeline.csv")
    steps = len(rows) / epochs if rows else None
    times = [b[1] - a[1] for a, b in itertools.pairwise(rows) if a[0] == b[0]]
    return _side(len({e.path for e in trace.reads()}), epochs, trace.reads(), steps, times)


def _timeline(path: Path) -> list[tuple[int, float]]:
    """Rank 0's steps as (epoch, start seconds)."""
    try:
        with open(path, newline="") as handle:
            return [(int(r["epoch"]), float(r["t_start_s"])) for r in csv.DictReader(handle)
                    if r["rank"] == "0"]
    except (OSError, KeyError, ValueError):
        return []


def _side(files: int, epochs: int, reads: list, steps: float | None,
          times: list[float]) -> Side:
    bins = Counter(size_bin(e.size) for e in reads)
    return Side(files, epochs, sum(e.size for e in reads) / epochs, len(reads) / epochs,
                bins, steps, times)


def rows(t: Side, r: Side) -> list[Row]:
    """The table."""
    out = [_exact("files touched", t.files, r.files),
           _close("bytes read per epoch", t.bytes, r.bytes),
           _close("read requests per epoch", t.requests, r.requests),
           _exact("request-size bins", _bins(t.bins), _bins(r.bins))]
    for k in sorted(set(t.bins) | set(r.bins)):
        out.append(_close(f"  requests {bin_label(k)} per epoch", t.bins[k] / t.epochs,
                          r.bins[k] / r.epochs))
    if t.steps and r.steps:
        out.append(_close("reads per step", t.requests / t.steps, r.requests / r.steps))
    else:
        out.append(Row("reads per step", "n/a" if not t.steps else f"{t.requests / t.steps:.1f}",
                       "n/a" if not r.steps else f"{r.requests / r.steps:.1f}",
                       "the trace shows no steps" if not t.steps else "", None))
    for q, name in ((0.5, "p50"), (0.9, "p90")):
        a, b = _quantile(t.step_times, q), _quantile(r.step_times, q)
        out.append(Row(f"step time {name}", _ms(a), _ms(b),
                       _pct(a, b) if a and b else "", None))
    return out


def _bins(bins: Counter[int]) -> str:
    return ", ".join(bin_label(k) for k in sorted(bins)) or "none"


def _exact(what: str, a: object, b: object) -> Row:
    return Row(what, str(a), str(b), "same" if a == b else "differ", a == b)


def _close(what: str, a: float, b: float) -> Row:
    ok = abs(a - b) <= TOLERANCE * max(abs(a), 1e-12)
    return Row(what, f"{a:,.1f}", f"{b:,.1f}", _pct(a, b), ok)


def _pct(a: float, b: float) -> str:
    return f"{(b - a) / a * 100:+.1f} %" if a else ("0" if not b else "new")


def _quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.2f} ms"
