"""The command line: the only argv parser; one function per subcommand."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dliobench.cli import parser as cli_parser
from dliobench.comm.watchdog import Watchdog
from dliobench.errors import ConfigError, DlioBenchError, InputError, Terminated
from dliobench.units import size_text

if TYPE_CHECKING:
    from dliobench.comm.world import Comm, World
    from dliobench.config.hydra import CommandLine
    from dliobench.config.schema import Config
    from dliobench.report.sweep import SweepSpec

log = logging.getLogger("dliobench")
T = TypeVar("T")

DEFAULT_WORKLOAD = "default"
BELOW_FLOOR_EXIT = 3  # run --fail-below-floor: the run completed but missed its AU floor


def _workload_path(name: str) -> Path:
    """A workload given as a path, or as a shipped workload's name (``config.shipped``)."""
    from dliobench.config.shipped import workload_path

    return workload_path(name)


def _split(args: argparse.Namespace) -> CommandLine:
    """The workload (a first item without '=', or DLIO's ``workload=NAME``) and the overrides;
    a DLIO name (``unet3d_h100``) also picks the accelerator profile."""
    from dliobench.config.hydra import split

    return split(args.workload, DEFAULT_WORKLOAD, getattr(args, "config_dir", None))


def _load(args: argparse.Namespace) -> tuple[Config, list[str]]:
    from dliobench.config import load as config_mod

    line = _split(args)
    overrides = line.overrides
    if line.accelerator:  # before the overrides: an explicit train.accelerator wins
        overrides = [f"train.accelerator={line.accelerator}", *overrides]
    if getattr(args, "dataset", None):
        overrides = [*overrides, "dataset.source=existing", f"dataset.data_folder={args.dataset}"]
    cfg, warnings = config_mod.load(line.path, overrides, getattr(args, "accelerator", None))
    if line.ignored:
        warnings = [*warnings, "Hydra's own settings do not apply to dliobench, ignored: "
                    + ", ".join(line.ignored)]
    for w in warnings:
        log.warning(w)
    return cfg, warnings


def _world(args: argparse.Namespace) -> tuple[World, Comm]:
    """The job's world under ``--launcher`` (MPI, torchrun, or the one-rank default)."""
    from dliobench.comm.launch import join

    return join(args.launcher)


def _on_every_rank(world: World, comm: Comm, work: Callable[[], T],
                   stall_timeout_s: float) -> T:
    """Run ``work``; under MPI a failing rank names itself and ends the whole job at once,
    and the ranks finish together, watched: MPI_Finalize at exit would wait forever for a
    rank that stopped."""
    try:
        done = work()
        if world.size > 1:
            with Watchdog(stall_timeout_s, world, comm) as watchdog:
                watchdog.beat("waiting for the other ranks to finish")
                comm.barrier()
        return done
    except BaseException as exc:
        if world.size > 1:
            code = exc.exit_code if isinstance(exc, (DlioBenchError, Terminated)) else 1
            if isinstance(exc, Terminated):  # a batch system signals every rank: one line
                if world.is_root:
                    print(f"dliobench: {TERMINATED}", file=sys.stderr, flush=True)
                else:  # rank 0 (signalled too) first writes the partial result and says so
                    time.sleep(TERMINATED_GRACE_S)
            elif world.launcher == "torch" and _torch_peer_lost(exc):
                print(f"dliobench: rank {world.rank} of {world.size} on {world.host} stops: "
                      "another rank ended (its own message says why)", file=sys.stderr,
                      flush=True)
                from dliobench.comm.torch import wait_to_be_stopped

                wait_to_be_stopped()
            else:
                reason = str(exc) or type(exc).__name__
                message = f"rank {world.rank} of {world.size} on {world.host}: {reason}"
                print(f"dliobench: error: {message}", file=sys.stderr, flush=True)
                if world.launcher == "torch":
                    from dliobench.comm.torch import record_failure

                    record_failure(message)
            comm.abort(code)
        raise


def _torch_peer_lost(exc: BaseException) -> bool:
    from dliobench.comm.torch import lost_a_peer

    return lost_a_peer(exc)


