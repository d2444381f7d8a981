"""Write the synthetic dataset: parallel, deterministic, resumable, safe on a full disk.

Each file is written under a temporary name and renamed when complete; the file system is
synced before files are entered in the manifest, so the manifest lists only durable files, and
an interrupted or repeated generation writes only what is missing.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from concurrent.futures import (
    FIRST_EXCEPTION,
    Future,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass, field
from pathlib import Path

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset import progress
from dliobench.dataset import writer_pool as writers
from dliobench.dataset.layout import DataFile, train_dir
from dliobench.dataset.manifest import Manifest, identity
from dliobench.errors import DatasetError
from dliobench.formats import Format
from dliobench.plan import Plan
from dliobench.storage import lustre
from dliobench.storage import posix as storage

log = logging.getLogger(__name__)
MANIFEST_EVERY_S = 2.0


@dataclass(frozen=True)
class Generated:
    """What a generation did."""

    files_written: int
    bytes_written: int
    seconds: float
    files_total: int
    damaged: int = 0
    manifest: Manifest | None = field(default=None, repr=False)  # rank 0: as now on disk


def missing_files(plan: Plan, manifest: Manifest | None) -> list[DataFile]:
    """Files the plan needs that are not complete on disk."""
    known = manifest.files if manifest else {}
    out = []
    for f in plan.files:
        try:
            size = (plan.root / f.relpath).stat().st_size
        except FileNotFoundError:
            size = -1
        if known.get(f.relpath) != size:
            out.append(f)
    return out


def _check_space(root: Path, todo: list[DataFile]) -> None:
    need = sum(f.payload_bytes for f in todo)
    probe = root if root.exists() else next(p for p in root.parents if p.exists())
    free = shutil.disk_usage(probe).free
    if need > free:
        raise DatasetError(
            f"the dataset needs {need / 1e9:.2f} GB more but only {free / 1e9:.2f} GB are free "
            f"under {probe}; free space, lower dataset.num_files_train or choose another "
            "dataset.data_folder"
        )


def _remove_stale_temps(root: Path) -> None:
    if root.exists():
        for stale in root.rglob(".*.tmp-*"):
            stale.unlink(missing_ok=True)


def verify(plan: Plan, manifest: Manifest, show_progress: bool) -> list[str]:
    """Re-read every recorded file and return those whose CRC-32C no longer matches."""
    root = plan.root
    rels = [rel for rel in manifest.files if rel in manifest.checksums]

    def bad(rel: str) -> bool:
        try:
            return storage.file_crc32c(root / rel) != manifest.checksums[rel]
        except FileNotFoundError:
            return True

    out = []
    total = sum(manifest.files[rel] for rel in rels)
    with progress.bar("verifying checksums", total, show_progress, unit="bytes") as advance, \
            ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for rel, mismatch in zip(rels, pool.map(bad, rels), strict=True):
            advance(manifest.files[rel])
            if mismatch:
                out.append(rel)
    return out


def _todo(plan: Plan, world: World, comm: Comm, check: bool, show_progress: bool,
          loaded: Manifest | None) -> tuple[Manifest, list[DataFile], list[str]]:
    """Rank 0 decides what to write (and, with ``check``, what is damaged); all ranks learn.

    ``loaded``: the manifest rank 0 has loaded already (None: load it here).
    """
    dataset = plan.config.dataset
    manifest = None
    if world.is_root:
        manifest = loaded if loaded is not None else Manifest.load(dataset.data_folder)
    if manifest is not None:
        manifest.check_matches(dataset)
    damaged: list[str] = []
    if world.is_root and manifest is not None and check:
        damaged = verify(plan, manifest, show_progress)
        manifest.forget(damaged)
    manifest = comm.bcast(manifest or Manifest(identity(dataset)))
    todo = missing_files(plan, manifest) if world.is_root else []
    return manifest, comm.bcast(todo), comm.bcast(damaged)


def generate(plan: Plan, world: World, comm: Comm, show_progress: bool,
             check: bool = False, manifest: Manifest | None = None) -> Generated:
    """Write the files that are missing (or, with ``check``, damaged); ranks split the work.

    ``manifest``: the dataset's manifest if rank 0 has loaded it already.
    """
    config = plan.config
    dataset = config.dataset
    fmt, root = plan.fmt, plan.root
    manifest, todo_all, damaged = _todo(plan, world, comm, check, show_progress, manifest)
    if damaged:
        log.warning("%d file(s) did not match their checksum and are written again: %s",
                    len(damaged), ", ".join(damaged[:5]) + (" ..." if len(damaged) > 5 else ""))
    if not todo_all:
        return Generated(0, 0, 0.0, dataset.num_files_train, len(damaged),
                         manifest if world.is_root else None)
    root.mkdir(parents=True, exist_ok=True)
    if world.is_root:
        if lustre.wants_striping(config.storage):
            lustre.set_stripe(root, config.storage)
        _remove_stale_temps(root)
        _check_space(root, todo_all)
    comm.barrier()
    start = time.perf_counter()
    written = _write_all(fmt, root, todo_all[world.rank::world.size], manifest, config, world,
                         show_progress)
    gathered = comm.gather(written) or [written]
    if world.is_root:
        for part in gathered:
            manifest.record(part)
        manifest.save(dataset.data_folder)
    nbytes = sum(size for part in gathered for size, _ in part.values())
    return Generated(len(todo_all), nbytes, time.perf_counter() - start,
                     dataset.num_files_train, len(damaged), manifest if world.is_root else None)


def _write_all(fmt: Format, root: Path, todo: list[DataFile], manifest: Manifest,
               config: Config, world: World, show_progress: bool) -> dict[str, tuple[int, int]]:
    """Write ``todo`` with a pool of writers; keep the manifest current on a one-rank world."""
    if not todo:  # more ranks than missing files
        return {}
    for folder in {(root / f.relpath).parent for f in todo}:  # once, not once per file
        folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, tuple[int, int]] = {}
    total = sum(f.payload_bytes for f in todo)
    desc = f"generating {len(todo)} {fmt.name} files"
    pool, write, workers = writers.pool_for(fmt, root, todo, config.dataset, world)
    with pool:  # submitted before the progress bar's thread starts: writer processes fork
        pending = {pool.submit(write, batch): batch
                   for batch in writers.batches(todo, workers)}
        try:
            _wait_all(pending, written, manifest, config, world, desc, total, show_progress)
        except BaseException:
            for future in pending:
                future.cancel()
            if world.size == 1:
                _save_durable(manifest, written, config)
            raise
    storage.sync_filesystem(root)
    storage.evict([p for rel in written for p in (root / rel, *fmt.side_files(root / rel))],
                  flush=False)
    return written


def _wait_all(pending: dict[Future[dict[str, tuple[int, int]]], list[DataFile]],
              written: dict[str, tuple[int, int]], manifest: Manifest, config: Config,
              world: World, desc: str, total: int, show_progress: bool) -> None:
    """Collect the writers' results with a progress bar, saving the manifest as they come."""
    last_save = time.monotonic()
    with progress.bar(desc, total, show_progress and world.is_root, unit="bytes") as advance:
        while pending:
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
            for future in done:
                batch = pending.pop(future)
                written.update(future.result())
                advance(sum(f.payload_bytes for f in batch))
            if world.size == 1 and time.monotonic() - last_save > MANIFEST_EVERY_S:
                _save_durable(manifest, written, config)
                last_save = time.monotonic()


def _save_durable(manifest: Manifest, written: dict[str, tuple[int, int]],
                  config: Config) -> None:
    """Sync the file system, then record the written files: the manifest never runs ahead."""
    storage.sync_filesystem(train_dir(config.dataset))
    manifest.record(written)
    manifest.save(config.dataset.data_folder)
