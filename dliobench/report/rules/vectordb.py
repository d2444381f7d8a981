"""Checks of vector-database runs against MLPerf Storage's vector-database rules, as
upstream's code states them: index types by division (``mlpstorage_py/config.py``@be69aeb5
``VDB_INDEX_TYPES_CLOSED`` DISKANN, HNSW, AISAQ; OPEN adds IVF_FLAT, IVF_SQ8, FLAT), at least
30 s of queries (``mlpstorage_py/rules/run_checkers/vectordb.py``@0868711a
``MIN_RUNTIME_SECONDS``), a benchmark result being the mean of 5 consecutive runs on one
dataset generated once (``Submission_guidelines.md``@caa90c9c, Definitions), and ours: recall@k
at or above the run's ``vectordb.min_recall`` (upstream published an AISAQ run at recall 0.00,
mlcommons/storage issue #805), from the same index for every run of the set."""

from __future__ import annotations

from typing import Any

from dliobench.config.vectordb_keys import INDEX_TYPES, INDEX_TYPES_CLOSED
from dliobench.report.rules.finding import (
    GUIDELINES_MD,
    VDB_CHECKER,
    VDB_CONFIG,
    Finding,
    Rule,
    finding,
)
from dliobench.report.rules.runset import complete
from dliobench.report.rules.subject import setup_text
from dliobench.report.runs import Run

INDEX_RULE = Rule(VDB_CONFIG, "VDB_INDEX_TYPES_CLOSED / VDB_INDEX_TYPES")
RUNTIME_RULE = Rule(VDB_CHECKER, "VectorDBRunRulesChecker.MIN_RUNTIME_SECONDS")
RESULT_RULE = Rule(GUIDELINES_MD, "3 Definitions: a benchmark result is the mean of 5 runs")
RECALL_RULE = Rule(VDB_CHECKER, "ours: recall@k at or above vectordb.min_recall")
MIN_RUNTIME_S = 30
RUNS = 5


def is_vectordb(run: Run) -> bool:
    """Whether the run is a vector-database run."""
    return "vectordb" in run.result


def _v(run: Run) -> dict[str, Any]:
    return run.result["vectordb"]


def check_index_type(run: Run, division: str) -> Finding:
    """The index type is one the division allows."""
    kind = str(_v(run).get("index_type", "")).lower()
    allowed = INDEX_TYPES_CLOSED if division == "closed" else INDEX_TYPES
    return finding("index type", kind in allowed, run.run_id,
                   f"index {kind.upper()}; {division.upper()} allows "
                   + ", ".join(a.upper() for a in allowed), INDEX_RULE)


def check_runtime(run: Run, division: str) -> Finding:
    """The queries ran for at least 30 s (the measured window, whatever the mode)."""
    window = float(_v(run).get("window_s") or 0)
    return finding("runtime", window >= MIN_RUNTIME_S, run.run_id,
                   f"queried for {window:.1f} s ({_v(run).get('mode')}); the rules ask at "
                   f"least {MIN_RUNTIME_S} s", RUNTIME_RULE)


def check_recall(run: Run, division: str) -> Finding:
    """recall@k reached the run's floor: a run below it is invalid whatever its QPS."""
    v = _v(run)
    return finding("recall", bool(v.get("valid")), run.run_id,
                   f"recall@{v.get('k')} {float(v.get('recall') or 0):.4f} against the floor "
                   f"{v.get('min_recall')}" + ("" if v.get("valid") else
                                               f": invalid ({v.get('invalid_reason')})"),
                   RECALL_RULE)


def check_runs(runs: list[Run], division: str) -> Finding:
    """Five complete, valid runs of the setup, all on one index (built once)."""
    done = [r for r in complete(runs) if _v(r).get("valid")]
    indexes = {(_v(r).get("index", {}).get("folder"), _v(r).get("index", {}).get("created_at"))
               for r in done}
    ok = len(done) >= RUNS and len(indexes) == 1
    said = (f"{len(done)} complete valid run(s) of {RUNS}"
            + (f", on {len(indexes)} different index builds (the rules build once)"
               if len(indexes) > 1 else ", on one index"))
    return finding("runs", ok, setup_text(runs[0].setup()), said, RESULT_RULE)