def cmd_run(args: argparse.Namespace) -> int:
    """Generate the dataset if needed, train, write results, print the summary."""
    from dliobench.results.summary import print_summary
    from dliobench.run import session as benchmark

    cfg, warnings = _load(args)
    if args.output:
        from dataclasses import replace

        cfg = replace(cfg, output=replace(cfg.output, folder=args.output))
    world, comm = _world(args)
    cfg, warnings = _before_run(cfg, warnings, args, world)
    outcome = _on_every_rank(world, comm, lambda: benchmark.run(
        cfg, world, comm, warnings, show_progress=not args.no_progress),
        cfg.train.stall_timeout_s)
    if outcome.result is not None and outcome.run_dir is not None:
        print_summary(outcome.result, str(outcome.run_dir))
        if "metadata" in outcome.result:
            from dliobench.results.metadata import table

            print(table(outcome.result["metadata"]))
        if args.trace:
            from dliobench.results.trace import write_trace
            print(f"trace: {write_trace(outcome.run_dir)} (open in https://ui.perfetto.dev)")
        if outcome.problem:
            print(f"dliobench: error: {outcome.problem}", file=sys.stderr)
            return 1
        verdict = outcome.result.get("verdict") or {}
        if verdict.get("meets_floor") is False and (args.fail_below_floor
                                                    or cfg.metric.fail_below_floor):
            return BELOW_FLOOR_EXIT
    return 0


def _before_run(cfg: Config, warnings: list[str], args: argparse.Namespace,
                world: World) -> tuple[Config, list[str]]:
    """What a run settles before any work (``cli.preflight``; a refusal is said once, by
    rank 0): every place it writes can be written, the configuration fits the ranks, its
    reads reach storage (the configuration it reads with, and why), a large generation is
    confirmed."""
    from dliobench.cli import preflight
    from dliobench.run.planning import precheck

    preflight.check_outputs(cfg, generating=False)
    if cfg.workflow.checkpoint and not cfg.workflow.train:
        from dliobench.run.checkpoint.run import precheck as checkpoint_precheck

        checkpoint_precheck(cfg, world)
        return cfg, warnings
    precheck(cfg, world, generating=False)
    reads = preflight.reads_from_storage(cfg)
    for sentence in reads.warnings:
        log.warning("%s", sentence)
    if reads.said and world.is_root:
        print(reads.said, flush=True)
    preflight.confirm_generation(reads.config, args.yes, world)
    return reads.config, [*warnings, *reads.warnings]


