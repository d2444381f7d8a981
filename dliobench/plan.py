"""The Plan: what a run resolves once from its configuration and passes down.

Format, data folder, files, their real sizes, the shuffle seed, this rank's shard and the
steps of every epoch are decided here, once per rank; generation, loaders, staging and the
training loop read them from the plan instead of re-deriving them from the configuration.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from pathlib import Path

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset.layout import DataFile, dataset_files, train_dir
from dliobench.dataset.sharding import ShardSpec, rank_sample_count
from dliobench.errors import ConfigError
from dliobench.formats import Format, format_for


@dataclass(frozen=True)
class Plan:
    """One rank's resolved run: what to read, from where, in which shard, for how many steps.

    ``sizes`` (the files' real sizes, from the manifest) is empty until the dataset has been
    prepared; ``root`` is the folder the data files are read from (a staged copy once staged).
    """

    config: Config
    fmt: Format
    root: Path
    files: list[DataFile]
    seed: int
    spec: ShardSpec
    steps: list[int]
    sizes: list[int]

    def paths(self) -> list[Path]:
        """Every data file's path under ``root``."""
        return [self.root / f.relpath for f in self.files]

    def with_sizes(self, sizes: list[int]) -> Plan:
        """The plan once the dataset's real file sizes are known."""
        return replace(self, sizes=list(sizes))

    def reading_from(self, root: Path) -> Plan:
        """The plan reading the same files from another folder (a staged copy)."""
        return replace(self, root=root)


def resolve(config: Config, world: World, comm: Comm, seed: int | None = None) -> Plan:
    """The plan of this rank: the one place a configuration's format is looked up.

    ``seed`` defaults to ``shuffle_seed`` (a collective when a shuffle is ``random``).
    """
    fmt = format_for(config.dataset)
    check_format(config, fmt)
    seed = shuffle_seed(config, comm) if seed is None else seed
    spec = shard_spec(config, world, seed)
    return Plan(config, fmt, train_dir(config.dataset),
                dataset_files(config.dataset, fmt.extension), seed, spec,
                planned_steps(config, spec), [])


def shard_spec(config: Config, world: World, seed: int) -> ShardSpec:
    """The sharding of this rank under this configuration."""
    r = config.reader
    return ShardSpec(num_files=config.dataset.num_files_train,
                     samples_per_file=config.dataset.num_samples_per_file,
                     rank=world.rank, size=world.size, sharding=r.sharding,
                     file_shuffle=r.file_shuffle != "off", sample_shuffle=r.sample_shuffle != "off",
                     seed=seed, seed_change_epoch=config.train.seed_change_epoch)


def shuffle_seed(config: Config, comm: Comm) -> int:
    """train.seed, or with a 'random' shuffle a fresh seed chosen by rank 0 for all ranks."""
    if "random" in (config.reader.file_shuffle, config.reader.sample_shuffle):
        return int(comm.bcast(secrets.randbits(31)))
    return config.train.seed


def planned_steps(config: Config, spec: ShardSpec) -> list[int]:
    """Steps of each epoch; every rank takes the same number (the fewest any rank has), so
    collectives per step line up; total_training_steps may cut the last epoch short."""
    batch = config.reader.batch_size
    fewest = min(rank_sample_count(replace(spec, rank=r)) for r in range(spec.size))
    per_epoch = fewest // batch if config.reader.drop_last else -(-fewest // batch)
    cap = config.train.total_training_steps
    if cap <= 0 or per_epoch == 0:  # no step at all: check_run says why before a run
        return [per_epoch] * config.train.epochs
    full, rest = divmod(cap, per_epoch)
    return [per_epoch] * full + ([rest] if rest else [])


def check_format(config: Config, fmt: Format) -> None:
    """Refuse more samples per file than the format holds."""
    max_per_file = fmt.max_samples_per_file
    if max_per_file is not None and config.dataset.num_samples_per_file > max_per_file:
        raise ConfigError(f"dataset.num_samples_per_file: {config.dataset.format} files hold at "
                          f"most {max_per_file} sample(s); use npz, npy, hdf5, tfrecord or "
                          "indexed_binary for many samples per file")


def check_run(config: Config, world: World) -> None:
    """Refuse layouts and sizes that cannot run as configured on this many ranks."""
    if config.reader.sharding == "file" and config.dataset.num_files_train < world.size:
        raise ConfigError(
            f"reader.sharding=file needs at least one file per rank ({world.size} ranks, "
            f"{config.dataset.num_files_train} files); use reader.sharding=sample"
            + (" (reader.file_access=shared means all ranks read one file)"
               if config.reader.file_access == "shared" else "")
        )
    per_rank = config.total_samples // world.size
    if config.reader.batch_size > per_rank and config.reader.drop_last:
        raise ConfigError(
            f"reader.batch_size={config.reader.batch_size} is larger than the {per_rank} samples "
            f"each of {world.size} rank(s) gets per epoch; lower it or raise "
            "dataset.num_files_train"
        )
