"""The parsers of the commands that read results back: report, recover, check, sweep,
predict."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path

from dliobench.cli.args import (
    add_run_dirs_arg,
    add_workload_args,
    folder,
    positive,
    size,
)

Commands = Mapping[str, Callable[[argparse.Namespace], int]]
SubParsers = argparse._SubParsersAction  # the object add_subparsers returns


def add_report_parser(sub: SubParsers,
                       commands: Commands) -> None:
    """The `report` subcommand: result folders in, report folder out."""
    p = sub.add_parser("report", help="tables and plots from result folders",
                       description="Read result folders (never rerun anything) and write "
                       "report.html (self-contained), the plots as PNG and runs.csv: scaling "
                       "with ranks, differing settings compared, wait-latency CDF, per-rank "
                       "step timeline.")
    add_run_dirs_arg(p)
    p.add_argument("-o", "--out", metavar="OUT", type=folder,
                   help="output folder (default: reports/report-<timestamp>/)")
    p.add_argument("--timeline-run", metavar="RUN_ID",
                   help="run whose per-rank step timeline is drawn (default: the newest)")
    p.add_argument("--trace", action="store_true",
                   help="also write trace.json (Chrome/Perfetto) into each run folder")
    p.set_defaults(func=commands["report"])


def add_recover_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench recover`: a killed job's result from its ranks' journals."""
    p = sub.add_parser(
        "recover", help="assemble a killed run's result from its ranks' journals",
        description="A run whose job was killed (a launcher that SIGKILLs every rank when one "
        "dies, as MPICH's mpiexec does) leaves its ranks' journals in its run folder: "
        "assemble result.json (status: partial) and timeline.csv from them. The result says "
        "where each rank's records end and why (ranks_ended).")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders a killed job left")
    p.set_defaults(func=commands["recover"])


def add_check_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench check`."""
    p = sub.add_parser(
        "check", help="apply MLPerf Storage v3.0's rules to result folders",
        description="Read result folders and apply MLPerf Storage v3.0's rules (training; "
        "checkpoint-only and KV-cache runs by their own). Judged: the runs named, and below a "
        "folder the runs of a run set or of a workload the rules define; the others found "
        "there (make run's default workload) are skipped and listed. Training: each "
        "run complete, a v3.0 workload on a submittable accelerator (named, or inferred from "
        "the compute time), dataset at least 5x the hosts' memory and 500 steps per "
        "accelerator, AU at the floor, only the parameters the division allows changed from "
        "upstream's own v3.0 workload file, provenance intact; per setup (workload, "
        "accelerator, ranks, hosts) 5 runs, within 5 % of each other, run consecutively. The "
        "output is whether the runs are ready for the division and one line per key to "
        "change; --details adds every finding with its rule (document@commit and section). "
        "Exit code 1 when "
        "any finding fails, 2 when a folder holds no results.")
    add_run_dirs_arg(p, "RESULT_DIR")
    p.add_argument("--division", choices=("closed", "open"), default="closed",
                   help="which division's parameter rules apply (default closed)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--details", action="store_true",
                   help="also print every finding (pass, fail, n/a) as a table")
    p.set_defaults(func=commands["check"])


def add_sweep_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench sweep`."""
    p = sub.add_parser(
        "sweep", help="run a grid of runs (or find how many accelerators storage sustains)",
        description="Run every point of a sweep file's axes (ranks through the MPI launcher) "
        "into one sweep folder, continuing past failed points. With "
        "--find-max-accelerators, search (doubling, then bisection) for the largest number of "
        "emulated accelerators (ranks) whose AU stays at the workload's floor.",
        epilog="sweep file keys: workload, overrides (list), axes (key: [values], 'ranks' for "
        "rank counts), launcher (default 'mpiexec -n {ranks}'), output, name. Examples ship "
        "in configs/.")
    p.add_argument("sweep", nargs="+", metavar="SWEEP_OR_WORKLOAD [KEY=VALUE ...]",
                   help="a sweep file (configs/*.yaml), or with --find-max-accelerators also "
                   "a workload file or name, then overrides for every run")
    p.add_argument("--find-max-accelerators", action="store_true",
                   help="search for the most accelerators the storage sustains at the AU floor")
    p.add_argument("--accelerator", metavar="NAME", help="accelerator profile for the search")
    p.add_argument("--max-accelerators", type=positive(int, 1e6), default=64, metavar="N",
                   help="upper bound of the search (default 64)")
    p.add_argument("--timeout", type=positive(float, 1e7), metavar="S",
                   help="give up on a point after S s")
    p.add_argument("--dry-run", action="store_true",
                   help="list every point with its settings and check that all of them load; "
                   "run nothing")
    p.add_argument("--output", metavar="DIR", type=folder,
                   help="root of sweep folders (default reports/sweeps)")
    p.set_defaults(func=commands["sweep"])


def add_predict_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench predict`."""
    p = sub.add_parser(
        "predict", help="what a workload demands at a scale, on paper",
        description="From the workload alone (compute time per batch, batch, sample size, AU "
        "floor): samples/s, bytes/s, read requests and file opens per second at the AU floor "
        "for N accelerators, the dataset size MLPerf Storage's rule asks for, its generation "
        "time at a write rate, the checkpoint bandwidth for a time budget, and per-host "
        "memory and client CPU (from this host's cached client ceiling, when there is one). "
        "With --from: the storage's bandwidth and the client ceiling fitted to real runs, and "
        "AU projected against accelerators past what was run, with its band and a figure.")
    add_workload_args(p)
    p.add_argument("--accelerators", type=positive(int, 1e7), metavar="N",
                   help="emulated accelerators (default 1; with --from, the most to project: "
                   "default 8 times the most ranks run)")
    p.add_argument("--hosts", type=positive(int, 1e7), default=1, metavar="H",
                   help="hosts they run on (default 1)")
    p.add_argument("--host-memory", type=size, metavar="SIZE",
                   help="memory per host, e.g. 1TiB (default: this host's)")
    p.add_argument("--write-rate", type=size, metavar="SIZE",
                   help="bytes per second generation writes, e.g. 5GB, for the generation time")
    p.add_argument("--checkpoint-seconds", type=positive(float, 1e9), metavar="S",
                   help="time budget of one checkpoint write, for its bandwidth")
    p.add_argument("--from", dest="from_runs", nargs="+", metavar="RESULT_DIR",
                   help="calibrate by real runs on the storage: run folders, or folders of "
                   "runs and sweeps; fits the storage's bandwidth and the client ceiling and "
                   "projects AU against accelerators")
    p.add_argument("--check", nargs="+", metavar="RESULT_DIR",
                   help="with --from: runs to compare the projection with, not fitted")
    p.add_argument("--plot", type=Path, metavar="PNG",
                   help="with --from: the projection's figure (default projection.png)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=commands["predict"])
