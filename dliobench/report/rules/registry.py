"""The registry of checks, by workload family, and how they are applied to a set of runs.

Each check is a small function returning one ``Finding``. Per-run checks see one run; set
checks see the runs of one benchmark setup (workload, accelerator, ranks, hosts) together.
A family (training; checkpointing in ``rules/checkpointing.py``; kvcache in
``rules/kvcache.py``; vectordb in ``rules/vectordb.py``) is one module and one
entry in each table below, plus its case in ``family``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dliobench.base.errors import InputError
from dliobench.report.rules import (
    checkpointing,
    ckpt_set,
    division,
    kvcache,
    runset,
    training,
    vectordb,
)
from dliobench.report.rules.finding import Finding
from dliobench.report.rules.subject import load
from dliobench.report.runs import Run, find_run_dirs
from dliobench.results.files import read_result

RunCheck = Callable[[Run, str], Finding]
SetCheck = Callable[[list[Run], str], Finding]
DIVISIONS = ("closed", "open")

RUN_CHECKS: dict[str, list[RunCheck]] = {
    "training": [training.check_complete, division.check_workload, division.check_accelerator,
                 training.check_dataset_size, training.check_au_floor,
                 division.check_parameters, division.check_odirect,
                 training.check_data_origin, training.check_provenance],
    "checkpointing": [training.check_complete, checkpointing.check_model,
                      checkpointing.check_processes, checkpointing.check_fsync,
                      checkpointing.check_reads_from_storage, training.check_provenance],
    "kvcache": [training.check_complete, kvcache.check_option, kvcache.check_length,
                kvcache.check_reads_from_storage, training.check_provenance],
    "vectordb": [training.check_complete, vectordb.check_index_type, vectordb.check_runtime,
                 vectordb.check_recall, training.check_provenance],
}
SET_CHECKS: dict[str, list[SetCheck]] = {
    "training": [runset.check_run_count, runset.check_warmup, runset.check_run_spread,
                 runset.check_consecutive],
    "checkpointing": [ckpt_set.check_counts, ckpt_set.check_split_gap,
                      ckpt_set.check_consecutive],
    "kvcache": [kvcache.check_trials, runset.check_consecutive],
    "vectordb": [vectordb.check_runs, runset.check_consecutive],
}


def family(run: Run) -> str:
    """Which rules a run falls under: a KV-cache run's, a checkpoint-only run's, else
    training's."""
    if kvcache.is_kvcache(run):
        return "kvcache"
    if vectordb.is_vectordb(run):
        return "vectordb"
    return "checkpointing" if checkpointing.is_checkpointing(run) else "training"


def load_runs(folders: Iterable[Path]) -> list[Run]:
    """Every run folder's result (InputError, exit 2, for a folder that is not one)."""
    return [load(folder, read_result(folder)) for folder in folders]


def defined_by_rules(run: Run) -> bool:
    """Whether MLPerf Storage's rules define the run's workload: a v3.0 training workload, a
    Table 2 checkpoint model, the KV cache or the vector database."""
    kind = family(run)
    if kind in ("kvcache", "vectordb"):
        return True
    known = checkpointing.TABLE_RANKS if kind == "checkpointing" else division.SUBMITTABLE
    return run.workload in known


@dataclass(frozen=True)
class Selection:
    """The runs ``check`` judges, and the runs found below a folder that it leaves out."""

    judged: list[Run]
    skipped: list[Run]

    def families(self) -> dict[str, int]:
        """Judged runs per family of rules, in the registry's order."""
        counts = {kind: sum(family(r) == kind for r in self.judged) for kind in RUN_CHECKS}
        return {kind: n for kind, n in counts.items() if n}


def _named(given: str | Path) -> Path:
    path = Path(given)
    return (path.parent if path.name == "result.json" and path.is_file() else path).resolve()


def select(paths: Iterable[str | Path]) -> Selection:
    """The runs named (a run folder or its result.json) and, below the folders named, the
    runs of a run set (``run_set`` in result.json) or of a workload the rules define; the
    others found below a folder (``make run``'s default workload, a tiny test) are skipped,
    as nobody meant them as a submission. InputError (exit 2) when nothing is left."""
    paths = list(paths)
    named = {_named(p) for p in paths}
    judged: list[Run] = []
    skipped: list[Run] = []
    for run in load_runs(find_run_dirs(paths)):
        keep = run.path.resolve() in named or run.place is not None or defined_by_rules(run)
        (judged if keep else skipped).append(run)
    if not judged:
        listed = ", ".join(f"{r.run_id} ({r.workload or 'unnamed'})" for r in skipped)
        raise InputError(f"{', '.join(map(str, paths))} holds no run set and no run of a "
                         f"workload MLPerf Storage's rules define (skipped {listed}); name a "
                         "run's folder to check that run anyway")
    return Selection(judged, skipped)


def apply(runs: list[Run], division_name: str = "closed") -> list[Finding]:
    """Every check of each run's family, then every set check of each benchmark setup."""
    findings: list[Finding] = []
    setups: dict[tuple[str, tuple[str, str, int, int]], list[Run]] = {}
    for run in runs:
        kind = family(run)
        findings.extend(check(run, division_name) for check in RUN_CHECKS[kind])
        setups.setdefault((kind, run.setup()), []).append(run)
    for (kind, _), members in setups.items():
        findings.extend(check(members, division_name) for check in SET_CHECKS[kind])
    return findings