def cmd_report(args: argparse.Namespace) -> int:
    """Turn result folders into report.html, PNGs and runs.csv (and trace.json with --trace)."""
    from dliobench.report.html import write_report
    from dliobench.report.runs import find_run_dirs
    from dliobench.results.trace import write_trace

    if args.out:
        from dliobench.config.folders import folder_problem

        problem = folder_problem(args.out)
        if problem:
            raise ConfigError(f"-o {args.out} {problem}; give another folder")
    if args.trace:  # into -o when given: the runs' folders stay as they were
        for run_dir in find_run_dirs(args.runs):
            dest = Path(args.out) / "traces" / f"{run_dir.name}.trace.json" if args.out \
                else None
            try:
                print(f"trace: {write_trace(run_dir, dest)}")
            except DlioBenchError as exc:  # e.g. a partial run without steps: skip it
                log.warning("%s", exc)
    page = write_report(args.runs, Path(args.out) if args.out else None, args.timeline_run)
    print(f"report: {page}")
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    """Assemble the result of run folders a killed job left, from their ranks' journals."""
    from dliobench.results.files import read_result
    from dliobench.results.recover import recover

    for given in args.runs:
        run_dir = Path(given)
        status = None
        with contextlib.suppress(DlioBenchError):  # none, or unreadable: assemble it
            status = read_result(run_dir)["status"]
        if status == "complete":
            raise InputError(f"{run_dir} holds a complete result already; there is nothing "
                             "to recover")
        where, result = recover(run_dir)
        ended = "; ".join(f"rank {r['rank']}: {r['steps']} steps, {r['ended']}"
                          for r in result.get("ranks_ended", []))
        print(f"result: {where} (status: {result['status']}; {ended})")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """Write the dataset only (what is missing of it), a large one only once confirmed."""
    from dliobench.cli import preflight
    from dliobench.dataset.generate import generate
    from dliobench.dataset.lock import locked
    from dliobench.run.planning import precheck, resolve

    cfg, _ = _load(args)
    world, comm = _world(args)
    preflight.check_outputs(cfg, generating=True)
    precheck(cfg, world, generating=True)
    preflight.confirm_generation(cfg, args.yes, world)

    def work() -> Any:
        plan = resolve(cfg, world, comm)
        if plan.existing:
            raise ConfigError(f"the dataset in {cfg.dataset.data_folder} is an existing one "
                              "(indexed, not generated by dliobench): there is nothing to "
                              "generate; `dliobench run` reads it")
        with locked(plan.backend, world, exclusive=True, doing="generating"):
            return generate(plan, world, comm, show_progress=not args.no_progress,
                            check=args.verify)

    done = _on_every_rank(world, comm, work, cfg.train.stall_timeout_s)
    if not world.is_root:
        return 0
    if done.files_written:
        rate = done.bytes_written / done.seconds if done.seconds else 0.0
        asked = cfg.dataset.record_length_bytes * cfg.dataset.num_samples_per_file
        print(f"wrote {done.files_written} of {done.files_total} files, "
              f"{size_text(done.bytes_written)} in {done.seconds:.1f} s "
              f"({size_text(rate)}/s) "
              f"to {cfg.dataset.data_folder}; mean file "
              f"{done.bytes_written / done.files_written:,.0f} bytes ({asked:,} requested)")
    else:
        print(f"all {done.files_total} files are already in {cfg.dataset.data_folder}")
    return 0


def cmd_ceiling(args: argparse.Namespace) -> int:
    """Measure (and cache) what this host's loader delivers per rank from memory."""
    from dliobench.run import ceiling, session

    cfg, _ = _load(args)
    world, comm = _world(args)
    value = _on_every_rank(world, comm, lambda: session.measure_ceiling(cfg, world, comm),
                           cfg.train.stall_timeout_s)
    if world.is_root:
        r, d = cfg.reader, cfg.dataset
        rate = value * d.record_length_bytes / 1e6
        print(f"client ceiling of {world.host} for {cfg.name}: {value:,.1f} samples/s per rank "
              f"(about {rate:,.1f} MB/s per rank) with {d.format}, the {r.data_loader} loader, "
              f"{r.read_threads} read threads, batch {r.batch_size}, {world.local_size} "
              f"rank(s) per node; cached in {ceiling.cache_path()}")
        demand = r.batch_size / cfg.train.computation_time if cfg.train.computation_time else 0
        if demand:
            verdict = "can" if demand <= value else "cannot"
            print(f"  each rank demands {demand:,.1f} samples/s at {cfg.train.computation_time:g}"
                  f" s per batch: this client {verdict} keep up, whatever the storage")
    return 0


