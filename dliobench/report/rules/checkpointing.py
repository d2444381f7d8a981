"""Checks of one checkpoint-only run against MLPerf Storage's checkpointing rules
(Submission_guidelines.md 2.2): a Table 2 model at its full size, CLOSED's process counts,
fsync, reads from storage. The runs of a setup together: ``rules/ckpt_set.py``."""

from __future__ import annotations

from dliobench.report.rules.finding import GUIDELINES_MD, Finding, Rule, finding
from dliobench.report.runs import Run
from dliobench.results.storage_reads import read_origin

MODELS = Rule(GUIDELINES_MD, "§2.2.1 models (Table 2)")
EXECUTION = Rule(GUIDELINES_MD, "§2.2.2 Benchmark Execution")
OPEN_CLOSED = Rule(GUIDELINES_MD, "§2.2.5 OPEN vs CLOSE submissions")
# Table 2's processes per model; CLOSED's subset mode runs on one host of 8 (mlpstorage's
# LLM_SUBSET_PROCS, mlpstorage/config.py@caa90c9c7d6a543de815222fff834a846823f922).
TABLE_RANKS = {"llama3_8b": 8, "llama3_70b": 64, "llama3_405b": 512, "llama3_1t": 1024}
SUBSET_RANKS = 8


def is_checkpointing(run: Run) -> bool:
    """Whether the run is a checkpoint-only run (the checkpointing family)."""
    return (run.result.get("checkpoint") or {}).get("workflow") == "checkpoint-only"


def _layout(run: Run) -> dict:
    return dict(run.result["checkpoint"]["layout"])


def check_model(run: Run, division: str) -> Finding:
    """The model is one of Table 2's, written at full size (no ``checkpoint.scale``)."""
    layout = _layout(run)
    known = run.workload in TABLE_RANKS
    full = layout.get("scale") == 1.0
    said = (f"{run.workload} is {'' if known else 'not '}a Table 2 model"
            + ("" if full else f", scaled down by {layout.get('scale')}"))
    return finding("model", known and full, run.run_id, said, MODELS)


def check_processes(run: Run, division: str) -> Finding:
    """CLOSED: Table 2's process count (default mode) or one host of 8 (subset); OPEN: a
    multiple of TP x PP."""
    layout = _layout(run)
    launched, mode = int(layout["launched_ranks"]), layout["mode"]
    group = int(layout["tensor_parallelism"]) * int(layout["pipeline_parallelism"])
    if division == "open":
        ok = launched % group == 0 or mode == "subset"
        return finding("processes", ok, run.run_id, f"{launched} processes in {mode} mode; "
                       f"OPEN takes multiples of TP x PP = {group}", OPEN_CLOSED)
    need = SUBSET_RANKS if mode == "subset" else TABLE_RANKS.get(run.workload)
    ok = need is not None and launched == need and int(layout["layout_ranks"]) == (
        TABLE_RANKS.get(run.workload))
    return finding("processes", ok, run.run_id,
                   f"{launched} processes run a {layout['layout_ranks']}-rank layout in {mode} "
                   f"mode; CLOSED takes {need or 'a Table 2 model'}", MODELS)


def check_fsync(run: Run, division: str) -> Finding:
    """Checkpoint writes were fsynced."""
    ok = bool(run.result["checkpoint"].get("fsync"))
    return finding("fsync", ok, run.run_id,
                   f"checkpoint writes {'were' if ok else 'were not'} fsynced", EXECUTION)


def check_reads_from_storage(run: Run, division: str) -> Finding:
    """The reads followed a cache drop (eviction) or wrote >= 3x the clients' memory."""
    origin = read_origin(run.result)  # the rule every output prints
    if origin.state == "no reads":
        return finding("reads from storage", None, run.run_id, "the run read no checkpoint",
                       EXECUTION)
    return finding("reads from storage", origin.state == "storage", run.run_id,
                   f"reads reached storage ({origin.how})" if origin.state == "storage" else
                   "reads may have come from the page cache: nothing was evicted and less "
                   "than 3x the clients' memory was written", EXECUTION)
