"""The metadata phase: mdtest-style stat, open, close, create and unlink rates over a dataset's
layout, per rank and for the job.

The files are the dataset's own, named from the manifest (nothing lists a folder); the ranks
split them in contiguous shares. Create and unlink run on scratch files with the same names,
in a folder beside the dataset (``<data_folder>.dliobench-md-<token>``), removed afterwards.
Every phase starts at a barrier; a rank's rate is its files over its own time in the call,
the job's is all files over the slowest rank's time (as mdtest computes it).
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dliobench.base.errors import DatasetError
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset.check import share
from dliobench.dataset.manifest import Manifest
from dliobench.dataset.plan import Plan
from dliobench.results.files import make_run_dir, new_run_id, write_json
from dliobench.results.metadata import METADATA_NAME, OPS, OpTimes, RankTimes, document, section
from dliobench.run.facts import run_facts

__all__ = ["OPS", "OpTimes", "RankTimes", "dataset_manifest", "dataset_paths", "measure",
           "metadata_phase", "scratch_folder", "write_metadata"]
T = TypeVar("T")
A = TypeVar("A")
R = TypeVar("R")
OPEN_BATCH = 1024  # descriptors held open at once between the open and the close calls


def dataset_paths(plan: Plan, world: World, limit: int = 0) -> tuple[list[str], list[str]]:
    """This rank's share of the dataset's files held by the manifest (at most ``limit``
    files in all when given): their paths, and their keys (for the scratch copies)."""
    data_folder = plan.config.dataset.data_folder
    manifest = dataset_manifest(plan)
    manifest.check_matches(plan.config.dataset)
    total = min(manifest.num_files, len(plan.keys))
    if limit:
        total = min(total, limit)
    start, stop = share(total, world.size, world.rank)
    ids = np.arange(start, stop, dtype=np.int64)
    held = ids[manifest.sizes(ids) >= 0]
    if total == 0 or (world.size == 1 and held.size == 0):
        raise DatasetError(f"the dataset in {data_folder} holds no complete files yet; run "
                           "`dliobench generate` with the same workload and overrides first")
    keys = [plan.keys[int(i)] for i in held]
    return [str(_local(plan, k)) for k in keys], keys


def _local(plan: Plan, key: str) -> Path:
    """The file of ``key`` (the phase measures file-system calls: POSIX paths only)."""
    path = plan.backend.local_path(key)
    if path is None:
        raise DatasetError(f"the metadata phase measures file-system calls, and "
                           f"{plan.backend.describe()} is not a file system; point "
                           "dataset.data_folder at a mounted folder")
    return path


def dataset_manifest(plan: Plan) -> Manifest:
    """The dataset's manifest; DatasetError when there is none (nothing generated yet)."""
    manifest = Manifest.load(plan.backend) if Path(plan.backend.describe()).is_dir() else None
    if manifest is None:
        raise DatasetError(f"there is no dataset in {plan.config.dataset.data_folder} yet; run "
                           "`dliobench generate` with the same workload and overrides first")
    return manifest


def _timed(call: Callable[[A], R], items: Sequence[A]) -> tuple[list[R], OpTimes]:
    """``call`` on each item, each call timed alone; the results and the times."""
    out: list[R] = []
    lat = np.empty(len(items), np.float64)
    clock = time.perf_counter
    for n, item in enumerate(items):
        t0 = clock()
        out.append(call(item))
        lat[n] = clock() - t0
    return out, OpTimes(float(lat.sum()), lat)


def _merge(parts: list[OpTimes]) -> OpTimes:
    if not parts:
        return OpTimes(0.0, np.empty(0, np.float64))
    return OpTimes(sum(p.seconds for p in parts), np.concatenate([p.latencies_s for p in parts]))


def _stat(paths: list[str]) -> OpTimes:
    return _timed(os.stat, paths)[1]


def _open_close(paths: list[str]) -> tuple[OpTimes, OpTimes]:
    """Open a batch of files read-only, then close them: the two calls timed apart."""
    opens, closes = [], []
    for first in range(0, len(paths), OPEN_BATCH):
        batch = paths[first:first + OPEN_BATCH]
        fds, opened = _timed(_open_read, batch)
        opens.append(opened)
        closes.append(_timed(os.close, fds)[1])
    return _merge(opens), _merge(closes)


def _create(paths: list[str]) -> OpTimes:
    """Create each file empty (open with O_CREAT | O_EXCL, close), timed as one operation."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL

    def create(path: str) -> None:
        os.close(os.open(path, flags, 0o644))

    return _timed(create, paths)[1]


def _open_read(path: str) -> int:
    return os.open(path, os.O_RDONLY)


def _unlink(paths: list[str]) -> OpTimes:
    return _timed(os.unlink, paths)[1]


def scratch_folder(data_folder: str, token: str) -> Path:
    """The folder beside the dataset that create and unlink work in."""
    base = Path(data_folder).resolve()
    return base.parent / f"{base.name}.dliobench-md-{token}"


def measure(plan: Plan, world: World, comm: Comm, limit: int = 0) -> list[RankTimes] | None:
    """Every rank's times of each operation (on rank 0; None on the others)."""
    paths, keys = dataset_paths(plan, world, limit)
    token = comm.bcast(secrets.token_hex(4) if world.is_root else "")
    scratch = scratch_folder(plan.config.dataset.data_folder, token)
    ops: dict[str, OpTimes] = {}
    try:
        if world.is_root:
            subs = plan.config.dataset.num_subfolders_train
            for sub in [f"{i:04d}" for i in range(subs)] or [""]:
                (scratch / "train" / sub).mkdir(parents=True, exist_ok=True)
        comm.barrier()
        ops["stat"] = _phase(comm, lambda: _stat(paths))
        ops["open"], ops["close"] = _phase(comm, lambda: _open_close(paths))
        scratch_paths = [str(scratch / k) for k in keys]
        ops["create"] = _phase(comm, lambda: _create(scratch_paths))
        ops["unlink"] = _phase(comm, lambda: _unlink(scratch_paths))
    except BaseException:  # the job is failing: no collective, whoever fails removes it
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    comm.barrier()
    if world.is_root:
        shutil.rmtree(scratch, ignore_errors=True)
    gathered: list[RankTimes] | None = comm.gather(
        RankTimes(world.rank, world.host, len(paths), ops))
    return gathered


def _phase(comm: Comm, work: Callable[[], T]) -> T:
    """One phase, started by all ranks together."""
    comm.barrier()
    return work()


def metadata_phase(plan: Plan, world: World, comm: Comm, limit: int = 0) -> dict[str, Any]:
    """Run the metadata phase: ``{"metadata": section}`` on rank 0, ``{}`` elsewhere."""
    ranks = measure(plan, world, comm, limit)
    if ranks is None:
        return {}
    folder = plan.config.dataset.data_folder
    return {"metadata": section(ranks, folder, str(scratch_folder(folder, "").parent))}


def write_metadata(config: Config, meta: dict[str, Any], launcher: str) -> Path:
    """Commit ``metadata.json`` (``results.metadata.document``) in a run folder of its own
    (``make_run_dir``: ``<output.folder>/<run-id>``, or under ``output.layout: mlpstorage``
    ``training/<model>/metadata/<YYYYMMDD_HHMMSS>``)."""
    run_id = new_run_id(config.name)
    folder = make_run_dir(config, run_id, command="metadata")
    finished = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    doc = document(config, meta, run_id, finished, launcher, run_facts(config))
    write_json(folder / METADATA_NAME, doc)
    return folder / METADATA_NAME
