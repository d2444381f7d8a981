"""Checks of one training run: complete, dataset large enough, AU at the floor, provenance."""

from __future__ import annotations

from dliobench.base.units import size_text
from dliobench.dataset.datasize import MEMORY_FACTOR, MIN_STEPS, files_needed
from dliobench.report.rules import references
from dliobench.report.rules.division import tunable as division_tunable
from dliobench.report.rules.finding import GUIDELINES_MD, RULES_MD, Finding, Fix, Rule, finding
from dliobench.report.rules.references import reference
from dliobench.report.runs import Run
from dliobench.results.provenance import config_hash

COMPLETE = Rule(GUIDELINES_MD, "§2.1 Training: benchmark end point")
DATASET = Rule(RULES_MD, "§3.1.2 trainingRecalculateDatasetSize")
AU_FLOOR = Rule(RULES_MD, "§3.3.2 trainingAcceleratorUtilizationCheck")
PROVENANCE = Rule(RULES_MD, "§2.1.6 provenance stamps (core-config hash)")
GENERATED = Rule(RULES_MD, "§1 Introduction (the benchmark generates its data: datagen, "
                 "then run)")


def check_complete(run: Run, division: str) -> Finding:
    """The run ran all its epochs (a partial result is not a benchmark run)."""
    status = run.result.get("status")
    ok = status == "complete"
    said = "ran to its end" if ok else f"is {status}: it ended early " + (
        f"({run.result['errors'][0]})" if run.result.get("errors") else "")
    return finding("complete", ok, run.run_id, f"the run {said.strip()}", COMPLETE,
                   (Fix("status", "complete (run it to its end)", str(status)),))


# The values the dataset-size rule is computed from, each of which the rules may also require.
SIZED_BY = ("dataset.record_length_bytes", "dataset.num_samples_per_file", "reader.batch_size")


def required_values(run: Run, division: str) -> tuple[dict[str, int], str]:
    """The record size, samples per file and batch the dataset rule is computed under: the
    run's own where the division lets it change them, else upstream's file's (a run that
    must go back to 146,600,628-byte records needs files of that size, not of its own
    scaled-down ones); and, in words, which values came from upstream's file."""
    ref = reference(run.workload, run.accelerator)
    tunable = division_tunable(division)
    values, taken = {}, []
    for key in SIZED_BY:
        value = int(run.flat[key])
        if ref is not None and key not in tunable and isinstance(ref.get(key), int) and \
                ref[key] != value:
            taken.append(f"{key.split('.')[-1]} {ref[key]:,} (the run's {value:,} is not "
                         f"{division.upper()}'s to change)")
            value = int(ref[key])
        values[key] = value
    source = references.find(run.workload, run.accelerator)
    said = f" under {source.name}'s {', '.join(taken)}" if taken and source else ""
    return values, said


def check_dataset_size(run: Run, division: str) -> Finding:
    """At least 5x the hosts' memory and 500 steps per accelerator, as ``datasize``, computed
    under the values the rules require with it (``required_values``)."""
    f = run.flat
    memory = run.result.get("machine", {}).get("memory_bytes")
    if not memory:
        return finding("dataset size", None, run.run_id, "the result records no host memory, "
                       "so the 5x rule cannot be applied", DATASET)
    values, under = required_values(run, division)
    record, per_file = values["dataset.record_length_bytes"], values["dataset.num_samples_per_file"]
    batch = values["reader.batch_size"]
    need = files_needed(record, per_file, batch, run.ranks, run.hosts, int(memory))
    files = int(f["dataset.num_files_train"])
    ok = files >= need.files
    verb = "covers" if ok else "is short of"
    had = int(f["dataset.record_length_bytes"]) * int(f["dataset.num_samples_per_file"])
    return finding(
        "dataset size", ok, run.run_id,
        f"{files:,} files ({size_text(files * had)}) {verb} the {need.files:,} "
        f"needed{under}: {MEMORY_FACTOR}x the memory of {run.hosts} host(s) of "
        f"{size_text(int(memory))} needs {need.files_for_memory:,}, {MIN_STEPS} steps of "
        f"{batch} on each of {run.ranks} accelerator(s) need "
        f"{need.files_for_steps:,}", DATASET,
        (Fix("dataset.num_files_train", f"at least {need.files:,}", f"{files:,}"),))


def check_au_floor(run: Run, division: str) -> Finding:
    """The run's AU is at or above the floor upstream's file sets for its workload and
    accelerator (the run's own ``metric.au`` where upstream has no such file)."""
    au = run.result["metrics"].get("au")
    ref = reference(run.workload, run.accelerator)
    source = references.find(run.workload, run.accelerator)
    floor = float(ref["metric.au"] if ref else run.flat["metric.au"])
    whose = (f"the floor of {source.name}" if source else
             "the run's own floor (upstream has no v3.0 file for "
             f"{run.workload or 'this workload'} on {run.accelerator or 'this accelerator'})")
    rule = AU_FLOOR.applied_to(source.name) if source else AU_FLOOR
    need = Fix("AU (storage fast enough for the accelerators emulated)",
               f"at least {100 * floor:.1f} %", "none measured" if au is None else
               f"{100 * au:.1f} %")
    if au is None:
        return finding("AU floor", False, run.run_id, "no AU was measured (too few steps "
                       f"counted); {whose} is {100 * floor:.1f} %", rule, (need,))
    ok = au >= floor
    return finding("AU floor", ok, run.run_id,
                   f"AU {100 * au:.1f} % is {'at or above' if ok else 'below'} {whose}, "
                   f"{100 * floor:.1f} %", rule, (need,))


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
    return finding("provenance", ok, run.run_id, said, PROVENANCE,
                   (Fix("result.json", "as the run wrote it", "edited"),))


def check_data_origin(run: Run, division: str) -> Finding:
    """The run read the benchmark's own synthetic data, not an existing dataset (a DLIO-made
    or the user's own folder read with ``dataset.source: existing``)."""
    origin = str(run.result.get("honesty", {}).get("data_origin") or "")
    if not origin:
        return finding("data origin", True, run.run_id, "the run read data dliobench "
                       "generated (results before data_origin was recorded read nothing else)",
                       GENERATED)
    ok = origin.startswith("synthetic")
    said = ("the run read synthetic files generated by dliobench" if ok else
            f"the run read {origin.split(' in ')[0]}; a submission reads the data the "
            "benchmark generates")
    return finding("data origin", ok, run.run_id, said, GENERATED,
                   (Fix("dataset.source", "'generate'", "'existing'"),))
