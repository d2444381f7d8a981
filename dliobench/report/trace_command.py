"""The work of ``dliobench workload from-trace`` and ``dliobench workload compare``: a
workload file from a traced job's I/O, and the table of how a replay's I/O differs from
the trace (dliobench/report/trace/, docs/trace.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dliobench.base.errors import InputError
from dliobench.report.trace import compare, infer, workload
from dliobench.report.trace.load import load


@dataclass(frozen=True)
class FromTrace:
    """What ``workload from-trace`` was asked."""

    trace: Path
    out: Path
    name: str = ""
    batch_size: int = 0
    computation_time: float = -1.0
    measure_compute: bool = False


def from_trace(asked: FromTrace) -> None:
    """Infer the workload, print each value with how it was inferred, write the file."""
    got = infer.infer(load(asked.trace), asked.batch_size, asked.computation_time)
    if asked.measure_compute:
        _measured(got)
    name = asked.name or asked.out.stem
    text = workload.yaml_text(got, f"{asked.trace} ({got_source(asked.trace)})", name)
    try:
        asked.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {asked.out} ({exc.strerror}); name a writable "
                         "file with -o") from None
    for line in workload.summary(got):
        print(line)
    print(f"workload: {asked.out} (run it: dliobench run {asked.out} --trace-io, then "
          f"dliobench workload compare {asked.trace} RUN_DIR)")


def _measured(got: infer.Inferred) -> None:
    """Compute per batch from a real small model's training steps (run.model_compute)."""
    from dliobench.run.model_compute import measure

    batch = got.values.get("reader.batch_size")
    if not batch:
        raise InputError("--measure-compute needs the batch size, which the trace does not "
                         "show; give --batch-size")
    m = measure(int(batch))
    got.unknown = [u for u in got.unknown if not u.startswith("train.computation_time")]
    got.set("train.computation_time", round(m.mean, 6), m.where)
    got.set("train.computation_time_stdev", round(m.stdev, 6), "their standard deviation")
    got.set("train.computation_source", m.where, "carried into every result's config")


def got_source(trace: Path) -> str:
    """The trace's kind in words."""
    return load(trace).source


def compare_runs(trace: Path, run_dir: Path) -> int:
    """Print the table; 0 when every judged row is within tolerance, else 1."""
    r = compare.replay_side(run_dir)  # first: a run without --trace-io is the likelier slip
    t = compare.trace_side(load(trace))
    rows = compare.rows(t, r)
    width = max(len(x.what) for x in rows)
    print(f"{'':{width}}  {'trace':>16}  {'replay':>16}  difference")
    for x in rows:
        mark = "" if x.ok is None else "  ok" if x.ok else "  DIFFERS"
        print(f"{x.what:{width}}  {x.trace:>16}  {x.replay:>16}  {x.diff}{mark}")
    bad = [x.what.strip() for x in rows if x.ok is False]
    print(f"within {compare.TOLERANCE:.0%}: " + ("all" if not bad else "not " + ", ".join(bad)))
    return 1 if bad else 0
