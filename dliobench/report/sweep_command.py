"""``dliobench sweep``: a sweep file, or a workload swept over ranks only, run point by point
(or searched for the most accelerators it sustains), then reported; with ``--dry-run`` only
checked and listed. The points themselves are ``report.sweep``, the search
``report.maxaccel``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dliobench.report.sweep import PointOutcome, SweepSpec


@dataclass(frozen=True)
class SweepAsked:
    """``dliobench sweep``'s options."""

    output: str | None = None  # the folder the sweep's folder goes into
    dry_run: bool = False
    find_max_accelerators: bool = False
    accelerator: str | None = None
    max_accelerators: int = 64
    timeout: float | None = None  # per point, seconds


def sweep(items: list[str], asked: SweepAsked) -> int:
    """Run the sweep (or the max-accelerator search) and report; 1 when a point failed (or
    the search found nothing), else 0."""
    from dliobench.report.maxaccel import find_max_accelerators
    from dliobench.report.sweep import run_sweep

    spec = sweep_spec(items, asked.output)
    if asked.dry_run:
        return _dry_run(spec)
    if asked.find_max_accelerators:
        search = find_max_accelerators(spec, asked.accelerator or "", asked.max_accelerators,
                                       asked.timeout)
        print(search.sentence(spec.workload.stem.split("_")[0]))
        print(f"runs: {search.folder} ({len(search.probes)} probes)")
        _report(search.folder, any(p.run_dir for p in search.probes))
        return 0 if search.best is not None and search.error is None else 1
    folder, outcomes = run_sweep(spec, asked.timeout, _say_point)
    failed = [o for o in outcomes if o.error]
    for o in outcomes:
        print(f"{o.settings.get('output.label') or o.name}: {point_status(o)}")
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} points ran; runs in {folder}")
    _report(folder, len(failed) < len(outcomes))
    return 1 if failed else 0


def sweep_spec(items: list[str], output: str | None) -> SweepSpec:
    """A sweep file (a path, or a shipped sweep's name), or a workload to sweep over ranks
    only; then the overrides that follow it, and the output folder when given."""
    from dliobench.config import yamlfile
    from dliobench.config.shipped import find, workload_path
    from dliobench.report.sweep import SweepSpec, load_sweep, with_overrides

    first, overrides = items[0], items[1:]
    path = Path(first)
    if not path.exists() and path.suffix not in (".yaml", ".yml"):
        path = find(first, "configs") or path  # a shipped sweep file's name
    doc = yamlfile.read(path, "sweep file") if path.is_file() else None
    if isinstance(doc, dict) and "workload" in doc:
        spec = load_sweep(path)
    else:
        workload = workload_path(first)
        spec = SweepSpec(name=workload.stem, workload=workload, overrides=[], axes={})
    return replace(with_overrides(spec, overrides),
                   output=Path(output) if output else spec.output)


def _say_point(n: int, of: int, label: str, outcome: PointOutcome | str | None) -> None:
    """A sweep's progress: point n of N, its label, running (then its progress lines) or
    how it ended."""
    if outcome is None or isinstance(outcome, str):
        print(f"point {n} of {of}: {label}: {outcome or 'running'}", flush=True)
        return
    took = f" in {outcome.seconds:.1f} s" if outcome.seconds is not None else ""
    print(f"point {n} of {of}: {label}: {point_status(outcome)}{took}", flush=True)


def point_status(outcome: PointOutcome) -> str:
    """A point's outcome in a few words: its error, or its AU (none with compute 0) with the
    rates it read at (as the run's console prints them) and what limited it."""
    from dliobench.results import figures

    if outcome.error or outcome.result is None:
        return f"error: {outcome.error}"
    result = outcome.result
    verdict = result.get("verdict") or {}
    rates = f"{figures.text('samples_per_s', result)}, {figures.text('read_MB_per_s', result)}"
    if verdict.get("limiter") == "not applicable":
        return f"{rates} (compute 0: no AU)"
    return f"AU {figures.text('au', result)}, {rates}" + (
        f" ({verdict['limiter']}-limited)" if verdict.get("meets_floor") is False else "")


def _dry_run(spec: SweepSpec) -> int:
    """List every point with the settings that differ between points, all checked."""
    from dliobench.config.secrets import redact_argv
    from dliobench.report.sweep import check_points, command, lacking, point_name, shown_settings

    checked = check_points(spec)
    print(f"sweep {spec.name}: {len(checked)} point(s), workload {spec.workload}, fixed "
          f"overrides: {shlex.join(redact_argv(spec.overrides)) or 'none'}")
    missing = 0
    for ranks, settings, config in checked:
        shown = ", ".join(f"{k}={v}" for k, v in shown_settings(settings).items()) or \
            "(the workload as is)"
        lacks = lacking(config)
        missing += lacks is not None
        print(f"  {point_name(ranks, settings)}: {ranks} rank(s); {shown}; "
              f"{config.dataset.num_files_train} {config.dataset.format} files in "
              f"{config.dataset.data_folder}, {config.train.computation_time:g} s/batch"
              + (f"; cannot run here: {lacks}" if lacks else ""))
    ranks, settings, _ = checked[0]
    out = spec.output / "<sweep>" / point_name(ranks, settings)
    print(f"first command: {shlex.join(redact_argv(command(spec, ranks, settings, out)))}")
    if missing:
        print(f"{missing} of {len(checked)} point(s) cannot run here (what each lacks is said "
              "above); nothing was run")
        return 1
    print("all points load; nothing was run (drop --dry-run to run them)")
    return 0


def _report(folder: Path, any_run: bool) -> None:
    """End a sweep with its report (in the sweep folder)."""
    if not any_run:
        return
    from dliobench.report.html import write_report

    print(f"report: {write_report([folder], folder / 'report')}")
