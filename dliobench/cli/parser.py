"""The argument parser of the ``dliobench`` command: subcommands, options and their help."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path

from dliobench import __version__
from dliobench.cli import mlpstorage as front_door
from dliobench.cli.nodes import add_nodes_parser

Commands = Mapping[str, Callable[[argparse.Namespace], int]]
SubParsers = argparse._SubParsersAction  # the object add_subparsers returns
OVERRIDES_HELP = (
    "configuration overrides as section.key=value, e.g. dataset.num_files_train=16 "
    "train.epochs=2 (DLIO's ++workload.section.key=value also works); `dliobench keys` lists "
    "every key"
)


def positive(kind: type[int] | type[float], most: float) -> Callable[[str], float]:
    """An argparse type: a number of ``kind`` above 0 and at most ``most`` (far beyond any
    real machine, so that arithmetic on it cannot overflow)."""
    noun = "a whole number" if kind is int else "a number"

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {noun}") from None
        if not (0 < value <= most):  # also refuses nan
            raise argparse.ArgumentTypeError(f"{text} is not allowed; give {noun} above 0 "
                                             f"and at most {most:,.0f}")
        return value

    return convert


def folder(text: str) -> str:
    """An argparse type: a folder path, not empty (that would be the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty folder is not allowed; use '.' for the "
                                         "current one")
    return text


def _add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", nargs="*", metavar="[WORKLOAD] [KEY=VALUE ...]",
                   help="workload YAML file or name in workloads/ (default: 'default'; DLIO's "
                   "workload=NAME works too, and DLIO's names such as unet3d_h100 pick our "
                   "workload with that accelerator), then " + OVERRIDES_HELP)
    p.add_argument("--accelerator", metavar="NAME",
                   help="accelerator profile of the workload (a100, h100, ...); same as "
                   "train.accelerator=NAME")
    p.add_argument("--config-dir", metavar="DIR",
                   help="DLIO's configuration folder: workload=NAME is looked up in "
                   "DIR/workload/NAME.yaml first")


def _add_launcher_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--launcher", choices=("auto", "slurm", "mpi", "torch", "none"),
                   default="auto",
                   help="what started the ranks (default auto: a task of a several-task srun "
                   "step first (MPI through Slurm's PMI, nodes from Slurm), then MPI's "
                   "PMI_/OMPI_/PMIX_ variables, then torchrun's RANK+WORLD_SIZE+MASTER_ADDR, "
                   "else one process)")


def _add_yes_arg(p: argparse.ArgumentParser) -> None:
    """`--yes` of the commands that may generate a dataset."""
    p.add_argument("-y", "--yes", action="store_true",
                   help="generate the dataset without asking, however large (otherwise a "
                   "generation above 5 GB, or above half the free space, is asked on a "
                   "terminal and refused without one)")


def _add_run_dirs_arg(p: argparse.ArgumentParser, metavar: str = "RUN_DIR") -> None:
    """The result folders a reading command takes."""
    p.add_argument("runs", nargs="+", metavar=metavar,
                   help="run folders, or folders holding run folders (reports/, a sweep)")


def _add_report_parser(sub: SubParsers,
                       commands: Commands) -> None:
    """The `report` subcommand: result folders in, report folder out."""
    p = sub.add_parser("report", help="tables and plots from result folders",
                       description="Read result folders (never rerun anything) and write "
                       "report.html (self-contained), the plots as PNG and runs.csv: scaling "
                       "with ranks, differing settings compared, wait-latency CDF, per-rank "
                       "step timeline.")
    _add_run_dirs_arg(p)
    p.add_argument("-o", "--out", metavar="OUT", type=folder,
                   help="output folder (default: reports/report-<timestamp>/)")
    p.add_argument("--timeline-run", metavar="RUN_ID",
                   help="run whose per-rank step timeline is drawn (default: the newest)")
    p.add_argument("--trace", action="store_true",
                   help="also write trace.json (Chrome/Perfetto) into each run folder")
    p.set_defaults(func=commands["report"])


