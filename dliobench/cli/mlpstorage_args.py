"""The front door's flags: mlpstorage's subcommands and flags, as its argparse declares them
(``mlpstorage_py/cli/{training,checkpointing,common}_args.py`` at ``config.mlpstorage.UPSTREAM``,
with the union of the later CLIs: ``common_args.py``@dfe7b1f's ``--mpi-btl``, ``--dry-run``,
``--quiet``, and ``training_args.py``@36dcedf's ``-at``, ``--o-direct``, ``--systemname``,
``--drop-caches-timeout-seconds``; their positional shape: ``cli/mlpstorage_argv.py``), so that
its users' command lines parse here unchanged.

Differences, on purpose: the counts (``--num-accelerators``, ``--num-processes``,
``--max-accelerators``), ``--accelerator-type`` and ``--client-host-memory-in-gb`` are optional
(the launched ranks, the workload's accelerator, this host's memory), and ``--file`` /
``--object`` need not be given (POSIX). ``--param`` is accepted beside ``--params``. The MPI
flags are options of the launch that starts the ranks (``comm.local_launch``). Flags that mean
nothing here are parsed, then refused in one sentence (``config.mlpstorage.REFUSED``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from typing import Any, NoReturn

from dliobench.config.mlpstorage import ACCELERATORS, TRAINING_MODELS

# mlpstorage_py/config.py DEFAULT_RESULTS_DIR
DEFAULT_RESULTS_DIR = f"{tempfile.gettempdir()}/mlperf_storage_results"


class FrontDoorParser(argparse.ArgumentParser):
    """A subcommand's parser whose every error (an unknown flag, a missing or bad value) is
    one line naming the command and where its flags are listed, exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Print one sentence and exit 2 (argparse prints the usage block first)."""
        sys.stderr.write(f"{self.prog}: error: {message}; `{self.prog} --help` lists the "
                         "flags dliobench accepts and what each becomes\n")
        sys.exit(2)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, refusing what is left over here rather than at the top, so the sentence
        names this command."""
        ns, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)} (not one of mlpstorage's "
                       "flags that dliobench takes)")
        return ns, extra


def _params(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", "--param", "-p", nargs="+", action="append", metavar="KEY=VALUE",
                   help="configuration overrides, our KEY=VALUE (DLIO's keys map onto ours; "
                   "`dliobench keys` lists them)")
    p.add_argument("--dlio-bin-path", "-dp", help="refused: no DLIO binary runs")


def _hosts_and_mpi(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", "-s", nargs="+", metavar="HOST",
                   help="this host only (127.0.0.1, localhost, its name) unless under a "
                   "launcher: dliobench opens no ssh sessions (mpiexec -hosts or srun)")
    p.add_argument("--exec-type", "-et", choices=("mpi", "docker"), default="mpi",
                   help="mpi: ranks as the launcher started them, or started here; docker: "
                   "refused")
    p.add_argument("--mpi-bin", choices=("mpirun", "mpiexec"), help="which of the mpi "
                   "extra's MPICH (Hydra) launchers starts the ranks (default mpiexec)")
    p.add_argument("--oversubscribe", action="store_true", help="accepted: Hydra places "
                   "more ranks than cores on a host unasked")
    p.add_argument("--allow-run-as-root", action="store_true",
                   help="accepted: Hydra runs as root unasked")
    p.add_argument("--mpi-btl", choices=("auto", "vader", "tcp"), default="auto",
                   help="tcp: ranks on this host talk over TCP, not shared memory")
    p.add_argument("--mpi-params", nargs="+", action="append", metavar="MPI_PARAMS",
                   help="given verbatim to the mpiexec that starts the ranks (Hydra's "
                   "options, e.g. --mpi-params=\"-genv FI_PROVIDER=tcp\")")
    p.add_argument("--ssh-username", help="refused: no ssh sessions")


