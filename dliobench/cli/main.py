"""The command line: the only argv parser; one short function per subcommand.

Each command turns its arguments into a configuration and options, and calls the one
function that does its work, in the layer that owns it: ``run.commands`` (the commands that
run on every rank; what they return is printed by ``results.console``), ``report.commands``
and ``report.sweep_command`` (the commands over result folders, and the planners). How a job
of several ranks ends is ``comm.abort``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import dliobench.cli.parser as cli_parser
from dliobench.base.errors import ConfigError, DlioBenchError, InputError, Terminated
from dliobench.cli.vectordb import command as vectordb_command
from dliobench.comm.abort import stop_on_sigterm, terminated_line

if TYPE_CHECKING:
    from dliobench.config.schema import Config
    from dliobench.run.commands import Asked

log = logging.getLogger("dliobench")

DEFAULT_WORKLOAD = "default"


def _load(args: argparse.Namespace) -> tuple[Config, list[str]]:
    """The configuration the arguments name: the workload (a first item without '=', or
    DLIO's ``workload=NAME``, whose DLIO name may pick the accelerator profile), then the
    overrides, ``--accelerator``, ``--dataset`` and ``--output``; its warnings are logged."""
    from dliobench.config import load as config_mod
    from dliobench.config.hydra import split

    line = split(args.workload, DEFAULT_WORKLOAD, getattr(args, "config_dir", None))
    overrides = line.overrides
    if line.accelerator:  # before the overrides: an explicit train.accelerator wins
        overrides = [f"train.accelerator={line.accelerator}", *overrides]
    if getattr(args, "trace_io", False):
        overrides = [*overrides, "output.trace_io=true"]
    if getattr(args, "dataset", None):
        overrides = [*overrides, "dataset.source=existing", f"dataset.data_folder={args.dataset}"]
    cfg, warnings = config_mod.load(line.path, overrides, getattr(args, "accelerator", None))
    if line.ignored:
        warnings = [*warnings, "Hydra's own settings do not apply to dliobench, ignored: "
                    + ", ".join(line.ignored)]
    for w in warnings:
        log.warning(w)
    if getattr(args, "output", None):
        cfg = replace(cfg, output=replace(cfg.output, folder=args.output))
    return cfg, warnings


def _asked(args: argparse.Namespace) -> Asked:
    """The options of a command that runs on every rank."""
    from dliobench.results.console import say
    from dliobench.run.commands import Asked

    return Asked(args.launcher, getattr(args, "yes", False),
                 not getattr(args, "no_progress", False), say)


def cmd_run(args: argparse.Namespace) -> int:
    """Generate the dataset if needed, train, write results, print the summary (``--ranks
    N`` with no launcher around: as N ranks started here)."""
    from dliobench.results.console import show_run
    from dliobench.run.commands import run_benchmark

    cfg, warnings = _load(args)
    other = _started_here_or_set(args, cfg, warnings)
    if other is not None:
        return other
    done = run_benchmark(cfg, warnings, _asked(args))
    return show_run(done.run_dir, done.result, done.problem, args.trace,
                    args.fail_below_floor or cfg.metric.fail_below_floor)


def _started_here_or_set(args: argparse.Namespace, cfg: Config,
                         warnings: list[str]) -> int | None:
    """``run --ranks N`` with no launcher around: N ranks started here (their exit status);
    ``--repeat``/``--run-set``: the set (its exit status); else None, one run."""
    from dliobench.comm.local_launch import start_or_join

    typed = getattr(args, "typed_argv", sys.argv[1:])
    from dliobench.cli.hosts import asked_of, start_on_hosts, wanted

    across = asked_of(args)
    if across is not None and wanted(across):
        return start_on_hosts(cfg, across, typed)
    started = start_or_join(getattr(args, "ranks", None), typed, None, "--ranks")
    if started is not None:
        return started
    return _run_set(args, cfg, warnings) if args.repeat or args.run_set else None


def _kvcache_door(args: argparse.Namespace) -> int | None:
    """mlpstorage's ``kvcache run|datasize|validate`` (``cli.mlpstorage_kvcache``) and
    ``--what-if``: their exit status; else None, the workload and upstream's options made
    overrides in ``args.workload``."""
    from dliobench.cli.mlpstorage_kvcache import front_door
    from dliobench.config.kvcache_keys import overrides_from

    ended = front_door(args)
    if ended is not None:
        return ended
    named = args.workload and "=" not in args.workload[0]
    args.workload = [*([] if named else ["kvcache"]), *args.workload, *overrides_from(vars(args))]
    return cmd_show(args) if args.what_if else None


def _run_set(args: argparse.Namespace, cfg: Config, warnings: list[str]) -> int:
    """``run --repeat N`` / ``--run-set``: each run shown as it ends, then the set."""
    from dliobench.report.runset_show import show_set
    from dliobench.results.console import show_run
    from dliobench.run.commands import run_benchmark_set
    from dliobench.run.runset import SetAsked

    done = run_benchmark_set(cfg, warnings, _asked(args), SetAsked(args.repeat, args.run_set),
                             lambda o: show_run(o.run_dir, o.result, o.problem, args.trace,
                                                False))
    return show_set(done, args.fail_below_floor or cfg.metric.fail_below_floor)


def cmd_kvcache(args: argparse.Namespace) -> int:
    """The KV-cache benchmark: upstream's options as ``kvcache.*`` overrides of the workload
    (workloads/kvcache.yaml unless one is named), run as ``run`` runs one."""
    from dliobench.results.console import show_run
    from dliobench.run.commands import run_benchmark

    ended = _kvcache_door(args)
    if ended is not None:
        return ended
    cfg, warnings = _load(args)
    done = run_benchmark(cfg, warnings, _asked(args))
    return show_run(done.run_dir, done.result, done.problem, False, False)


def cmd_vectordb(args: argparse.Namespace) -> int:
    """The vector-database benchmark's verbs, upstream's flags as overrides (cli/vectordb.py)."""
    return vectordb_command(_load, _asked, _run_set)(args)


def cmd_generate(args: argparse.Namespace) -> int:
    """Write the dataset only (what is missing of it), a large one only once confirmed."""
    from dliobench.results.console import show_generation
    from dliobench.run.commands import generate_dataset

    cfg, _ = _load(args)
    show_generation(cfg.dataset, generate_dataset(cfg, _asked(args), args.verify))
    return 0


def cmd_ceiling(args: argparse.Namespace) -> int:
    """Measure (and cache) what this host's loader delivers per rank from memory."""
    from dliobench.results.console import show_ceiling
    from dliobench.run.commands import measure_ceiling

    cfg, _ = _load(args)
    show_ceiling(cfg, measure_ceiling(cfg, _asked(args)))
    return 0


def cmd_metadata(args: argparse.Namespace) -> int:
    """Measure metadata rates over the dataset's files; write metadata.json, print a table."""
    from dliobench.results.console import show_metadata
    from dliobench.run.commands import measure_metadata

    cfg, _ = _load(args)
    show_metadata(measure_metadata(cfg, _asked(args), int(args.max_files or 0)))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Turn result folders into report.html, PNGs and runs.csv (and trace.json with --trace)."""
    from dliobench.report.commands import write_reports

    write_reports(args.runs, args.out, args.timeline_run, args.trace)
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    """Assemble the result of run folders a killed job left, from their ranks' journals."""
    from dliobench.report.commands import recover_runs

    recover_runs(args.runs)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Apply MLPerf Storage's rules to result folders: 1 when any finding fails."""
    from dliobench.report.commands import check_runs

    return check_runs(args.runs, args.division, args.json, args.details)


def cmd_workload(args: argparse.Namespace) -> int:
    """A workload file from a trace (from-trace), or a replay compared with it (compare)."""
    from dliobench.report import trace_command as tc

    if args.verb == "compare":
        return tc.compare_runs(args.trace, args.run_dir)
    tc.from_trace(tc.FromTrace(args.trace, args.output, args.name, int(args.batch_size),
                               args.computation_time, args.measure_compute))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    """Print what the workload demands at the scale asked for (a table, or JSON)."""
    from dliobench.report.commands import PredictAsked, predict_workload

    predict_workload(_load(args)[0], PredictAsked(
        args.accelerators, args.hosts, args.host_memory, args.write_rate,
        args.checkpoint_seconds, args.from_runs, args.check, args.plot, args.json))
    return 0


def cmd_datasize(args: argparse.Namespace) -> int:
    """Print how many files an honest run needs (MLPerf Storage's rule)."""
    from dliobench.report.commands import datasize

    datasize(_load(args)[0], args.accelerators, args.hosts, args.host_memory_gb)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a sweep (or the max-accelerator search) and report."""
    from dliobench.report.sweep_command import SweepAsked, sweep

    return sweep(args.sweep, SweepAsked(args.output, args.dry_run, args.find_max_accelerators,
                                        args.accelerator, args.max_accelerators, args.timeout))


def cmd_keys(args: argparse.Namespace) -> int:
    """List every configuration key (or one section's) with its default and meaning."""
    from dliobench.report.commands import list_keys

    list_keys(args.section)
    return 0


def cmd_nodes(args: argparse.Namespace) -> int:
    """Run a dliobench command on emulated nodes of this machine (one mpiexec)."""
    from dliobench.cli.nodes import run_cluster
    from dliobench.comm.nodes import Layout, run

    if args.argv[:1] in (["up"], ["down"]):
        return run_cluster(args.argv)
    if args.nodes is None or args.ranks_per_node is None:
        raise InputError("dliobench nodes needs --nodes K --ranks-per-node P -- COMMAND, or "
                         "up --compute K --storage S, or down")
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return run(Layout(args.nodes, args.ranks_per_node, args.local), argv)


def cmd_show(args: argparse.Namespace) -> int:
    """Print the resolved configuration as YAML."""
    from dliobench.report.commands import show_config

    show_config(_load(args)[0])
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run, "kvcache": cmd_kvcache, "report": cmd_report, "recover": cmd_recover,
    "generate": cmd_generate, "ceiling": cmd_ceiling, "nodes": cmd_nodes,
    "datasize": cmd_datasize, "sweep": cmd_sweep, "show-config": cmd_show, "keys": cmd_keys,
    "check": cmd_check, "metadata": cmd_metadata, "predict": cmd_predict,
    "workload": cmd_workload, "vectordb": cmd_vectordb,
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


def _a_quiet_rank() -> bool:
    """A rank other than 0 of an MPI or torchrun job: a configuration error is the same on
    every rank, so rank 0 says it once for the job."""
    from dliobench.comm.launch import quiet_rank

    return quiet_rank()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; overrides given after options (`run W --no-progress a=b`) join the
    workload's (or the sweep's) positional items."""
    from dliobench.cli.mlpstorage_argv import normalize

    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(normalize(given))
    args.typed_argv = given  # what ranks started here run again (`nodes` has its own argv)
    positional = "workload" if hasattr(args, "workload") else \
        "sweep" if hasattr(args, "sweep") else None
    if extra and (positional is None or any(x.startswith("-") for x in extra)):
        from dliobench.config.secrets import redact_argv

        parser.error("unrecognized arguments: " + " ".join(redact_argv(extra)))
    if extra and positional is not None:
        setattr(args, positional, getattr(args, positional) + extra)
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dliobench`` command; returns the exit code."""
    args = _parse(argv)
    _setup_logging(args.verbose, args.quiet)
    stop_on_sigterm()
    try:
        return int(args.func(args))
    except DlioBenchError as exc:
        if not (isinstance(exc, ConfigError) and _a_quiet_rank()):
            print(f"dliobench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated as exc:
        if not _a_quiet_rank():  # under MPI, rank 0 says it for the job
            print(f"dliobench: {terminated_line(exc)}", file=sys.stderr)
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
