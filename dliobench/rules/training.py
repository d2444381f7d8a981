"""Checks of one training run: complete, dataset large enough, AU at the floor, provenance."""

from __future__ import annotations

from dliobench.dataset.datasize import MEMORY_FACTOR, MIN_STEPS, files_needed
from dliobench.results.provenance import config_hash
from dliobench.rules.finding import GUIDELINES_MD, RULES_MD, Finding, Rule, finding
from dliobench.rules.subject import Run, reference
from dliobench.units import size_text

COMPLETE = Rule(GUIDELINES_MD, "§2.1 Training: benchmark end point")
DATASET = Rule(RULES_MD, "§3.1.2 trainingRecalculateDatasetSize")
AU_FLOOR = Rule(RULES_MD, "§3.3.2 trainingAcceleratorUtilizationCheck")
PROVENANCE = Rule(RULES_MD, "§2.1.6 provenance stamps (core-config hash)")


def check_complete(run: Run, division: str) -> Finding:
    """The run ran all its epochs (a partial result is not a benchmark run)."""
    status = run.result.get("status")
    ok = status == "complete"
    said = "ran to its end" if ok else f"is {status}: it ended early " + (
        f"({run.result['errors'][0]})" if run.result.get("errors") else "")
    return finding("complete", ok, run.run_id, f"the run {said.strip()}", COMPLETE)


def check_dataset_size(run: Run, division: str) -> Finding:
    """At least 5x the hosts' memory and 500 steps per accelerator, as ``datasize``."""
    f = run.flat
    memory = run.result.get("machine", {}).get("memory_bytes")
    if not memory:
        return finding("dataset size", None, run.run_id, "the result records no host memory, "
                       "so the 5x rule cannot be applied", DATASET)
    record, per_file = int(f["dataset.record_length_bytes"]), int(f["dataset.num_samples_per_file"])
    need = files_needed(record, per_file, int(f["reader.batch_size"]), run.ranks, run.hosts,
                        int(memory))
    files = int(f["dataset.num_files_train"])
    ok = files >= need.files
    verb = "covers" if ok else "is short of"
    return finding(
        "dataset size", ok, run.run_id,
        f"{files:,} files ({size_text(files * record * per_file)}) {verb} the {need.files:,} "
        f"needed: {MEMORY_FACTOR}x the memory of {run.hosts} host(s) of "
        f"{size_text(int(memory))} needs {need.files_for_memory:,}, {MIN_STEPS} steps of "
        f"{f['reader.batch_size']} on each of {run.ranks} accelerator(s) need "
        f"{need.files_for_steps:,}", DATASET)


def check_au_floor(run: Run, division: str) -> Finding:
    """The run's AU is at or above the workload's floor for its accelerator."""
    au = run.result["metrics"].get("au")
    ref = reference(run.workload, run.accelerator)
    floor = float(ref["metric.au"] if ref else run.flat["metric.au"])
    whose = (f"{run.workload}'s floor for {run.accelerator or 'its accelerator'}" if ref
             else "the run's own floor (no shipped workload to take it from)")
    if au is None:
        return finding("AU floor", False, run.run_id, "no AU was measured (too few steps "
                       f"counted); {whose} is {100 * floor:.1f} %", AU_FLOOR)
    ok = au >= floor
    return finding("AU floor", ok, run.run_id,
                   f"AU {100 * au:.1f} % is {'at or above' if ok else 'below'} {whose}, "
                   f"{100 * floor:.1f} %", AU_FLOOR)


def check_provenance(run: Run, division: str) -> Finding:
    """The result carries its provenance, and its configuration is the one the run hashed."""
    stamp = run.result.get("provenance")
    if not isinstance(stamp, dict):
        return finding("provenance", None, run.run_id, "written before results carried "
                       f"provenance (schema {run.result.get('schema_version')})", PROVENANCE)
    ok = stamp.get("config_sha256") == config_hash(run.result["config"])
    said = ("its configuration hashes to the recorded config_sha256" if ok else
            "its configuration does not hash to the recorded config_sha256: the result was "
            "edited after the run")
    return finding("provenance", ok, run.run_id, said, PROVENANCE)
