"""Stage the dataset to node-local storage before training, as HPC jobs do (storage.stage_to).

Scope ``shard``: each rank copies the files it will read; ``node``: a node's ranks copy,
together, the files any of them will read; ``all``: every node gets the whole dataset.
The source's cached pages are dropped first and the copies are fsynced and evicted, so staging
reads the storage under test and training then reads the local device; the staging time and
GB/s are reported beside the training figures.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dliobench import storage
from dliobench.config_schema import Config
from dliobench.errors import DatasetError
from dliobench.formats import format_for
from dliobench.layout import DataFile, train_dir
from dliobench.runner import planned_steps, shard_spec
from dliobench.sharding import rank_samples
from dliobench.world import Comm, World


@dataclass(frozen=True)
class Staged:
    """Where the staged copy is and what staging it cost (this rank's part)."""

    config: Config
    folder: Path
    files: int
    nbytes: int
    seconds: float


def files_read_by(config: Config, world: World, ranks: list[int], seed: int) -> set[int]:
    """Indices of the files the given ranks read over the whole run."""
    out: set[int] = set()
    spf = config.dataset.num_samples_per_file
    for rank in ranks:
        spec = shard_spec(config, replace(world, rank=rank), seed)
        for epoch in range(len(planned_steps(config, spec))):
            out.update(int(i) // spf for i in rank_samples(spec, epoch))
    return out


def _node_ranks(world: World, comm: Comm) -> list[int]:
    hosts = comm.allgather(world.host)
    return [r for r, h in enumerate(hosts) if h == world.host]


def _copy(src: Path, dst: Path) -> int:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.staging-{os.getpid()}")
    try:
        shutil.copyfile(src, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, dst)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DatasetError(f"cannot stage {src} to {dst}: {exc.strerror}; free space under "
                           "storage.stage_to or choose another folder") from None
    storage.evict([dst])
    return dst.stat().st_size


def stage(config: Config, world: World, comm: Comm, files: list[DataFile], run_id: str,
          seed: int) -> Staged:
    """Copy what this node needs to ``storage.stage_to/<run_id>``; all ranks wait for it."""
    scope = config.storage.stage_scope
    node = _node_ranks(world, comm)
    if scope == "all":
        needed = set(range(len(files)))
    else:
        needed = files_read_by(config, world, [world.rank] if scope == "shard" else node, seed)
    mine = sorted(needed) if scope == "shard" else sorted(needed)[node.index(world.rank)::len(node)]
    fmt = format_for(config.dataset)
    src_root, folder = train_dir(config.dataset), Path(config.storage.stage_to) / run_id
    dst_root = folder / "train"
    pairs = [(src_root / files[i].relpath, dst_root / files[i].relpath) for i in mine]
    pairs += [(s, d) for src, dst in list(pairs)
              for s, d in zip(fmt.side_files(src), fmt.side_files(dst), strict=True)]
    if world.local_rank == 0:  # the copy must read storage, not this node's page cache
        storage.evict([src for src, _ in pairs], flush=False)
    comm.barrier()
    start = time.perf_counter()
    with ThreadPoolExecutor(max(1, config.reader.read_threads)) as pool:
        nbytes = sum(pool.map(lambda p: _copy(*p), pairs))
    seconds = time.perf_counter() - start
    comm.barrier()
    staged = replace(config, dataset=replace(config.dataset, data_folder=str(folder)))
    return Staged(staged, folder, len(mine), nbytes, seconds)


def summary(parts: list[Staged]) -> dict[str, Any]:
    """Staging figures of the run: bytes over all ranks, time of the slowest."""
    seconds = max(p.seconds for p in parts)
    nbytes = sum(p.nbytes for p in parts)
    return {"path": str(parts[0].folder), "files": sum(p.files for p in parts),
            "bytes": nbytes, "seconds": seconds,
            "bytes_per_s": nbytes / seconds if seconds > 0 else None}


def remove(staged: Staged, world: World, comm: Comm) -> None:
    """Delete the staged copy once every rank is done with it (one rank per node)."""
    comm.barrier()
    if world.local_rank == 0:
        shutil.rmtree(staged.folder, ignore_errors=True)
