"""Checks of the runs of one benchmark setup together: how many, whether a warm-up came
first, how alike, how consecutive.

A run of a ``dliobench run --repeat`` set says its place in ``result.json``'s ``run_set``
(``Run.place``): the warm-up (Rules.md §2.1.17: the first of the 6 runs, "not included in
the reported performance") is left out of the count and the spread, and a set without one is
flagged. Runs without ``run_set`` cannot say which was the warm-up, so all of them count.
"""

from __future__ import annotations

from collections.abc import Callable
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
from dliobench.report.rules.subject import setup_text
from dliobench.report.runs import Run

REQUIRED_RUNS = 5  # submission_checkers/training.py REQUIRED_RUNS
SPREAD = 0.05  # "within 5% within 5 tries"

COUNT = Rule(TRAINING_SUBMISSION_PY, "check_num_runs")
REPLICABLE = Rule(GUIDELINES_MD, "§6.7 Replicability is mandatory")
CONSECUTIVE = Rule(RULES_MD, "§2.1.18 runTimestampGap")
WARMUP = Rule(RULES_MD, "§2.1.17 runTimestamps")


def complete(runs: list[Run]) -> list[Run]:
    """The complete runs, in the order they started."""
    done = [r for r in runs if r.result.get("status") == "complete"]
    return sorted(done, key=lambda r: str(r.result.get("started_at", "")))


def scored(runs: list[Run]) -> list[Run]:
    """The complete runs that are scored (warm-ups left out), in the order they started."""
    return [r for r in complete(runs) if not r.is_warmup]


def check_run_count(runs: list[Run], division: str) -> Finding:
    """At least five complete scored runs of the setup (a set's warm-up not counted)."""
    n = len(scored(runs))
    warm = sum(r.is_warmup for r in complete(runs))
    ok = n >= REQUIRED_RUNS
    besides = f" besides {warm} warm-up run(s)" if warm else ""
    return finding("run count", ok, setup_text(runs[0].setup()),
                   f"{n} complete run(s){besides}; a training result needs {REQUIRED_RUNS}, "
                   "after a warm-up run (Rules.md §2.1.17) that is not scored", COUNT,
                   (Fix("complete runs of the setup", f"at least {REQUIRED_RUNS} after a "
                        "warm-up (dliobench run --run-set)", str(n)),))


def check_warmup(runs: list[Run], division: str) -> Finding:
    """A complete warm-up run started before the first scored run (runs of a set say which
    is the warm-up; others cannot, so the check does not apply to them)."""
    subject = setup_text(runs[0].setup())
    if not any(r.place for r in runs):
        return finding("warm-up", None, subject, "the runs do not say which was the warm-up "
                       "(runs of a `dliobench run --repeat` set do)", WARMUP)
    done, first = complete(runs), scored(runs)
    warm = [r for r in done if r.is_warmup]
    ok = bool(warm) and (not first or warm[0].result.get("started_at", "")
                         <= first[0].result.get("started_at", ""))
    said = (f"warm-up {warm[0].run_id} ran before the {len(first)} scored run(s), and is not "
            "scored" if ok else "no complete warm-up run precedes the scored runs; the rules "
            "want one first, not scored")
    return finding("warm-up", ok, subject, said, WARMUP,
                   (Fix("warm-up run", "one, before the scored runs (dliobench run --repeat "
                        "N runs it)", f"{len(warm)}"),))


def check_run_spread(runs: list[Run], division: str) -> Finding:
    """Every scored run's samples/s is within 5 % of the scored runs' mean."""
    rates = [r.result["metrics"].get("samples_per_s") for r in scored(runs)]
    known = [x for x in rates if x]
    subject = setup_text(runs[0].setup())
    if len(known) < 2:
        return finding("run spread", None, subject, "fewer than 2 complete scored runs with "
                       "a throughput to compare", REPLICABLE)
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
    return consecutive(runs, CONSECUTIVE)


def consecutive(runs: list[Run], rule: Rule,
                handoff: Callable[[Run, Run], bool] | None = None) -> Finding:
    """Rule ``rule`` (a run's duration at most between runs) over the complete runs, except
    the pairs ``handoff`` says another rule times (a split checkpoint set's write phase and
    read phase: ``ckpt_set.check_split_gap``)."""
    done = [r for r in complete(runs) if r.times() is not None]
    subject = setup_text(runs[0].setup())
    pairs = [(a, b) for a, b in pairwise(done) if handoff is None or not handoff(a, b)]
    if not pairs:
        said = ("the write phase and the read phase are timed by the split gap check "
                "(Rules.md §4.7.1)" if len(done) > 1 else
                "fewer than 2 complete runs with start and end times")
        return finding("consecutive", None, subject, said, rule)
    spans = {r.run_id: t for r in done if (t := r.times()) is not None}
    gaps = [(spans[b.run_id][0] - spans[a.run_id][1]).total_seconds() for a, b in pairs]
    shortest = min((end - start).total_seconds() for start, end in spans.values())
    widest = max(gaps)
    ok = widest < max(shortest, 1.0)  # times are whole seconds
    return finding("consecutive", ok, subject,
                   f"the widest gap between runs is {widest:,.0f} s, "
                   f"{'less' if ok else 'not less'} than the shortest run ({shortest:,.0f} s)",
                   rule, (Fix("gap between runs", f"less than {shortest:,.0f} s",
                              f"{widest:,.0f} s"),))
