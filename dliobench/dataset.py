"""Make sure the dataset a run needs is on disk and matches its configuration."""

from __future__ import annotations

from dataclasses import dataclass

from dliobench.config_schema import Config
from dliobench.errors import DatasetError
from dliobench.formats import format_for
from dliobench.generate import Generated, generate, missing_files
from dliobench.layout import DataFile, dataset_files
from dliobench.manifest import Manifest
from dliobench.world import Comm, World


@dataclass(frozen=True)
class ReadyDataset:
    """The files a run reads, their real sizes, and what generation (if any) did."""

    files: list[DataFile]
    sizes: list[int]
    generated: Generated | None

    @property
    def total_bytes(self) -> int:
        """Bytes of all files on disk."""
        return sum(self.sizes)


def prepare(config: Config, world: World, comm: Comm, show_progress: bool) -> ReadyDataset:
    """Check the dataset; generate what is missing when ``workflow.generate_data`` allows."""
    dataset = config.dataset
    missing: list[DataFile] = []
    if world.is_root:
        manifest = Manifest.load(dataset.data_folder)
        if manifest is not None:
            manifest.check_matches(dataset)
        missing = missing_files(config, manifest)
    missing = comm.bcast(missing)
    generated = None
    if missing:
        if not config.workflow.generate_data:
            raise DatasetError(
                f"the dataset in {dataset.data_folder} lacks {len(missing)} of "
                f"{dataset.num_files_train} {dataset.format} files; run `dliobench generate` "
                "with the same workload and overrides, or set workflow.generate_data=true"
            )
        generated = generate(config, world, comm, show_progress)
    files = dataset_files(dataset, format_for(dataset).extension)
    sizes: list[int] = []
    if world.is_root:
        final = Manifest.load(dataset.data_folder)
        assert final is not None
        sizes = [final.files[f.relpath] for f in files]
    return ReadyDataset(files, comm.bcast(sizes), generated)