def _add_recover_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench recover`: a killed job's result from its ranks' journals."""
    p = sub.add_parser(
        "recover", help="assemble a killed run's result from its ranks' journals",
        description="A run whose job was killed (a launcher that SIGKILLs every rank when one "
        "dies, as MPICH's mpiexec does) leaves its ranks' journals in its run folder: "
        "assemble result.json (status: partial) and timeline.csv from them. The result says "
        "where each rank's records end and why (ranks_ended).")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders a killed job left")
    p.set_defaults(func=commands["recover"])


def _add_check_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench check`."""
    p = sub.add_parser(
        "check", help="apply MLPerf Storage v3.0's training rules to result folders",
        description="Read result folders and apply MLPerf Storage v3.0's training rules: each "
        "run complete, a v3.0 workload on a submittable accelerator (named, or inferred from "
        "the compute time), dataset at least 5x the hosts' memory and 500 steps per "
        "accelerator, AU at the floor, only the parameters the division allows changed from "
        "upstream's own v3.0 workload file, provenance intact; per setup (workload, "
        "accelerator, ranks, hosts) 5 runs, within 5 % of each other, run consecutively. The "
        "output opens with whether the runs are ready for the division and one line per key to "
        "change; each finding names its rule (document@commit and section). Exit code 1 when "
        "any finding fails, 2 when a folder holds no results.")
    _add_run_dirs_arg(p, "RESULT_DIR")
    p.add_argument("--division", choices=("closed", "open"), default="closed",
                   help="which division's parameter rules apply (default closed)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=commands["check"])


def _add_run_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench run`."""
    p = sub.add_parser("run", help="generate (if missing) and train, then report",
                       description="Generate the dataset if it is missing "
                       "(workflow.generate_data), run the emulated training, write "
                       "<output.folder>/<run-id>/result.json and timeline.csv, print a summary.")
    _add_workload_args(p)
    p.add_argument("--output", metavar="DIR", type=folder,
                   help="root folder of results (output.folder)")
    p.add_argument("--dataset", metavar="DIR", type=folder,
                   help="benchmark reading an existing dataset in DIR (your own files, or one "
                   "DLIO generated): indexed once into a manifest; same as "
                   "dataset.source=existing dataset.data_folder=DIR")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    _add_yes_arg(p)
    p.add_argument("--trace", action="store_true", help="also write <run-dir>/trace.json, the "
                   "timeline as a Chrome/Perfetto trace")
    p.add_argument("--fail-below-floor", action="store_true",
                   help="exit with code 3 when the run's AU is below its floor "
                   "(metric.fail_below_floor)")
    p.add_argument("--repeat", type=positive(int, 1000), metavar="N",
                   help="run a set: a warm-up and N scored runs (training) or N checkpoint "
                   "runs, then the set's figures and verdict (runset-<id>.json)")
    p.add_argument("--run-set", action="store_true", help="run the set the MLPerf Storage "
                   "rules score: a warm-up and 5 runs, or one checkpoint invocation")
    _add_launcher_arg(p)
    p.set_defaults(func=commands["run"])


def _add_generate_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench generate`."""
    p = sub.add_parser("generate", help="write the dataset only",
                       description="Write the files of the workload's dataset that are not on "
                       "disk yet; safe to interrupt and repeat. npz, npy, tfrecord and "
                       "indexed_binary files of 1 MiB or more bypass the page cache (O_DIRECT; "
                       "dataset.write_odirect=false turns it off); many small files are written "
                       "by one process per core. Under mpiexec the ranks split the files.")
    _add_workload_args(p)
    p.add_argument("--verify", action="store_true",
                   help="re-read every file, compare its CRC-32C with the manifest, and write "
                   "damaged files again")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    _add_yes_arg(p)
    _add_launcher_arg(p)
    p.set_defaults(func=commands["generate"])


def _add_datasize_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench datasize`."""
    p = sub.add_parser("datasize", help="how many files an honest run needs",
                       description="Compute dataset.num_files_train so that the dataset is at "
                       "least 5x the memory of the participating hosts and gives at least 500 "
                       "steps per accelerator per epoch (MLPerf Storage's rule).")
    _add_workload_args(p)
    p.add_argument("--accelerators", type=positive(int, 1e6), default=1, metavar="N",
                   help="emulated accelerators (ranks) in the run (default 1)")
    p.add_argument("--hosts", type=positive(int, 1e6), default=1, metavar="H",
                   help="hosts the ranks run on (default 1)")
    p.add_argument("--host-memory-gb", type=positive(float, 1e6), metavar="GIB",
                   help="memory per host in GiB, as mlpstorage's --client-host-memory-in-gb "
                   "(default: this host's)")
    p.set_defaults(func=commands["datasize"])


def _add_sweep_parser(sub: SubParsers, commands: Commands) -> None:
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


def _add_show_config_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench show-config`."""
    p = sub.add_parser("show-config", help="print the resolved configuration",
                       description="Print the configuration a run would use, after defaults, "
                       "the workload file, overrides and the accelerator profile.")
    _add_workload_args(p)
    p.set_defaults(func=commands["show-config"])


