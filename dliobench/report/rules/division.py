"""CLOSED and OPEN: which workloads and accelerators a division takes, and which parameters a
run may change from the workload as upstream defines it.

A run is compared with upstream's own v3.0 file for its workload and accelerator (kept byte
for byte in ``rules/upstream/``, cited path@commit in ``rules/references.py``), loaded the
way dliobench loads any workload file, never with dliobench's shipped workload files.
"""

from __future__ import annotations

import json
from typing import Any

from dliobench.report.rules import references
from dliobench.report.rules.finding import EDITIONS_YAML, RULES_MD, Finding, Fix, Rule, finding
from dliobench.report.rules.references import reference
from dliobench.report.runs import Run

WORKLOADS = Rule(EDITIONS_YAML, "3.0 workloads.closed.training")
ACCELERATORS = Rule(RULES_MD, "§4.3.4 Table 3 (Divisions)")
CLOSED_PARAMS = Rule(RULES_MD, "§3.6.2 trainingClosedSubmissionParameters")
OPEN_PARAMS = Rule(RULES_MD, "§3.6.3 trainingOpenSubmissionParameters")

ODIRECT_WORKLOADS = ("unet3d",)  # §3.6.2: "Enable ODIRECT mode for Unet3D Training"
# editions.yaml, edition 3.0: the training workloads and accelerators CLOSED and OPEN take.
SUBMITTABLE = {"unet3d": ("b200", "mi355"), "retinanet": ("b200", "mi355")}
WHATIF = ("h100", "a100")  # Table 3: "whatif only"

# §3.6.2's table in dliobench's key names (reader.computation_threads, reader.transfer_size
# and storage.storage_options.prefetch_window have no dliobench counterpart), plus
# checkpoint.checkpoint_folder, which mlpstorage's own checker also lets CLOSED change
# (mlpstorage_py/rules/run_checkers/training.py@1bd3002378e41ad169a479d577f6c7648f00cbc8
# CLOSED_ALLOWED_PARAMS).
CLOSED_TUNABLE = frozenset({
    "dataset.num_files_train", "dataset.num_subfolders_train", "dataset.data_folder",
    "reader.read_threads", "reader.prefetch_size", "reader.odirect",
    "checkpoint.checkpoint_folder", "storage.storage_type", "storage.storage_root",
})
# §3.6.3: what OPEN may change beyond CLOSED ("framework" is the loader here).
OPEN_TUNABLE = frozenset({"dataset.format", "dataset.num_samples_per_file",
                          "reader.data_loader"})
# dliobench's own keys that change neither the emulated job nor its reads of the storage
# under test (where results go, how failures are reported, checks that only add work, the
# shuffle seed mlpstorage itself changes between runs): not parameters in the rules' sense.
HARNESS = frozenset({
    "output.folder", "output.label", "output.layout", "metric.fail_below_floor",
    "metric.client_ceiling", "metric.client_cpu_busy",
    "train.stall_timeout_s", "train.seed", "workflow.generate_data", "workflow.metadata",
    "dataset.check_free_space", "dataset.write_odirect", "dataset.sample_checksums",
    "reader.verify_samples", "checkpoint.keep", "storage.keep_staged", "storage.drop_cache",
    "storage.lustre_stripe_count", "storage.lustre_stripe_size",
})
# Judged by a check of its own (check_accelerator): upstream's files name no accelerator key.
JUDGED_ELSEWHERE = frozenset({"train.accelerator"})


def check_workload(run: Run, division: str) -> Finding:
    """The workload is one of v3.0's submittable training workloads."""
    ok = run.workload in SUBMITTABLE
    said = "is" if ok else "is not"
    need = " or ".join(SUBMITTABLE)
    return finding("workload", ok, run.run_id,
                   f"{run.workload or 'an unnamed workload'} {said} a v3.0 {division.upper()} "
                   f"training workload ({', '.join(SUBMITTABLE)})", WORKLOADS,
                   (Fix("model.name", need, run.workload or "''"),))


