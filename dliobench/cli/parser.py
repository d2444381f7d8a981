"""The argument parser of the ``dliobench`` command: subcommands, options and their help."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

import dliobench.cli.kvcache_args as kvcache_args
import dliobench.cli.mlpstorage as front_door
import dliobench.cli.report_parser as reading
import dliobench.cli.trace_parser as trace_parser
import dliobench.cli.vectordb_args as vectordb_args
from dliobench import __version__
from dliobench.cli.args import (
    add_launcher_arg,
    add_workload_args,
    add_yes_arg,
    folder,
    positive,
)
from dliobench.cli.nodes import add_nodes_parser

Commands = Mapping[str, Callable[[argparse.Namespace], int]]
SubParsers = argparse._SubParsersAction  # the object add_subparsers returns


def _add_run_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench run`."""
    p = sub.add_parser("run", help="generate (if missing) and train, then report",
                       description="Generate the dataset if it is missing "
                       "(workflow.generate_data), run the emulated training, write "
                       "<output.folder>/<run-id>/result.json and timeline.csv, print a summary.")
    add_workload_args(p)
    p.add_argument("--output", metavar="DIR", type=folder,
                   help="root folder of results (output.folder)")
    p.add_argument("--dataset", metavar="DIR", type=folder,
                   help="benchmark reading an existing dataset in DIR (your own files, or one "
                   "DLIO generated): indexed once into a manifest; same as "
                   "dataset.source=existing dataset.data_folder=DIR")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    add_yes_arg(p)
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
    p.add_argument("--ranks", type=positive(int, 1e6), metavar="N",
                   help="with no launcher around: start N ranks on this host with the mpi "
                   "extra's mpiexec (under a launcher: must be the job's size); with --hosts, "
                   "N ranks in all, placed as mlpstorage places them")
    p.add_argument("--hosts", metavar="H1,H2,...", action="append",
                   help="with no launcher around: start the ranks on these hosts over ssh "
                   "(Hydra's ssh launcher), each asked first whether it can take them; "
                   "give --ranks N or --ranks-per-host P (docs/running-at-scale.md)")
    p.add_argument("--ranks-per-host", type=positive(int, 1e6), metavar="P",
                   help="with --hosts: P ranks on every host")
    p.add_argument("--ssh-username", metavar="USER", help="with --hosts: log in as USER")
    add_launcher_arg(p)
    trace_parser.add_trace_io_arg(p)
    p.set_defaults(func=commands["run"])


def _add_generate_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench generate`."""
    p = sub.add_parser("generate", help="write the dataset only",
                       description="Write the files of the workload's dataset that are not on "
                       "disk yet; safe to interrupt and repeat. npz, npy, tfrecord and "
                       "indexed_binary files of 1 MiB or more bypass the page cache (O_DIRECT; "
                       "dataset.write_odirect=false turns it off); many small files are written "
                       "by one process per core. Under mpiexec the ranks split the files.")
    add_workload_args(p)
    p.add_argument("--verify", action="store_true",
                   help="re-read every file, compare its CRC-32C with the manifest, and write "
                   "damaged files again")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    add_yes_arg(p)
    add_launcher_arg(p)
    p.set_defaults(func=commands["generate"])


def _add_datasize_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench datasize`."""
    p = sub.add_parser("datasize", help="how many files an honest run needs",
                       description="Compute dataset.num_files_train so that the dataset is at "
                       "least 5x the memory of the participating hosts and gives at least 500 "
                       "steps per accelerator per epoch (MLPerf Storage's rule).")
    add_workload_args(p)
    p.add_argument("--accelerators", type=positive(int, 1e6), default=1, metavar="N",
                   help="emulated accelerators (ranks) in the run (default 1)")
    p.add_argument("--hosts", type=positive(int, 1e6), default=1, metavar="H",
                   help="hosts the ranks run on (default 1)")
    p.add_argument("--host-memory-gb", type=positive(float, 1e6), metavar="GIB",
                   help="memory per host in GiB, as mlpstorage's --client-host-memory-in-gb "
                   "(default: this host's)")
    p.set_defaults(func=commands["datasize"])


def _add_show_config_parser(sub: SubParsers, commands: Commands) -> None:
    """`dliobench show-config`."""
    p = sub.add_parser("show-config", help="print the resolved configuration",
                       description="Print the configuration a run would use, after defaults, "
                       "the workload file, overrides and the accelerator profile.")
    add_workload_args(p)
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
    add_workload_args(p)
    add_launcher_arg(p)
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
    add_workload_args(p)
    p.add_argument("--max-files", type=positive(int, 1e12), metavar="N",
                   help="use only the dataset's first N files (default: all of them)")
    p.add_argument("--output", metavar="DIR", type=folder,
                   help="root folder of results (output.folder)")
    add_launcher_arg(p)
    p.set_defaults(func=commands["metadata"])


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
    for add in (_add_run_parser, kvcache_args.add_parser, vectordb_args.add_parser,
                reading.add_report_parser,
                reading.add_recover_parser, reading.add_check_parser, _add_generate_parser,
                _add_datasize_parser,
                reading.add_sweep_parser, _add_show_config_parser, _add_keys_parser,
                _add_ceiling_parser, _add_metadata_parser, reading.add_predict_parser,
                add_nodes_parser,
                trace_parser.add_workload_parser,
                front_door.add_parsers):  # mlpstorage's training, checkpointing, reports
        add(sub, commands)
    return parser
