"""What `run` and `generate` settle before any work, so that a first run neither measures RAM
nor writes gigabytes unasked, nor finds a folder it cannot write after the work is done:

- every place the command will write can be written (``check_outputs``);
- the run's reads reach the storage: O_DIRECT where the file system takes it, else buffered
  reads with the page cache dropped before every epoch, said in one sentence; a file system
  in memory (tmpfs) is named as such (``reads_from_storage``);
- a large generation is confirmed: asked on a terminal, refused in one sentence naming
  ``--yes`` without one (``confirm_generation``);
- more readers on a host than it has cores is said in one sentence (``oversubscribed``):
  such a run's verdict is likely the client's (docs/ARCHITECTURE.md, Verdicts).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, replace

from dliobench.base.errors import ConfigError, DatasetError
from dliobench.base.units import size_text
from dliobench.comm.world import World
from dliobench.config.folders import (
    MEMORY_FILE_SYSTEMS,
    check_writable,
    file_system,
    reads_direct,
    write_places,
)
from dliobench.config.schema import Config
from dliobench.dataset.space import Pending, pending
from dliobench.storage.location import is_url

log = logging.getLogger("dliobench")

# A generation above either bound is confirmed first. 5 GB is ten times the default workload
# (0.55 GB) and more than any shipped example a laptop runs in seconds, but less than one
# MLPerf workload's dataset (unet3d on an a100: 25.7 GB); a dataset taking more than half the
# free space would leave a small disk nearly full, whatever its size.
CONFIRM_ABOVE_BYTES = 5 * 10**9
CONFIRM_ABOVE_FREE_SHARE = 0.5


def check_outputs(config: Config, generating: bool) -> None:
    """Refuse, in one sentence naming the key and the path, a place the command would write
    that cannot be written, before anything is generated or run."""
    from dliobench.dataset.existing import wanted

    check_writable(write_places(config, generating, existing=wanted(config.dataset)))


def check_dataset_present(config: Config) -> None:
    """A training run that may not generate (``workflow.generate_data=false``) needs its data
    folder: refuse a missing one in one sentence, before any line about its reads and before
    anything (its lock, its manifest) would create it."""
    folder = config.dataset.data_folder
    if not config.workflow.train or config.workflow.generate_data or is_url(folder):
        return
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        d = config.dataset
        raise DatasetError(f"dataset.data_folder {folder} {what}, so the dataset has none of "
                           f"its {d.num_files_train} {d.format} files, and "
                           "workflow.generate_data is false; run `dliobench generate` with the "
                           "same workload and overrides, or set workflow.generate_data=true")


@dataclass(frozen=True)
class Reads:
    """The configuration a run reads with, what it says on the console, what it warns."""

    config: Config
    said: str | None
    warnings: list[str]


def check_device(config: Config) -> None:
    """``train.device=cuda`` needs a GPU PyTorch can see; and this version has no GPU data path
    yet (the copy host to device is the GPU issue's, unbuilt for want of a GPU to test it on):
    one sentence either way, before any work."""
    if config.train.device != "cuda":
        return
    try:
        import torch

        found = bool(torch.cuda.is_available())
    except ImportError:
        found = False
    if not found:
        raise ConfigError("train.device=cuda but no GPU was found (PyTorch sees no CUDA "
                          "device); run on a machine with an NVIDIA GPU and PyTorch's CUDA "
                          "wheel, or leave train.device at cpu")
    raise ConfigError("train.device=cuda: this version does not copy batches to the GPU yet "
                      "(it was never run on one); leave train.device at cpu, which emulates "
                      "the accelerator in host memory")


def reads_from_storage(config: Config) -> Reads:
    """With ``reader.odirect``, check that the folder the run reads (the staged copy, else
    the data folder) takes O_DIRECT; where it refuses, read buffered and drop the page cache
    before every epoch instead. A file system in memory is named: nothing there is storage."""
    folder = config.storage.stage_to or config.dataset.data_folder
    if not config.workflow.train or is_url(folder):
        return Reads(config, None, [])
    fs = file_system(folder)
    warnings = []
    if fs in MEMORY_FILE_SYSTEMS:
        warnings.append(f"{folder} is on {fs}, a file system in memory: its reads come from "
                        "RAM with or without O_DIRECT, so this run measures memory, not "
                        "storage; put dataset.data_folder on the storage to measure it")
    if not config.reader.odirect:
        return Reads(config, None, warnings)
    direct = reads_direct(folder)
    if direct is None:  # the folder cannot take a probe file (a read-only dataset): as set
        return Reads(config, None, warnings)
    if direct:
        bypass = "" if warnings else ", bypassing the page cache"
        return Reads(config, f"reads: O_DIRECT from {fs} at {folder}{bypass}", warnings)
    fallback = replace(config, reader=replace(config.reader, odirect=False),
                       storage=replace(config.storage, drop_cache=True))
    return Reads(fallback, None, [f"{fs} at {folder} refuses O_DIRECT: reads are buffered "
                                  "instead, with the page cache dropped before every epoch "
                                  "(storage.drop_cache=true)", *warnings])


def readers_per_rank(read_threads: int) -> int:
    """The reading threads (or PyTorch worker processes) one rank runs: ``read_threads``,
    or the rank itself when it reads inline (0)."""
    return max(1, read_threads)


def host_cores() -> tuple[int, bool]:
    """(cores this rank may run on, whether it is bound to fewer than the host has): an
    unbound host's ranks share its cores, a bound rank has its own."""
    cores = len(os.sched_getaffinity(0))
    return cores, cores < (os.cpu_count() or cores)


def ranks_that_fit(read_threads: int) -> int:
    """The most ranks this host runs with no more readers than cores (at least 1)."""
    cores, bound = host_cores()
    return 1 if bound else max(1, cores // readers_per_rank(read_threads))


def oversubscribed(config: Config, ranks_per_host: int) -> str | None:
    """One sentence when the host's ranks x readers per rank exceed its cores (a bound rank:
    its readers, its cores), else None."""
    r = config.reader
    cores, bound = host_cores()
    ranks, per_rank = (1 if bound else ranks_per_host), readers_per_rank(r.read_threads)
    if ranks * per_rank <= cores:
        return None
    what = ("PyTorch worker process(es)" if r.data_loader == "pytorch" and r.read_threads
            else "reader thread(s)")
    busy = config.metric.client_cpu_busy
    rule = ("" if busy == "off" else f" (a run that waits while its host's CPUs are at least "
            f"{float(busy):.0%} busy is judged client-limited)")
    return (f"{ranks} rank(s) x {per_rank} {what} = {ranks * per_rank} readers on "
            f"{cores} core(s){' (this rank is bound to them)' if bound else ''}: the client's "
            f"CPUs may limit this run before the storage does{rule}")


def confirm_generation(config: Config, yes: bool, world: World) -> None:
    """Go on when the generation ahead is small, ``yes`` was given, or the user says yes on a
    terminal; otherwise raise ConfigError before a byte of the dataset is written."""
    if yes:
        return
    todo = pending(config, _large)
    if not _large(todo):
        return
    if todo.free is not None and todo.bytes > todo.free:
        return  # it cannot fit: the generation refuses by itself, saying how much is free
    what = (f"{size_text(todo.bytes)} ({todo.files:,} {config.dataset.format} files) into "
            f"{config.dataset.data_folder}"
            + (f", where {size_text(todo.free)} are free" if todo.free is not None else ""))
    if world.size == 1 and sys.stdin.isatty() and sys.stdout.isatty():
        if _asked(f"generate {what}? [y/N] "):
            return
        raise ConfigError(f"nothing generated: writing {what} was not confirmed; lower "
                          "dataset.num_files_train for a smaller dataset")
    raise ConfigError(f"generating the dataset would write {what}, more than "
                      f"{_bound(todo)}; run again with --yes to generate it, or lower "
                      "dataset.num_files_train")


def _large(todo: Pending) -> bool:
    """Whether a generation needs the user's yes (``CONFIRM_ABOVE_*``)."""
    return todo.bytes > CONFIRM_ABOVE_BYTES or (
        todo.free is not None and todo.bytes > CONFIRM_ABOVE_FREE_SHARE * todo.free)


def _bound(todo: Pending) -> str:
    """The bound a generation is above, in words."""
    if todo.bytes > CONFIRM_ABOVE_BYTES:
        return f"{size_text(CONFIRM_ABOVE_BYTES)} unasked"
    return f"{CONFIRM_ABOVE_FREE_SHARE:.0%} of the free space unasked"


def _asked(question: str) -> bool:
    """The user's answer on the terminal: yes only for 'y' or 'yes'."""
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
