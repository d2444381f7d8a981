"""How many emulated accelerators can this storage feed? (MLPerf Storage's question)

One emulated accelerator is one rank. Double the ranks while AU stays at or above the
workload's floor, then bisect between the last success and the first failure, bounded by
``--max-accelerators``. Every probe is a full run kept in the sweep folder. A probe that
errors (it did not run: a failed check, a crash, a timeout) measured nothing about the
storage, so it ends the search as an error, never as a count the storage failed to sustain.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dliobench.report.sweep import PointOutcome, SweepSpec, run_point, save_summary, sweep_folder

log = logging.getLogger(__name__)


@dataclass
class MaxSearch:
    """The answer and the runs that led to it."""

    folder: Path
    accelerator: str
    cap: int = 0
    best: PointOutcome | None = None
    probes: list[PointOutcome] = field(default_factory=list)
    error: PointOutcome | None = None  # the probe that errored and ended the search

    @property
    def first_failure(self) -> PointOutcome | None:
        """The smallest rank count whose run did not sustain the floor (None: none failed;
        a probe that errored is not a run that failed)."""
        failed = [p for p in self.probes if p.result is not None and not sustained(p)]
        return min(failed, key=lambda p: p.ranks) if failed else None

    @property
    def cap_reached(self) -> bool:
        """Every probe sustained the floor up to ``--max-accelerators``: a lower bound only."""
        return self.error is None and self.first_failure is None and self.best is not None

    def summary(self) -> dict[str, object]:
        """The search's answer for ``sweep.json``."""
        fail, err = self.first_failure, self.error
        return {"accelerator": self.accelerator, "max": self.cap,
                "error": None if err is None else {"ranks": err.ranks, "reason": err.error},
                "best": self.best.ranks if self.best else 0, "cap_reached": self.cap_reached,
                "first_failure": None if fail is None else {
                    "ranks": fail.ranks, "limiter": _limiter(fail), "reason": _why(fail)}}

    def sentence(self, workload: str) -> str:
        """The one-line answer: how many, or at least how many, and what stopped more (or
        the error that stopped the search)."""
        if self.error is not None:
            so_far = f" ({self.best.ranks} sustained before it)" if self.best else ""
            return (f"the probe at {self.error.ranks} {self.accelerator} accelerator(s) failed, "
                    f"so the search stopped with no storage result{so_far}: {self.error.error}")
        fail = self.first_failure
        if self.best is None or self.best.result is None:
            why = _why(fail) if fail else "no run"
            return (f"this storage cannot sustain even one {self.accelerator} accelerator for "
                    f"{workload} at its AU floor ({why})")
        m = self.best.result["metrics"]
        figures = (f"{_figure(m['samples_per_s'], 1, ' samples/s')}, "
                   f"{_figure(m['bytes_per_s'], 1e-9, ' GB/s', 3)} "
                   f"(AU {_figure(m['au'], 100, ' %')})")
        if fail is None:
            return (f"this storage sustains at least {self.best.ranks} {self.accelerator} "
                    f"accelerator(s) for {workload} (cap reached: --max-accelerators "
                    f"{self.cap}; raise it to find the limit): {figures}")
        return (f"this storage sustains {self.best.ranks} {self.accelerator} accelerator(s) for "
                f"{workload}: {figures}; at {fail.ranks} the run was {_limiter(fail)}-limited "
                f"({_why(fail)})")


def _figure(value: float | None, scale: float, unit: str, digits: int = 1) -> str:
    """A measured figure for a sentence ("n/a" when the run could not count it)."""
    return "n/a" if value is None else f"{value * scale:,.{digits}f}{unit}"


def _limiter(outcome: PointOutcome) -> str:
    """What limited a failed point (its result's verdict; "error" when it did not run)."""
    if outcome.result is None:
        return "error"
    verdict = outcome.result.get("verdict")
    return str(verdict["limiter"]) if verdict else "unknown"


def _why(outcome: PointOutcome) -> str:
    """Why a point failed, in words."""
    if outcome.result is None:
        return outcome.error or "no result"
    verdict = outcome.result.get("verdict")
    if verdict:
        return str(verdict["reason"])
    au = outcome.result["metrics"]["au"]
    floor = outcome.result["config"]["metric"]["au"]
    return f"AU {'n/a' if au is None else f'{100 * au:.1f} %'} < floor {100 * floor:.0f} %"


def sustained(outcome: PointOutcome) -> bool:
    """True when the run completed with AU at or above its workload's floor."""
    if outcome.result is None:
        return False
    au = outcome.result["metrics"]["au"]
    return au is not None and au >= outcome.result["config"]["metric"]["au"]


def find_max_accelerators(spec: SweepSpec, accelerator: str, max_accelerators: int,
                          timeout: float | None = None) -> MaxSearch:
    """Doubling then bisection over rank counts; returns the largest sustained count."""
    search = MaxSearch(sweep_folder(spec), accelerator, max_accelerators)
    settings = {"train.accelerator": accelerator} if accelerator else {}
    tried: dict[int, bool] = {}

    def probe(n: int) -> bool:
        outcome = run_point(spec, n, settings, search.folder, timeout)
        search.probes.append(outcome)
        if outcome.error or outcome.result is None:
            search.error = outcome
            log.info("%d accelerator(s): error: %s", n, outcome.error)
            save_summary(search.folder, spec, search.probes, {"search": search.summary()})
            raise _Stopped
        tried[n] = sustained(outcome)
        if tried[n] and (search.best is None or n > search.best.ranks):
            search.best = outcome
        log.info("%d accelerator(s): %s", n, "sustained" if tried[n] else "not sustained")
        save_summary(search.folder, spec, search.probes, {"search": search.summary()})
        return tried[n]

    with contextlib.suppress(_Stopped):  # a probe errored: no further probe
        _search(probe, max_accelerators, tried)
    return search


class _Stopped(Exception):
    """A probe errored: the search ends there."""


def _search(probe: Callable[[int], bool], max_accelerators: int, tried: dict[int, bool]) -> None:
    """Double while the probes sustain the floor, then bisect to the last that does."""
    low, high, n = 0, None, 1
    while n <= max_accelerators and probe(n):
        low, n = n, n * 2
    if n > max_accelerators and low < max_accelerators and probe(max_accelerators):
        low = max_accelerators
    high = next((k for k in sorted(tried) if k > low and not tried[k]), None)
    while high is not None and high - low > 1:
        mid = (low + high) // 2
        if probe(mid):
            low = mid
        else:
            high = mid