def check_accelerator(run: Run, division: str) -> Finding:
    """The emulated accelerator is submittable (b200, mi355), not whatif only (h100, a100)."""
    accel, how = run.accelerator, run.accelerator_how
    allowed = SUBMITTABLE.get(run.workload, ("b200", "mi355"))
    if accel in allowed:
        return finding("accelerator", True, run.run_id,
                       f"{accel} ({how}) is submittable in CLOSED and OPEN", ACCELERATORS)
    fix = Fix("train.accelerator", " or ".join(allowed), accel or "''")
    if not accel:
        return finding("accelerator", False, run.run_id, f"the accelerator is {how}",
                       ACCELERATORS, (fix,))
    why = ("is whatif only, not submittable in CLOSED or OPEN" if accel in WHATIF else
           f"is not one of the v3.0 accelerators ({', '.join(allowed)})")
    return finding("accelerator", False, run.run_id, f"{accel} ({how}) {why}", ACCELERATORS,
                   (fix,))


def check_odirect(run: Run, division: str) -> Finding:
    """O_DIRECT reads, a CLOSED tunable, are for unet3d only (§3.6.2's table says so)."""
    on = bool(run.flat.get("reader.odirect"))
    ok = not on or run.workload in ODIRECT_WORKLOADS
    said = ("reads without O_DIRECT" if not on else
            f"reads with O_DIRECT, which {'' if ok else 'only '}unet3d may")
    return finding("O_DIRECT", ok, run.run_id, f"{run.workload or 'the run'} {said}",
                   CLOSED_PARAMS, (Fix("reader.odirect", "false", "true"),))


def tunable(division: str) -> frozenset[str]:
    """The parameters ``division`` lets a run change from upstream's file."""
    return CLOSED_TUNABLE | (OPEN_TUNABLE if division == "open" else frozenset())


def changed(run: Run) -> dict[str, tuple[Any, Any]] | None:
    """{key: (upstream's value, run's value)} of every parameter the run changed from the
    upstream file of its workload and accelerator, harness keys left out; None when upstream
    has no such file."""
    ref = reference(run.workload, run.accelerator)
    if ref is None:
        return None
    keys = (set(ref) | set(run.flat)) - HARNESS - JUDGED_ELSEWHERE
    return {k: (ref.get(k), run.flat.get(k)) for k in sorted(keys)
            if ref.get(k) != run.flat.get(k)}


def check_parameters(run: Run, division: str) -> Finding:
    """Only the parameters the division lists were changed from upstream's file."""
    rule = OPEN_PARAMS if division == "open" else CLOSED_PARAMS
    diffs = changed(run)
    if diffs is None:
        return finding("parameters", False, run.run_id,
                       f"upstream has no v3.0 file for {run.workload or 'this workload'} on "
                       f"{run.accelerator or 'an unnamed accelerator'} to compare with (it has "
                       f"{', '.join(r.name for r in references.REFERENCES)})", rule)
    ref = references.find(run.workload, run.accelerator)
    assert ref is not None  # changed() found it
    rule = rule.applied_to(ref.name)
    allowed = tunable(division)
    forbidden = {k: v for k, v in diffs.items() if k not in allowed}
    if not forbidden:
        tuned = ", ".join(diffs) or "none"
        return finding("parameters", True, run.run_id,
                       f"only parameters {division.upper()} may change were changed from "
                       f"{ref.name} ({tuned})", rule)
    shown = "; ".join(f"{k} = {_text(new)} ({ref.name}: {_text(old)})"
                      for k, (old, new) in forbidden.items())
    open_only = sorted(set(forbidden) & OPEN_TUNABLE)
    hint = f" ({', '.join(open_only)}: OPEN only)" if open_only else ""
    fixes = tuple(Fix(k, _text(old) + (" (OPEN may change it)" if k in OPEN_TUNABLE else ""),
                      _text(new)) for k, (old, new) in forbidden.items())
    return finding("parameters", False, run.run_id,
                   f"{division.upper()} may not change {shown}{hint}", rule, fixes)


def _text(value: Any) -> str:
    """A configuration value as YAML would read it back (whole: nothing is cut)."""
    return repr(value) if isinstance(value, str) else json.dumps(value)
