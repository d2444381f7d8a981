"""Make sure the dataset a run needs is on disk and matches its configuration."""

from __future__ import annotations

from dataclasses import dataclass

from dliobench.comm.world import Comm, World
from dliobench.dataset.generate import Generated, generate, missing_files
from dliobench.dataset.manifest import Manifest, identity
from dliobench.errors import DatasetError
from dliobench.plan import Plan


@dataclass(frozen=True)
class ReadyDataset:
    """The plan with the files' real sizes, and what generation (if any) did."""

    plan: Plan
    generated: Generated | None

    @property
    def total_bytes(self) -> int:
        """Bytes of all files on disk."""
        return sum(self.plan.sizes)


def prepare(plan: Plan, world: World, comm: Comm, show_progress: bool) -> ReadyDataset:
    """Check the dataset; generate what is missing when ``workflow.generate_data`` allows.

    Rank 0 loads the manifest once; generation records into that same manifest, and the
    files' real sizes come from it.
    """
    config = plan.config
    dataset = config.dataset
    manifest: Manifest | None = None
    missing = []
    if world.is_root:
        manifest = Manifest.load(dataset.data_folder)
        if manifest is not None:
            manifest.check_matches(dataset)
        missing = missing_files(plan, manifest)
    missing = comm.bcast(missing)
    generated = None
    if missing:
        if not config.workflow.generate_data:
            raise DatasetError(
                f"the dataset in {dataset.data_folder} lacks {len(missing)} of "
                f"{dataset.num_files_train} {dataset.format} files; run `dliobench generate` "
                "with the same workload and overrides, or set workflow.generate_data=true"
            )
        empty = Manifest(identity(dataset))  # none on disk yet
        generated = generate(plan, world, comm, show_progress, manifest=manifest or empty)
        manifest = generated.manifest
    sizes: list[int] = []
    if world.is_root:
        assert manifest is not None
        sizes = [manifest.files[f.relpath] for f in plan.files]
    return ReadyDataset(plan.with_sizes(comm.bcast(sizes)), generated)
