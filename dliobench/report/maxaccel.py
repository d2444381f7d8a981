"""How many emulated accelerators can this storage feed? (MLPerf Storage's question)

One emulated accelerator is one rank. Double the ranks while AU stays at or above the
workload's floor, then bisect between the last success and the first failure, bounded by
``--max-accelerators``. Every probe is a full run kept in the sweep folder. A probe that
errors (it did not run: a failed check, a crash, a timeout) measured nothing about the
storage, so it ends the search as an error, never as a count the storage failed to sustain.

The answer says which of the two stopped the count: the first failure's verdict names the
client (its host's CPUs busy while it waited, docs/ARCHITECTURE.md, Verdicts) or the storage.
Then one more run reads with compute 0 (``storage_alone``): the storage's own rate, on as
many ranks as sustained but no more than fit this host's cores (``run.preflight``), so the
client's cores are not what it measures; where its host's CPUs were busy all the same, the
rate is said to be a lower bound.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dliobench.report.sweep import PointOutcome, SweepSpec, run_point, save_summary, sweep_folder
from dliobench.results import figures
from dliobench.run.preflight import ranks_that_fit

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
    storage: PointOutcome | None = None  # the run with compute 0: the storage's own rate

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

    @property
    def kind(self) -> str:
        """The accelerator's name and a space, for sentences ("" when emulated unnamed)."""
        return f"{self.accelerator} " if self.accelerator else ""

    @property
    def stopped_by(self) -> str:
        """What stopped the count: ``client`` or ``storage`` (or another limiter) as the
        first failure's verdict says, ``cap`` when none failed, ``error``."""
        if self.error is not None:
            return "error"
        fail = self.first_failure
        return "cap" if fail is None else _limiter(fail)

    def summary(self) -> dict[str, object]:
        """The search's answer for ``sweep.json``."""
        fail, err = self.first_failure, self.error
        return {"accelerator": self.accelerator, "max": self.cap,
                "error": None if err is None else {"ranks": err.ranks, "reason": err.error},
                "best": self.best.ranks if self.best else 0, "cap_reached": self.cap_reached,
                "stopped_by": self.stopped_by,
                "first_failure": None if fail is None else {
                    "ranks": fail.ranks, "limiter": _limiter(fail), "reason": _why(fail)},
                "storage_alone": _alone(self.storage)}

    def sentence(self, workload: str) -> str:
        """The one-line answer: how many, or at least how many, what stopped more (the
        client or the storage) and the storage's own rate (or the error that stopped the
        search)."""
        if self.error is not None:
            so_far = f" ({self.best.ranks} sustained before it)" if self.best else ""
            return (f"the probe at {self.error.ranks} {self.kind}accelerator(s) failed, "
                    f"so the search stopped with no storage result{so_far}: {self.error.error}")
        fail, alone = self.first_failure, _alone_words(self.storage, self.probes)
        if self.best is None or self.best.result is None:
            why = _why(fail) if fail else "no run"
            who = "this client" if self.stopped_by == "client" else "this storage"
            return (f"{who} cannot sustain even one {self.kind}accelerator for "
                    f"{workload} at its AU floor ({why}){alone}")
        result = self.best.result
        rates = f"{figures.text('samples_per_s', result)}, {figures.text('read_MB_per_s', result)}"
        shown = f"{rates} (AU {figures.text('au', result)})"
        if fail is None:
            return (f"this storage sustains at least {self.best.ranks} {self.kind}"
                    f"accelerator(s) for {workload} (cap reached: --max-accelerators "
                    f"{self.cap}; raise it to find the limit): {shown}{alone}")
        if self.stopped_by == "client":
            return (f"this client sustains {self.best.ranks} {self.kind}accelerator(s) "
                    f"for {workload}: {shown}; at {fail.ranks} the client was the limit, not "
                    f"the storage ({_why(fail)}){alone}")
        return (f"this storage sustains {self.best.ranks} {self.kind}accelerator(s) for "
                f"{workload}: {shown}; at {fail.ranks} the run was {_limiter(fail)}-limited "
                f"({_why(fail)}){alone}")


def _verdict_figure(outcome: PointOutcome, name: str) -> float | None:
    """A figure of a point's verdict (None: not there)."""
    verdict = outcome.result.get("verdict") if outcome.result is not None else None
    value = (verdict or {}).get(name)
    return float(value) if isinstance(value, (int, float)) else None


def _busy(outcome: PointOutcome) -> float | None:
    """The busiest host's CPU share over the run's counted window (None: not measured)."""
    return _verdict_figure(outcome, "host_cpu_busy_share")


def _alone(outcome: PointOutcome | None) -> dict[str, object] | None:
    """The compute-0 run for ``sweep.json``: its ranks and rates, or its error."""
    if outcome is None:
        return None
    if outcome.result is None:
        return {"ranks": outcome.ranks, "error": outcome.error}
    m = outcome.result["metrics"]
    return {"ranks": outcome.ranks, "run_dir": outcome.run_dir,
            "bytes_per_s": m["bytes_per_s"], "samples_per_s": m["samples_per_s"],
            "host_cpu_busy_share": _busy(outcome)}


def _alone_words(outcome: PointOutcome | None, probes: list[PointOutcome]) -> str:
    """The storage's own rate, as the sentence's last clause ("" when not measured); a rate
    below what a probe delivered is said to be a lower bound, with that probe's rate (fewer
    ranks, to fit the cores, read less than more ranks did: not the storage's limit)."""
    if outcome is None:
        return ""
    if outcome.result is None:
        return f"; the run with compute 0 failed: {outcome.error}"
    busy = _busy(outcome)
    bound = _verdict_figure(outcome, "host_cpu_busy_min")
    lower = ("" if busy is None or bound is None or busy < bound else
             f"; a lower bound: the host's CPUs were {busy:.0%} busy")
    def rate(point: PointOutcome) -> float:
        return 0.0 if point.result is None else float(point.result["metrics"]["bytes_per_s"]
                                                      or 0.0)

    faster = max((p for p in probes if rate(p) > rate(outcome)), key=rate, default=None)
    if faster is not None and faster.result is not None and not lower:
        lower = (f"; a lower bound: {faster.ranks} rank(s) with compute delivered "
                 f"{figures.text('read_MB_per_s', faster.result)}")
    return (f"; the storage alone, compute 0 on {outcome.ranks} rank(s): "
            f"{figures.text('read_MB_per_s', outcome.result)}, "
            f"{figures.text('samples_per_s', outcome.result)}{lower}")


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
    if search.error is None and search.probes:
        search.storage = _storage_alone(spec, search, settings, timeout)
        save_summary(search.folder, spec, search.probes, {"search": search.summary()})
    return search


def _storage_alone(spec: SweepSpec, search: MaxSearch, settings: dict[str, str],
                   timeout: float | None) -> PointOutcome:
    """The run with compute 0 on as many ranks as sustained (at least 1), no more than fit
    this host's cores with the workload's readers per rank."""
    ran = next(p.result for p in search.probes if p.result is not None)
    threads = int(ran["config"]["reader"]["read_threads"])
    ranks = min(search.best.ranks if search.best else 1, ranks_that_fit(threads))
    outcome = run_point(spec, ranks, {**settings, "train.computation_time": 0,
                                      "train.computation_time_stdev": 0},
                        search.folder, timeout)
    log.info("the storage alone, compute 0 on %d rank(s): %s", ranks,
             outcome.error or "measured")
    return outcome


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
