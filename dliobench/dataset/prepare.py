"""Make sure the dataset a run needs is on storage and matches its configuration."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dliobench.bounds import check_memory
from dliobench.comm.world import Comm, World
from dliobench.dataset.generate import Generated, generate, open_manifest, survey
from dliobench.dataset.lock import FolderLock
from dliobench.dataset.manifest import HEADER_KEY, LEGACY_KEY, Manifest, read_whole
from dliobench.errors import DatasetError
from dliobench.plan import FileRows, FileSizes, Plan


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
    config, dataset = plan.config, plan.config.dataset
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
            raise DatasetError(
                f"the dataset in {dataset.data_folder} lacks {len(missing)} of "
                f"{dataset.num_files_train} {dataset.format} files; run `dliobench generate` "
                "with the same workload and overrides, or set workflow.generate_data=true"
            )
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