def _universal(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir", "-rd", default=DEFAULT_RESULTS_DIR, metavar="DIR",
                   help="results root; runs go to DIR/training/<model>/run/<YYYYMMDD_HHMMSS>/ "
                   "and DIR/checkpointing/<model>/<YYYYMMDD_HHMMSS>/ as mlpstorage lays them "
                   f"out (default {DEFAULT_RESULTS_DIR}, mlpstorage's)")
    p.add_argument("--loops", type=int, default=1, help="runs in one invocation, as a run "
                   "set (training: the first is the rules' warm-up, as `run --repeat N-1`)")
    p.add_argument("--config-file", "-c", help="refused: use a workload file or --param")
    p.add_argument("--file", action="store_true", help="POSIX files (the default)")
    p.add_argument("--object", nargs="?", const="s3", metavar="s3",
                   help="S3 from upstream's variables: BUCKET, STORAGE_URI_SCHEME, "
                   "AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                   "(docs/mlpstorage.md)")
    p.add_argument("--open", action="store_true", help="accepted; `dliobench check "
                   "--division open` judges a run")
    p.add_argument("--closed", action="store_true", help="accepted; `dliobench check` "
                   "judges a run for CLOSED")
    p.add_argument("--debug", "--verbose", dest="verbose", action="store_true",
                   default=argparse.SUPPRESS, help="log debug messages (dliobench -v)")
    p.add_argument("--stream-log-level", default="INFO", help="accepted, no effect")
    p.add_argument("--allow-invalid-params", "-aip", action="store_true",
                   help="accepted, no effect: dliobench refuses unknown keys, `dliobench "
                   "check` judges the rules")
    p.add_argument("--what-if", "--dry-run", dest="what_if", action="store_true",
                   help="print the resolved configuration (dliobench show-config) and run "
                   "nothing")
    p.add_argument("--quiet", action="store_true", help="accepted, no effect")
    p.add_argument("--verify-lockfile", help="refused: result.json records version and commit")
    p.add_argument("--skip-validation", action="store_true", help="accepted, no effect")
    p.add_argument("--systemname", "-sn", help="accepted, no effect (the run records this "
                   "host's facts; mlpstorage's newest layout files runs under it)")


def _timeseries(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeseries-interval", type=float, dest="timeseries",
                   help="refused: per-step timings are in timeline.csv")
    p.add_argument("--max-timeseries-samples", type=int, dest="timeseries",
                   help="refused: per-step timings are in timeline.csv")
    p.add_argument("--skip-timeseries", action="store_true", help="accepted, no effect")


def _memory(p: argparse.ArgumentParser) -> None:
    p.add_argument("--client-host-memory-in-gb", "-cm", type=int, metavar="GIB",
                   help="memory per host in GiB: the 5x rule of datasize (default: this "
                   "host's); a run records the measured memory, warning when this is less")


def add_training(sub: Any, handlers: dict[str, Any]) -> None:
    """``training datasize|datagen|run``."""
    p = sub.add_parser("training", help="mlpstorage's training benchmark: datasize, "
                       "datagen, run (our datasize, generate, run)")
    cmds = p.add_subparsers(dest="mlps_command", metavar="COMMAND", required=True,
                            parser_class=FrontDoorParser)
    helps = {"datasize": "files an honest run needs (dliobench datasize)",
             "datagen": "write the dataset (dliobench generate)",
             "run": "run the benchmark (dliobench run)"}
    for name, text in helps.items():
        c = cmds.add_parser(name, help=text, description=text)
        _hosts_and_mpi(c)
        c.add_argument("--model", "-m", choices=TRAINING_MODELS, required=True,
                       help="our workload of that name (workloads/<model>.yaml)")
        if name != "datagen":
            _memory(c)
            c.add_argument("--accelerator-type", "-g", "-at", choices=ACCELERATORS,
                           help="the workload's accelerator profile (--accelerator)")
            c.add_argument("--num-client-hosts", "-nc", type=int, default=1,
                           help="hosts, for datasize's memory rule (a run counts the hosts "
                           "its ranks run on)")
        c.add_argument("--data-dir", "-dd", metavar="DIR",
                       help="dataset.data_folder=DIR/<model> (as mlpstorage: unless DIR "
                       "ends with a model's name)")
        _params(c)
        _universal(c)
        c.set_defaults(func=handlers[f"training {name}"])
    cmds.choices["datagen"].add_argument(
        "--num-processes", "-np", type=int, metavar="N",
        help="accepted: generation writes with one process per core, or splits the files "
        "over the ranks under mpiexec")
    cmds.choices["datasize"].add_argument("--max-accelerators", "-ma", type=int, default=1,
                                          metavar="N", help="accelerators (datasize "
                                          "--accelerators)")
    cmds.choices["run"].add_argument("--num-accelerators", "-na", "--num-processes",
                                     dest="num_accelerators", type=int, metavar="N",
                                     help="ranks: started on this host with the mpi extra's "
                                     "mpiexec, or as many as a launcher started (default: "
                                     "that many)")
    cmds.choices["run"].add_argument("--checkpoint-folder", "-cf", metavar="DIR",
                                     help="checkpoint.checkpoint_folder=DIR/<model>")
    cmds.choices["run"].add_argument("--drop-caches-timeout-seconds", type=int,
                                     metavar="SECONDS", help="accepted, no effect: "
                                     "storage.drop_cache evicts the dataset's pages per file, "
                                     "without sudo")
    for name in ("datagen", "run"):
        cmds.choices[name].add_argument("--o-direct", action="store_true",
                                        help="reader.odirect=true (reads bypass the page "
                                        "cache; large files are written with O_DIRECT "
                                        "already: dataset.write_odirect)")
    _timeseries(cmds.choices["run"])


def add_checkpointing(sub: Any, handlers: dict[str, Any]) -> None:
    """``checkpointing datasize|run``."""
    p = sub.add_parser("checkpointing", help="mlpstorage's checkpointing benchmark: datasize, "
                       "run (our llama3 checkpoint workloads)")
    cmds = p.add_subparsers(dest="mlps_command", metavar="COMMAND", required=True,
                            parser_class=FrontDoorParser)
    helps = {"datasize": "bytes one checkpoint writes, and the run's totals",
             "run": "write then read checkpoints (dliobench run llama3_*)"}
    for name, text in helps.items():
        c = cmds.add_parser(name, help=text, description=text)
        _hosts_and_mpi(c)
        _memory(c)
        c.add_argument("--model", "-m", required=True, metavar="MODEL",
                       help="llama3-8b, llama3-70b, llama3-405b or llama3-1t: workload "
                       "llama3_8b ...")
        c.add_argument("--num-checkpoints-read", "-ncr", type=int, default=10, metavar="N",
                       help="checkpoint.num_checkpoints_read (default 10)")
        c.add_argument("--num-checkpoints-write", "-ncw", type=int, default=10, metavar="N",
                       help="checkpoint.num_checkpoints_write (default 10)")
        c.add_argument("--num-processes", "-np", type=int, metavar="N",
                       help="ranks: started on this host with the mpi extra's mpiexec, or "
                       "as many as a launcher started; fewer than the model's closed count "
                       "set checkpoint.mode=subset")
        c.add_argument("--accelerator-type", "-g", choices=ACCELERATORS,
                       dest="checkpoint_accelerator",
                       help="accepted: a checkpoint's bytes do not depend on it")
        c.add_argument("--checkpoint-folder", "-cf", required=True, metavar="DIR",
                       help="checkpoint.checkpoint_folder=DIR/<model>")
        _params(c)
        _universal(c)
        c.set_defaults(func=handlers[f"checkpointing {name}"])
    _timeseries(cmds.choices["run"])


def add_reports(sub: Any, handlers: dict[str, Any]) -> None:
    """``reports reportgen``."""
    p = sub.add_parser("reports", help="mlpstorage's reports: reportgen (dliobench report)")
    cmds = p.add_subparsers(dest="mlps_command", metavar="COMMAND", required=True,
                            parser_class=FrontDoorParser)
    c = cmds.add_parser("reportgen", help="report of the runs under --results-dir "
                        "(dliobench report)")
    c.add_argument("--output-dir", metavar="DIR", help="report folder (dliobench report -o)")
    _universal(c)
    c.set_defaults(func=handlers["reports reportgen"])
