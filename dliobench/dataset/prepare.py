"""Make sure the dataset a run needs is on storage and matches its configuration."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from dliobench.base.errors import DatasetError
from dliobench.comm.world import Comm, World
from dliobench.dataset.bounds import check_memory
from dliobench.dataset.generate import Generated, generate, open_manifest, survey
from dliobench.dataset.lock import FolderLock
from dliobench.dataset.manifest import HEADER_KEY, LEGACY_KEY, Manifest, read_whole
from dliobench.dataset.plan import FileRows, FileSizes, Plan


@dataclass(frozen=True)
class ReadyDataset:
    """The plan with the real sizes of the files this rank reads, the dataset's bytes, and
    what generation (if any) did."""

    plan: Plan
    generated: Generated | None
    total_bytes: int  # data bytes of all the run's files


def prepare(plan: Plan, world: World, comm: Comm, show_progress: bool,
            lock: FolderLock | None = None) -> ReadyDataset:
    """Check the dataset; generate what is missing when ``workflow.generate_data`` allows.

    Rank 0 loads the manifest once; each rank checks its slice of the files against it and
    then gathers the sizes of the files it reads (O(files / ranks) each). ``lock``, held
    shared, is taken exclusively only to write: to fold an interrupted generation's journals
    into the manifest, or to generate; when that had to wait, the check is made again (the
    writer waited for may have written the files, and this run may hold the lock shared
    again: it then reads along with the others).
    """
    config = plan.config
    while lock is not None and comm.bcast(world.is_root and not lock.exclusive
                                          and _unsettled(plan)):
        lock.upgrade("prepared for a run", comm)
    manifest, missing, present = _check(plan, world, comm, show_progress)
    while missing and config.workflow.generate_data and not plan.existing and lock is not None \
            and lock.upgrade("generating for a run", comm):
        manifest, missing, present = _check(plan, world, comm, show_progress)
    generated = None
    if missing and plan.existing:
        raise DatasetError(
            f"{len(missing)} of the {len(plan.keys)} files indexed in "
            f"{plan.manifest_backend.describe()} are missing or changed size (first: "
            f"{plan.backend.describe(plan.keys[missing[0]])}); delete the folder "
            f"{plan.manifest_backend.describe('dliobench-manifest')} to index the dataset again")
    if missing:
        if not config.workflow.generate_data:
            raise incomplete(plan, manifest, missing)
        generated = generate(plan, world, comm, show_progress, manifest=manifest,
                             missing=missing)
        assert generated.manifest is not None
        manifest = generated.manifest
        present += generated.bytes_written
    ids = plan.files_read()
    sizes = FileSizes(ids, manifest.sizes(ids), len(plan.keys))
    crcs = FileRows(ids, manifest.sample_checksums(ids)) if config.reader.verify_samples \
        else None
    return ReadyDataset(plan.with_sizes(sizes, crcs), generated, present)


def generate_locked(plan: Plan, world: World, comm: Comm, lock: FolderLock, show_progress: bool,
                    check: bool) -> Generated:
    """``dliobench generate`` under the folder's ``lock``, held shared while it looks and
    exclusively only to write (journals to fold, files missing or, with ``check``, damaged),
    so runs reading a complete dataset are not kept waiting; when taking it had to wait, the
    writer waited for may have written, so it looks again."""
    while comm.bcast(world.is_root and not lock.exclusive and _unsettled(plan)):
        lock.upgrade("generating", comm)
    while True:
        manifest = open_manifest(plan, world, comm)
        missing, damaged, _ = survey(plan, manifest, world, comm, check, show_progress)
        if not (missing or damaged) or not lock.upgrade("generating", comm):
            break
    return generate(plan, world, comm, show_progress, check, manifest, missing, damaged)


def incomplete(plan: Plan, manifest: Manifest, missing: list[int]) -> DatasetError:
    """The sentence for a run that may not generate and finds files not complete: how many,
    what is wrong with the first (its path, and its size against the one written), and what
    to run."""
    dataset = plan.config.dataset
    count = len(missing)
    if manifest.num_files == 0:
        return DatasetError(
            f"the dataset in {dataset.data_folder} has none of its {dataset.num_files_train:,} "
            f"{dataset.format} files (no generation recorded any there); run `dliobench "
            "generate` with the same workload and overrides, or set workflow.generate_data=true")
    first = "the first: " if count > 1 else ""
    it = "it" if count == 1 else "them"
    return DatasetError(
        f"{count:,} of the {dataset.num_files_train:,} {dataset.format} files of the dataset in "
        f"{dataset.data_folder} {'is' if count == 1 else 'are'} not complete "
        f"({first}{what_is_wrong(plan, manifest, missing[0])}); run `dliobench generate` with "
        f"the same workload and overrides to write {it} again, or set "
        "workflow.generate_data=true")


def what_is_wrong(plan: Plan, manifest: Manifest, index: int) -> str:
    """File ``index`` (or one of its side files) in words: never recorded as written, gone,
    or of another size than the manifest records (one stat per object, of this file only)."""
    entries = manifest.entries(np.array([index], dtype=np.int64))
    wants = [int(entries.size[0]), *(int(s) for s in entries.side_size[0])]
    keys = plan.object_keys(index)
    name = plan.backend.describe
    if wants[0] < 0:
        return (f"{name(keys[0])} was never recorded as written: a generation stopped before "
                "it")
    for key, want in zip(keys, wants, strict=True):
        try:
            have = plan.backend.size(key)
        except OSError as exc:
            return f"{name(key)} cannot be read ({exc.strerror or exc})"
        if have is None:
            return f"{name(key)} is missing"
        if want >= 0 and have != want:
            return f"{name(key)} is {have:,} bytes where {want:,} were written"
    return f"{name(keys[0])} changed while it was checked"


def _check(plan: Plan, world: World, comm: Comm,
           show_progress: bool) -> tuple[Manifest, list[int], int]:
    """(the manifest, the files missing, the bytes of the complete ones)."""
    config, dataset = plan.config, plan.config.dataset
    manifest = open_manifest(plan, world, comm)
    if config.workflow.generate_data and manifest.num_files < dataset.num_files_train:
        check_memory(config, world, generating=True)  # before a survey of every file
    missing, _, present = survey(plan, manifest, world, comm, False, show_progress)
    return manifest, missing, present


def _unsettled(plan: Plan) -> bool:
    """Whether loading the manifest writes (rank 0): an interrupted generation's journals
    are folded in, or a schema-1 manifest is migrated."""
    backend = plan.manifest_backend
    try:
        header = read_whole(backend, HEADER_KEY)
        if header is None:
            return backend.size(LEGACY_KEY) is not None
        doc = json.loads(bytes(header))
    except (OSError, ValueError):
        return False  # loading it says what is wrong
    return isinstance(doc, dict) and bool(doc.get("journals"))
