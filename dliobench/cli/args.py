"""Argument types and argument groups shared by the command line's parsers."""

from __future__ import annotations

import argparse
from collections.abc import Callable

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


def add_workload_args(p: argparse.ArgumentParser) -> None:
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


def add_launcher_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--launcher", choices=("auto", "slurm", "mpi", "torch", "none"),
                   default="auto",
                   help="what started the ranks (default auto: a task of a several-task srun "
                   "step first (MPI through Slurm's PMI, nodes from Slurm), then MPI's "
                   "PMI_/OMPI_/PMIX_ variables, then torchrun's RANK+WORLD_SIZE+MASTER_ADDR, "
                   "else one process)")


def add_yes_arg(p: argparse.ArgumentParser) -> None:
    """`--yes` of the commands that may generate a dataset."""
    p.add_argument("-y", "--yes", action="store_true",
                   help="generate the dataset without asking, however large (otherwise a "
                   "generation above 5 GB, or above half the free space, is asked on a "
                   "terminal and refused without one)")


def add_run_dirs_arg(p: argparse.ArgumentParser, metavar: str = "RUN_DIR") -> None:
    """The result folders a reading command takes."""
    p.add_argument("runs", nargs="+", metavar=metavar,
                   help="run folders, or folders holding run folders (reports/, a sweep)")
