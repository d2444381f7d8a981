"""The work of the commands that read result folders or plan a workload without running
it: ``report``, ``recover``, ``check``, ``predict``, ``datasize``, ``keys`` and
``show-config``, each one function the command line calls with its parsed arguments; they
print what they find.
(``sweep`` is ``report.sweep_command``; the commands that run on every rank are
``run.commands``.)
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dliobench.base.errors import ConfigError, DlioBenchError, InputError

if TYPE_CHECKING:
    from dliobench.config.schema import Config

log = logging.getLogger("dliobench")


def write_reports(runs: list[str], out: str | None, timeline_run: str | None,
                  trace: bool) -> None:
    """``dliobench report``: report.html, PNGs and runs.csv of the runs (in ``out`` when
    given), and each run's trace.json with ``trace``."""
    from dliobench.report.html import write_report
    from dliobench.report.runs import find_run_dirs
    from dliobench.results.trace import write_trace

    if out:
        from dliobench.config.folders import folder_problem

        problem = folder_problem(out)
        if problem:
            raise ConfigError(f"-o {out} {problem}; give another folder")
    if trace:  # into -o when given: the runs' folders stay as they were
        for run_dir in find_run_dirs(runs):
            dest = Path(out) / "traces" / f"{run_dir.name}.trace.json" if out else None
            try:
                print(f"trace: {write_trace(run_dir, dest)}")
            except DlioBenchError as exc:  # e.g. a partial run without steps: skip it
                log.warning("%s", exc)
    page = write_report(runs, Path(out) if out else None, timeline_run)
    print(f"report: {page}")


def recover_runs(runs: list[str]) -> None:
    """``dliobench recover``: assemble the result of run folders a killed job left, from
    their ranks' journals; a folder holding a complete result is refused."""
    from dliobench.results.console import show_recovered
    from dliobench.results.files import read_result
    from dliobench.results.recover import recover

    for given in runs:
        run_dir = Path(given)
        status = None
        with contextlib.suppress(DlioBenchError):  # none, or unreadable: assemble it
            status = read_result(run_dir)["status"]
        if status == "complete":
            raise InputError(f"{run_dir} holds a complete result already; there is nothing "
                             "to recover")
        where, result = recover(run_dir)
        show_recovered(where, result)
        if "kvcache" in result:  # the cache entries the killed run left, found by their lock
            from dliobench.run.kvcache.leftovers import sweep_tier

            kv = (result.get("config") or {}).get("kvcache") or {}
            for sentence in sweep_tier(str(kv.get("cache_dir") or "")):
                print(sentence)


def check_runs(runs: list[str], division: str, as_json: bool, details: bool = False) -> int:
    """``dliobench check``: MLPerf Storage's rules applied to the runs named and the run sets
    below the folders named (``registry.select`` says which are skipped); 1 when any finding
    fails, else 0."""
    from dliobench.report.rules import registry, render
    from dliobench.report.rules.finding import failed

    chosen = registry.select(runs)
    findings = registry.apply(chosen.judged, division)
    if as_json:
        print(render.as_json(findings, division, chosen))
    else:
        render.print_text(findings, division, chosen, details)
    return 1 if failed(findings) else 0


@dataclass(frozen=True)
class PredictAsked:
    """``dliobench predict``'s options: the scale, and the runs that calibrate it."""

    accelerators: int | None
    hosts: int
    host_memory: int | None
    write_rate: float | None
    checkpoint_seconds: float | None
    from_runs: list[str] | None = None
    check: list[str] | None = None
    plot: Path | None = None
    as_json: bool = False


def predict_workload(config: Config, asked: PredictAsked) -> None:
    """``dliobench predict``: what the workload demands at the scale asked for (a table, or
    JSON), projected from measured runs with ``--from``."""
    import json

    from dliobench.report.predict import Scale, predict, table
    from dliobench.results.sysinfo import host_memory_bytes

    if (asked.check or asked.plot) and not asked.from_runs:
        raise ConfigError("--check and --plot go with --from RESULT_DIR (the runs that "
                          "calibrate the projection)")
    calibrated = _calibrated(config, asked) if asked.from_runs else None
    accelerators = asked.accelerators or (calibrated["projection"][-1]["accelerators"]
                                          if calibrated else 1)
    if asked.hosts > accelerators:
        raise ConfigError(f"--hosts {asked.hosts} is more than --accelerators "
                          f"{accelerators}; give at most one host per accelerator")
    scale = Scale(accelerators, asked.hosts, asked.host_memory or host_memory_bytes(),
                  asked.write_rate, asked.checkpoint_seconds)
    figures = predict(config, scale)
    if calibrated:
        figures["calibrated"] = calibrated
    if asked.as_json:
        print(json.dumps(figures, indent=1))
        return
    print(table(figures))
    if calibrated:
        from dliobench.report.projection import table as projection_table

        print("\n" + projection_table(calibrated))
        print(f"  figure: {calibrated['figure']}")


