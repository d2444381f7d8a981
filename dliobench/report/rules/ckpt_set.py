"""Checks of the checkpoint-only runs of one setup together: 10 writes then 10 reads, and,
in the split form, the read invocation started within 30 s of the write phase's end.

Rules.md §2.1.23: one timestamp folder per invocation, one combined invocation or a write
invocation followed by a read one; §4.6.3: ``num_checkpoints_write`` and ``_read`` are 10,
or 0 in the split form, 10 writes followed by 10 reads in all (upstream's checker sums them
over the runs: mlcommons/storage mlpstorage_py/rules/submission_checkers/checkpointing.py
@a815ef8a317e0b05a7cceea26fe0ae1a0eba2c94 ``check_num_runs``); §4.7.1 (mlcommons/storage
Rules.md@0366ccfc9fc629dde3379a8022cb4c4ff8285b53): the split form's two invocations have the
submitter's fail-over callout (e.g. a cache clear) between them, and the read invocation is
launched within 30 s of the write invocation's end, measured as
``read.invocation_start_time - write.summary.end_time`` (a negative gap is clock skew). So the
hand-off from the write phase to the read phase is judged by that 30 s bound, not by §2.1.24's
"less than a run's duration" between neighbouring runs (a scaled-down write run lasts under
a second), which still applies between the runs of one phase.
"""

from __future__ import annotations

from dliobench.report.rules.finding import RULES_MD, Finding, Fix, Rule, finding
from dliobench.report.rules.runset import complete, consecutive
from dliobench.report.rules.subject import setup_text
from dliobench.report.runs import Run

REQUIRED_WRITES = REQUIRED_READS = 10
SPLIT_GAP_S = 30.0
COUNTS = Rule(RULES_MD, "§4.6.3 checkpointClosedCheckpointParameters")
GAP = Rule(RULES_MD, "§4.7.1 checkpointCacheFlushValidation")
CONSECUTIVE = Rule(RULES_MD, "§2.1.24 checkpointingTimestampGap")


def ops(run: Run, op: str) -> int:
    """Checkpoints the run wrote (``op="write"``) or read."""
    section = (run.result.get("checkpoint") or {}).get(op)
    return int(section.get("count") or 0) if isinstance(section, dict) else 0


def check_counts(runs: list[Run], division: str) -> Finding:
    """10 writes and 10 reads over the complete runs, every write before any read."""
    done = complete(runs)
    writes, reads = sum(ops(r, "write") for r in done), sum(ops(r, "read") for r in done)
    read_yet, ordered = False, True
    for run in done:
        ordered = ordered and not (read_yet and ops(run, "write"))
        read_yet = read_yet or ops(run, "read") > 0
    ok = writes == REQUIRED_WRITES and reads == REQUIRED_READS and ordered
    order = "" if ordered else "; a run wrote after another had read"
    return finding("run count", ok, setup_text(runs[0].setup()),
                   f"{writes} write(s) and {reads} read(s) over {len(done)} complete run(s)"
                   f"{order}; a checkpointing result needs {REQUIRED_WRITES} writes followed "
                   f"by {REQUIRED_READS} reads, in one invocation or a write one then a read "
                   "one", COUNTS,
                   (Fix("checkpoint.num_checkpoints_write (over the runs)",
                        str(REQUIRED_WRITES), str(writes)),
                    Fix("checkpoint.num_checkpoints_read (over the runs)",
                        str(REQUIRED_READS), str(reads))))


def _read_only(run: Run) -> bool:
    return ops(run, "read") > 0 and not ops(run, "write")


def measured_gap(run: Run, done: list[Run]) -> tuple[float | None, str]:
    """A read-only run's gap after its write phase, and how it was known: the set's own
    timing (the read process's start), or else the results' start and end times (whole
    seconds, from the run's start rather than its process's)."""
    split = (run.place or {}).get("split")
    if isinstance(split, dict) and split.get("gap_s") is not None:
        return float(split["gap_s"]), ("timed by the read invocation from its "
                                       f"{split.get('timed_from', 'process start')}")
    times = run.times()
    if times is None:
        return None, "the run does not say when it started"
    ends = [t[1] for r in done if ops(r, "write") and (t := r.times()) and t[1] <= times[0]]
    if not ends:
        return None, "no write-phase run precedes it"
    return (times[0] - ends[-1]).total_seconds(), "from the results' start and end times"


def _handoff(first: Run, then: Run) -> bool:
    """A write-only run followed by a read-only one: the split form's fail-over, timed by
    §4.7.1's 30 s from the write's end to the read's start, not by a run's duration."""
    return bool(ops(first, "write")) and not ops(first, "read") and _read_only(then)


def check_consecutive(runs: list[Run], division: str) -> Finding:
    """Rules.md §2.1.24 between checkpoint runs, the split form's hand-off left to
    ``check_split_gap``."""
    return consecutive(runs, CONSECUTIVE, _handoff)


def check_split_gap(runs: list[Run], division: str) -> Finding:
    """In the split form, the read invocation started within 30 s of the writes' end."""
    done = complete(runs)
    subject = setup_text(runs[0].setup())
    readers = [r for r in done if _read_only(r)]
    if not readers:
        return finding("split gap", None, subject, "no read-only run: the writes and reads "
                       "ran in one invocation, where no gap check applies", GAP)
    gap, how = measured_gap(readers[0], done)
    if gap is None:
        return finding("split gap", False, subject, f"the read-only run {readers[0].run_id} "
                       f"cannot be timed after its writes: {how}", GAP,
                       (Fix("write-phase run", "given with the read run", "none"),))
    if gap < 0:
        return finding("split gap", None, subject, f"the read invocation started {-gap:,.1f} s "
                       f"before the writes ended ({how}): clock skew between the hosts", GAP)
    ok = gap < SPLIT_GAP_S
    return finding("split gap", ok, subject,
                   f"the read invocation started {gap:,.2f} s after the writes ended ({how}); "
                   f"the rules allow less than {SPLIT_GAP_S:.0f} s", GAP,
                   (Fix("gap from the write phase's end to the read invocation",
                        f"under {SPLIT_GAP_S:.0f} s", f"{gap:,.1f} s"),))
