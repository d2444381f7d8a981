"""Checks of the runs of one benchmark setup together: how many, how alike, how consecutive."""

from __future__ import annotations

from itertools import pairwise
from statistics import mean

from dliobench.report.rules.finding import (
    GUIDELINES_MD,
    RULES_MD,
    TRAINING_SUBMISSION_PY,
    Finding,
    Fix,
    Rule,
    finding,
)
from dliobench.report.rules.subject import Run, setup_text

REQUIRED_RUNS = 5  # submission_checkers/training.py REQUIRED_RUNS
SPREAD = 0.05  # "within 5% within 5 tries"

COUNT = Rule(TRAINING_SUBMISSION_PY, "check_num_runs")
REPLICABLE = Rule(GUIDELINES_MD, "§6.7 Replicability is mandatory")
CONSECUTIVE = Rule(RULES_MD, "§2.1.18 runTimestampGap")


def complete(runs: list[Run]) -> list[Run]:
    """The complete runs, in the order they started."""
    done = [r for r in runs if r.result.get("status") == "complete"]
    return sorted(done, key=lambda r: str(r.result.get("started_at", "")))


def check_run_count(runs: list[Run], division: str) -> Finding:
    """At least five complete runs of the setup."""
    n = len(complete(runs))
    ok = n >= REQUIRED_RUNS
    return finding("run count", ok, setup_text(runs[0].setup()),
                   f"{n} complete run(s); a training result needs {REQUIRED_RUNS}, after a "
                   "warm-up run (Rules.md §2.1.17) that is not to be given here", COUNT,
                   (Fix("complete runs of the setup", f"at least {REQUIRED_RUNS}", str(n)),))


def check_run_spread(runs: list[Run], division: str) -> Finding:
    """Every run's samples/s is within 5 % of the runs' mean."""
    rates = [r.result["metrics"].get("samples_per_s") for r in complete(runs)]
    known = [x for x in rates if x]
    subject = setup_text(runs[0].setup())
    if len(known) < 2:
        return finding("run spread", None, subject, "fewer than 2 complete runs with a "
                       "throughput to compare", REPLICABLE)
    centre = mean(known)
    worst = max(abs(x - centre) / centre for x in known)
    missing = len(rates) - len(known)
    ok = worst <= SPREAD and not missing
    gap = f"; {missing} run(s) measured no throughput" if missing else ""
    return finding("run spread", ok, subject,
                   f"samples/s of {len(known)} runs lie within {100 * worst:.1f} % of their "
                   f"mean {centre:,.1f} (at most {100 * SPREAD:.0f} % allowed){gap}",
                   REPLICABLE, (Fix("samples/s spread of the runs",
                                    f"within {100 * SPREAD:.0f} % of their mean",
                                    f"{100 * worst:.1f} %"),))


def check_consecutive(runs: list[Run], division: str) -> Finding:
    """Each run started before a run's duration had passed since the previous one ended."""
    spans = [t for t in (r.times() for r in complete(runs)) if t is not None]
    subject = setup_text(runs[0].setup())
    if len(spans) < 2:
        return finding("consecutive", None, subject, "fewer than 2 complete runs with start "
                       "and end times", CONSECUTIVE)
    gaps = [(b[0] - a[1]).total_seconds() for a, b in pairwise(spans)]
    shortest = min((end - start).total_seconds() for start, end in spans)
    widest = max(gaps)
    ok = widest < max(shortest, 1.0)  # times are whole seconds
    return finding("consecutive", ok, subject,
                   f"the widest gap between runs is {widest:,.0f} s, "
                   f"{'less' if ok else 'not less'} than the shortest run ({shortest:,.0f} s)",
                   CONSECUTIVE, (Fix("gap between runs", f"less than {shortest:,.0f} s",
                                     f"{widest:,.0f} s"),))