def cmd_metadata(args: argparse.Namespace) -> int:
    """Measure metadata rates over the dataset's files; write metadata.json, print a table."""
    from dliobench.dataset.lock import locked
    from dliobench.results.metadata import table
    from dliobench.run.metadata import dataset_manifest, metadata_phase, write_metadata
    from dliobench.run.planning import resolve

    cfg, _ = _load(args)
    if args.output:
        from dataclasses import replace

        cfg = replace(cfg, output=replace(cfg.output, folder=args.output))
    world, comm = _world(args)

    def work() -> dict[str, Any]:
        plan = resolve(cfg, world, comm)
        dataset_manifest(plan)  # before the lock, which would create the folder
        with locked(plan.backend, world, exclusive=False, doing="measured"):
            return metadata_phase(plan, world, comm, int(args.max_files or 0))

    done = _on_every_rank(world, comm, work, cfg.train.stall_timeout_s)
    if world.is_root and done:
        print(table(done["metadata"]))
        print(f"result: {write_metadata(cfg, done['metadata'], world.launcher)}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    """Print what the workload demands at the scale asked for (a table, or JSON)."""
    import json

    from dliobench.report.predict import Scale, predict, table
    from dliobench.results.sysinfo import host_memory_bytes

    cfg, _ = _load(args)
    if (args.check or args.plot) and not args.from_runs:
        raise ConfigError("--check and --plot go with --from RESULT_DIR (the runs that "
                          "calibrate the projection)")
    calibrated = _calibrated(cfg, args) if args.from_runs else None
    accelerators = args.accelerators or (calibrated["projection"][-1]["accelerators"]
                                         if calibrated else 1)
    if args.hosts > accelerators:
        raise ConfigError(f"--hosts {args.hosts} is more than --accelerators "
                          f"{accelerators}; give at most one host per accelerator")
    scale = Scale(accelerators, args.hosts, args.host_memory or host_memory_bytes(),
                  args.write_rate, args.checkpoint_seconds)
    figures = predict(cfg, scale)
    if calibrated:
        figures["calibrated"] = calibrated
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(table(figures))
    if calibrated:
        from dliobench.report.projection import table as projection_table

        print("\n" + projection_table(calibrated))
        print(f"  figure: {calibrated['figure']}")
    return 0


def _calibrated(cfg: Config, args: argparse.Namespace) -> dict[str, Any]:
    """`predict --from`: fit the runs, project the workload, draw the figure."""
    from dliobench.report.calibrate import fit, load_points
    from dliobench.report.plots.projection import draw
    from dliobench.report.projection import project

    checks = load_points(args.check)[0] if args.check else []
    doc = project(cfg, fit(args.from_runs), args.accelerators, checks)
    doc["figure"] = str(draw(doc, args.plot or Path("projection.png")))
    return doc


def cmd_datasize(args: argparse.Namespace) -> int:
    """Print how many files an honest run needs (MLPerf Storage's rule)."""
    from dliobench.dataset.datasize import MEMORY_FACTOR, MIN_STEPS, required_files
    from dliobench.results.sysinfo import host_memory_bytes

    cfg, _ = _load(args)
    # GiB, as mlpstorage's --client-host-memory-in-gb (x 1024**3)
    memory = int(args.host_memory_gb * 2**30) if args.host_memory_gb else host_memory_bytes()
    size = required_files(cfg, args.accelerators, args.hosts, memory)
    accel = cfg.train.accelerator or "emulated"
    print(f"{cfg.name} with {args.accelerators} {accel} accelerator(s) on {args.hosts} host(s) "
          f"of {memory / 2**30:.1f} GiB: dataset.num_files_train={size.files} "
          f"({size.bytes / 1e9:,.1f} GB)")
    print(f"  {MEMORY_FACTOR}x host memory needs {size.files_for_memory} files; "
          f"{MIN_STEPS} steps per accelerator need {size.files_for_steps} files "
          f"(the {size.deciding_rule} rule decides)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Apply MLPerf Storage's training rules to result folders: 1 when any finding fails."""
    from dliobench.report.runs import find_run_dirs
    from dliobench.rules import registry, render
    from dliobench.rules.finding import failed

    runs = registry.load_runs(find_run_dirs(args.runs))
    findings = registry.apply(runs, args.division)
    if args.json:
        print(render.as_json(findings, args.division, len(runs)))
    else:
        render.print_table(findings, args.division, len(runs))
    return 1 if failed(findings) else 0


def _sweep_spec(args: argparse.Namespace) -> SweepSpec:
    """A sweep file, or a workload (with overrides) to sweep over ranks only."""
    from dliobench.config import yamlfile
    from dliobench.config.shipped import find
    from dliobench.report.sweep import SweepSpec, load_sweep

    first, overrides = args.sweep[0], args.sweep[1:]
    path = Path(first)
    if not path.exists() and path.suffix not in (".yaml", ".yml"):
        path = find(first, "configs") or path  # a shipped sweep file's name
    doc = yamlfile.read(path, "sweep file") if path.is_file() else None
    if isinstance(doc, dict) and "workload" in doc:
        spec = load_sweep(path)
    else:
        workload = _workload_path(first)
        spec = SweepSpec(name=workload.stem, workload=workload, overrides=[], axes={})
    from dataclasses import replace

    from dliobench.report.sweep import with_overrides

    return replace(with_overrides(spec, overrides),
                   output=Path(args.output) if args.output else spec.output)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a sweep (or the max-accelerator search) and report."""
    from dliobench.report.maxaccel import find_max_accelerators
    from dliobench.report.sweep import run_sweep

    spec = _sweep_spec(args)
    if args.dry_run:
        return _sweep_dry_run(spec)
    if args.find_max_accelerators:
        search = find_max_accelerators(spec, args.accelerator or "", args.max_accelerators,
                                       args.timeout)
        print(search.sentence(spec.workload.stem.split("_")[0]))
        print(f"runs: {search.folder} ({len(search.probes)} probes)")
        _sweep_report(search.folder, any(p.run_dir for p in search.probes))
        return 0 if search.best is not None and search.error is None else 1
    folder, outcomes = run_sweep(spec, args.timeout)
    failed = [o for o in outcomes if o.error]
    for o in outcomes:
        print(f"{o.settings.get('output.label') or o.name}: {_point_status(o)}")
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} points ran; runs in {folder}")
    _sweep_report(folder, len(failed) < len(outcomes))
    return 1 if failed else 0


def _point_status(outcome: Any) -> str:
    """A point's outcome in a few words: its error, its AU, or (compute 0, no AU) its rates."""
    if outcome.error or outcome.result is None:
        return f"error: {outcome.error}"
    m = outcome.result["metrics"]
    verdict = outcome.result.get("verdict") or {}
    if verdict.get("limiter") == "not applicable":
        rate, nbytes = m["samples_per_s"] or 0.0, m["bytes_per_s"] or 0.0
        return f"{rate:,.1f} samples/s, {nbytes / 1e6:,.0f} MB/s (compute 0: no AU)"
    au = m["au"]
    return f"AU {'n/a' if au is None else f'{100 * au:.1f} %'}" + (
        f" ({verdict['limiter']}-limited)" if verdict.get("meets_floor") is False else "")


def _sweep_dry_run(spec: SweepSpec) -> int:
    """List every point with the settings that differ between points, all checked."""
    from dliobench.config.secrets import redact_argv
    from dliobench.report.sweep import check_points, command, point_name, shown_settings

    checked = check_points(spec)
    print(f"sweep {spec.name}: {len(checked)} point(s), workload {spec.workload}, fixed "
          f"overrides: {' '.join(redact_argv(spec.overrides)) or 'none'}")
    for ranks, settings, config in checked:
        shown = ", ".join(f"{k}={v}" for k, v in shown_settings(settings).items()) or \
            "(the workload as is)"
        print(f"  {point_name(ranks, settings)}: {ranks} rank(s); {shown}; "
              f"{config.dataset.num_files_train} {config.dataset.format} files in "
              f"{config.dataset.data_folder}, {config.train.computation_time:g} s/batch")
    ranks, settings, _ = checked[0]
    out = spec.output / "<sweep>" / point_name(ranks, settings)
    print(f"first command: {' '.join(redact_argv(command(spec, ranks, settings, out)))}")
    print("all points load; nothing was run (drop --dry-run to run them)")
    return 0


def _sweep_report(folder: Path, any_run: bool) -> None:
    """End a sweep with its report (in the sweep folder)."""
    if not any_run:
        return
    from dliobench.report.html import write_report

    print(f"report: {write_report([folder], folder / 'report')}")


def cmd_keys(args: argparse.Namespace) -> int:
    """List every configuration key with its default and meaning."""
    from dliobench.config.load import ALIASES, FIELDS

    by_key: dict[str, list[str]] = {}
    for alias, canonical in ALIASES.items():
        by_key.setdefault(canonical, []).append(alias)
    units = {"seconds": "seconds; also {mean: S, stdev: S}", "size": "bytes; also 64KiB, 1.5MB"}
    for name, f in sorted(FIELDS.items()):
        meta = f.metadata
        choices = f" ({'|'.join(meta['choices'])})" if meta["choices"] else ""
        unit = f" [{units[meta['kind']]}]" if meta["kind"] in units else ""
        aka = f"  [also: {', '.join(sorted(by_key[name]))}]" if name in by_key else ""
        print(f"{name} = {f.default!r}{choices}{unit}\n    {meta['help']}{aka}")
    print("accelerators.<name> = {computation_time: S, au: F[, computation_time_stdev: S]}\n"
          "    a workload's accelerator profiles: compute seconds per batch and AU floor; "
          "train.accelerator (or --accelerator) picks one")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print the resolved configuration as YAML."""
    import yaml

    from dliobench.results.files import config_dict

    cfg, _ = _load(args)
    print(yaml.safe_dump(config_dict(cfg), sort_keys=False), end="")
    if cfg.workflow.checkpoint and cfg.model.num_layers:
        from dliobench.run.checkpoint.layout import describe, layout_for

        lines = describe(layout_for(cfg, launched=1))  # DP: model.parallelism.data, else 1
        print("\n".join(f"# {line}" for line in lines))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run, "report": cmd_report, "recover": cmd_recover, "generate": cmd_generate,
    "datasize": cmd_datasize, "sweep": cmd_sweep, "show-config": cmd_show, "keys": cmd_keys,
    "ceiling": cmd_ceiling,
    "check": cmd_check, "metadata": cmd_metadata, "predict": cmd_predict,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of all subcommands."""
    return cli_parser.build(COMMANDS)


def _setup_logging(verbose: bool, quiet: bool) -> None:
    from rich.console import Console
    from rich.logging import RichHandler

    level = logging.DEBUG if verbose else logging.ERROR if quiet else logging.INFO
    if _a_quiet_rank():
        level = max(level, logging.ERROR)  # under MPI, rank 0 speaks for the job
    handler = RichHandler(console=Console(stderr=True), show_time=False, show_path=False)
    # other libraries (matplotlib's "generated new fontManager") speak at warnings only
    logging.basicConfig(level=max(level, logging.WARNING), format="%(message)s",
                        handlers=[handler])
    log.setLevel(level)


TERMINATED_GRACE_S = 5.0  # batch systems allow 30 s or more between SIGTERM and SIGKILL
# where a run's partial result went (if it could be written) is said by the run itself
TERMINATED = "terminated (SIGTERM); generated files are kept"


def _a_quiet_rank() -> bool:
    """A rank other than 0 of an MPI or torchrun job: a configuration error is the same on
    every rank, so rank 0 says it once for the job."""
    from dliobench.comm.launch import quiet_rank

    return quiet_rank()


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM: unwind like Ctrl-C (partial results, clean-up), once."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up
    raise Terminated("terminated by SIGTERM")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dliobench`` command; returns the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    positional = "workload" if hasattr(args, "workload") else \
        "sweep" if hasattr(args, "sweep") else None
    if extra and (positional is None or any(x.startswith("-") for x in extra)):
        from dliobench.config.secrets import redact_argv

        parser.error("unrecognized arguments: " + " ".join(redact_argv(extra)))
    if extra and positional is not None:  # overrides after options: `run W --no-progress a=b`
        setattr(args, positional, getattr(args, positional) + extra)
    _setup_logging(args.verbose, args.quiet)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args))
    except DlioBenchError as exc:
        if not (isinstance(exc, ConfigError) and _a_quiet_rank()):
            print(f"dliobench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        if not _a_quiet_rank():  # under MPI, rank 0 says it for the job
            print(f"dliobench: {TERMINATED}", file=sys.stderr)
        return Terminated.exit_code
    except KeyboardInterrupt:
        print("dliobench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file or folder the checks before did not foresee
        name = f"{os.fsdecode(exc.filename)}: " if exc.filename else ""
        print(f"dliobench: error: {name}{exc.strerror or exc}; check that path",
              file=sys.stderr)
        return 1