def _calibrated(config: Config, asked: PredictAsked) -> dict[str, Any]:
    """`predict --from`: fit the runs, project the workload, draw the figure."""
    from dliobench.report.calibrate import fit, load_points
    from dliobench.report.plots.projection import draw
    from dliobench.report.projection import project

    checks = load_points(asked.check)[0] if asked.check else []
    doc = project(config, fit(asked.from_runs or []), asked.accelerators, checks)
    doc["figure"] = str(draw(doc, asked.plot or Path("projection.png")))
    return doc


def datasize(config: Config, accelerators: int, hosts: int,
             host_memory_gb: float | None) -> None:
    """``dliobench datasize``: how many files an honest run needs (MLPerf Storage's rule),
    and which of its two bounds decides."""
    from dliobench.dataset.datasize import MEMORY_FACTOR, MIN_STEPS, required_files
    from dliobench.results.sysinfo import host_memory_bytes

    # GiB, as mlpstorage's --client-host-memory-in-gb (x 1024**3)
    memory = int(host_memory_gb * 2**30) if host_memory_gb else host_memory_bytes()
    size = required_files(config, accelerators, hosts, memory)
    accel = config.train.accelerator or "emulated"
    print(f"{config.name} with {accelerators} {accel} accelerator(s) on {hosts} host(s) "
          f"of {memory / 2**30:.1f} GiB: dataset.num_files_train={size.files} "
          f"({size.bytes / 1e9:,.1f} GB)")
    print(f"  {MEMORY_FACTOR}x host memory needs {size.files_for_memory} files; "
          f"{MIN_STEPS} steps per accelerator need {size.files_for_steps} files "
          f"(the {size.deciding_rule} rule decides)")


def list_keys(section: str | None = None) -> None:
    """``dliobench keys [SECTION]``: every configuration key (or those of one section, e.g.
    ``reader`` or ``storage``) with its default, unit, choices, meaning and DLIO's
    spellings of it; an unknown section is a ConfigError naming the sections."""
    from dliobench.config.load import ALIASES, FIELDS

    names = [n for n in sorted(FIELDS) if section is None or n.startswith(f"{section}.")]
    if section is not None and not names and section != "accelerators":
        sections = sorted({n.split(".")[0] for n in FIELDS} | {"accelerators"})
        raise ConfigError(f"there is no configuration section '{section}'; the sections are "
                          f"{', '.join(sections)}")
    by_key: dict[str, list[str]] = {}
    for alias, canonical in ALIASES.items():
        by_key.setdefault(canonical, []).append(alias)
    units = {"seconds": "seconds; also {mean: S, stdev: S}", "size": "bytes; also 64KiB, 1.5MB"}
    for name in names:
        f = FIELDS[name]
        meta = f.metadata
        choices = f" ({'|'.join(meta['choices'])})" if meta["choices"] else ""
        unit = f" [{units[meta['kind']]}]" if meta["kind"] in units else ""
        aka = f"  [also: {', '.join(sorted(by_key[name]))}]" if name in by_key else ""
        print(f"{name} = {f.default!r}{choices}{unit}\n    {meta['help']}{aka}")
    if section in (None, "accelerators"):
        print("accelerators.<name> = {computation_time: S, au: F[, computation_time_stdev: S]}"
              "\n    a workload's accelerator profiles: compute seconds per batch and AU floor; "
              "train.accelerator (or --accelerator) picks one")


def show_config(config: Config) -> None:
    """``dliobench show-config``: the resolved configuration as YAML, with the checkpoint's
    layout as comments when the workload writes a transformer's checkpoints."""
    import yaml

    from dliobench.results.files import config_dict

    print(yaml.safe_dump(config_dict(config), sort_keys=False), end="")
    if config.workflow.checkpoint and config.model.num_layers:
        from dliobench.run.checkpoint.layout import describe, layout_for

        lines = describe(layout_for(config, launched=1))  # DP: model.parallelism.data, else 1
        print("\n".join(f"# {line}" for line in lines))