def _add_ceiling_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench ceiling`."""
    p = sub.add_parser(
        "ceiling", help="what this host's loader delivers per rank from memory",
        description="Measure the client ceiling: the samples/s one rank takes in with the "
        "workload's format, sizes and loader settings, from a copy in /dev/shm, compute 0, as "
        "many ranks as the launcher started; a run demanding more is client-limited whatever "
        "the storage (cached: metric.client_ceiling: auto uses it). For jpeg, also each "
        "reader.decoder's images/s per core and the cores one accelerator needs to decode.")
    _add_workload_args(p)
    _add_launcher_arg(p)
    p.set_defaults(func=commands["ceiling"])


def _add_metadata_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench metadata`."""
    p = sub.add_parser(
        "metadata", help="stat, open, close, create and unlink rates over the dataset's files",
        description="Measure metadata rates mdtest-style over the generated dataset's files "
        "(named from its manifest, never listed): stat, open and close of each file, then "
        "create and unlink of as many empty scratch files with the same names in a folder "
        "beside the dataset (removed afterwards). Under mpiexec the ranks split the files. "
        "Prints rates per rank and for the job with p50/p99/max latency and writes "
        "<output.folder>/<run-id>/metadata.json.")
    _add_workload_args(p)
    p.add_argument("--max-files", type=positive(int, 1e12), metavar="N",
                   help="use only the dataset's first N files (default: all of them)")
    p.add_argument("--output", metavar="DIR", type=folder,
                   help="root folder of results (output.folder)")
    _add_launcher_arg(p)
    p.set_defaults(func=commands["metadata"])


def size(text: str) -> int:
    """An argparse type: a byte count above 0 such as 1TiB, 512GB or 2e12."""
    from dliobench.base.errors import ConfigError
    from dliobench.config.values import to_size

    try:
        value = to_size("size", text if not text.replace(".", "", 1).isdigit() else float(text))
    except ConfigError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size; give bytes such as 1TiB, "
                                         "512GB or 2e12")
    return value


def _add_predict_parser(sub: SubParsers, commands: Commands) -> None:
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
    _add_workload_args(p)
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


def _add_keys_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench keys`."""
    p = sub.add_parser("keys", help="list every configuration key",
                       description="List every configuration key, its default, allowed values "
                       "and DLIO spellings accepted for it; with SECTION (e.g. reader, "
                       "storage) only that section's keys.")
    p.add_argument("section", nargs="?", metavar="SECTION", help="list only this section")
    p.set_defaults(func=commands["keys"])


def build(commands: Commands) -> argparse.ArgumentParser:
    """The argument parser of all subcommands, each calling its function in ``commands``."""
    parser = argparse.ArgumentParser(
        prog="dliobench",
        description="Emulate deep-learning training I/O: generate a dataset in the workload's "
        "format, read it with real loaders while emulated accelerators compute, and report "
        "accelerator utilization (AU), throughput and per-step wait latency.",
        epilog="examples:\n  dliobench run workloads/unet3d.yaml dataset.num_files_train=16 "
        "train.epochs=2\n  dliobench generate unet3d --accelerator h100\n  dliobench keys",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dliobench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (_add_run_parser, _add_report_parser, _add_recover_parser, _add_check_parser,
                _add_generate_parser, _add_datasize_parser, _add_sweep_parser,
                _add_show_config_parser, _add_keys_parser, _add_ceiling_parser,
                _add_metadata_parser, _add_predict_parser, add_nodes_parser,
                front_door.add_parsers):  # mlpstorage's training, checkpointing, reports
        add(sub, commands)
    return parser
