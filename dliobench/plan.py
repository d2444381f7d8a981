"""The Plan: what a run resolves once from its configuration and passes down.

Format, data folder, files, their real sizes, the shuffle seed, this rank's shard and the
steps of every epoch are decided here, once per rank; generation, loaders, staging and the
training loop read them from the plan instead of re-deriving them from the configuration.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from dliobench.bounds import check_memory
from dliobench.comm.world import Comm, World
from dliobench.config.folders import check_folders
from dliobench.config.schema import Config
from dliobench.dataset.layout import TRAIN, FileKeys
from dliobench.dataset.sharding import ShardSpec, rank_sample_count, rank_samples
from dliobench.errors import ConfigError
from dliobench.formats import Format, format_for, get_format
from dliobench.storage import backend_for
from dliobench.storage.backend import Backend


@dataclass(frozen=True)
class Plan:
    """One rank's resolved run: what to read, from where, in which shard, for how many steps.

    ``backend`` is the storage the files are read from (a staged copy once staged) and
    ``keys`` name them there (computed, never listed). ``sizes`` holds the real sizes of the
    files this rank reads (``files_read``), from the manifest, once the dataset is prepared.
    Nothing here grows with the dataset's file count but with this rank's share of it.
    """

    config: Config
    fmt: Format
    backend: Backend
    keys: FileKeys
    seed: int
    spec: ShardSpec
    steps: list[int]
    sizes: Sequence[int]
    sample_crcs: FileRows | None = None  # recorded per-sample CRC-32C (reader.verify_samples)

    def with_sizes(self, sizes: Sequence[int], sample_crcs: FileRows | None = None) -> Plan:
        """The plan once the real sizes (and, to verify reads, the sample checksums) of the
        files it reads are known."""
        return replace(self, sizes=sizes, sample_crcs=sample_crcs)

    def files_read(self) -> np.ndarray:
        """Sorted indices of the files this rank reads over the whole run (every file with
        DALI's own readers, which shard by themselves)."""
        r = self.config.reader
        if r.data_loader == "dali" and r.dali_native_reader:
            return np.arange(len(self.keys), dtype=np.int64)
        spf = self.spec.samples_per_file
        parts = [rank_samples(self.spec, epoch) // spf for epoch in range(len(self.steps))]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)

    def reading_from(self, backend: Backend) -> Plan:
        """The plan reading the same files from other storage (a staged copy)."""
        return replace(self, backend=backend)

    def object_keys(self, index: int) -> list[str]:
        """The keys of file ``index`` and of its side files."""
        key = self.keys[index]
        return [key, *(key + suffix for suffix in self.fmt.side_suffixes)]


def resolve(config: Config, world: World, comm: Comm, seed: int | None = None) -> Plan:
    """The plan of this rank: the one place a configuration's format is looked up.

    ``seed`` defaults to ``shuffle_seed`` (a collective when a shuffle is ``random``).
    """
    fmt = format_for(config.dataset)
    check_format(config, fmt)
    check_folders(config, TRAIN)
    seed = shuffle_seed(config, comm) if seed is None else seed
    spec = shard_spec(config, world, seed)
    return Plan(config, fmt, backend_for(config.dataset.data_folder, config.storage),
                FileKeys(config.dataset, fmt.extension), seed, spec,
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
    """Refuse more samples per file than the format holds, and checksums it cannot keep."""
    if fmt.lossy and (config.reader.verify_samples or config.dataset.sample_checksums):
        raise ConfigError(f"{fmt.name} is lossy: a decoded sample is not the bytes written, "
                          "so it cannot be checked against a checksum; turn "
                          "reader.verify_samples and dataset.sample_checksums off")
    if fmt.compressed_image and config.reader.verify_samples and not config.reader.decode:
        raise ConfigError("reader.verify_samples checks decoded pixels; with reader.decode "
                          f"off the {fmt.name} samples stay encoded: turn one of them off")
    max_per_file = fmt.max_samples_per_file
    if max_per_file is not None and config.dataset.num_samples_per_file > max_per_file:
        raise ConfigError(f"dataset.num_samples_per_file: {config.dataset.format} files hold at "
                          f"most {max_per_file} sample(s); use npz, npy, hdf5, tfrecord or "
                          "indexed_binary for many samples per file")


def precheck(config: Config, world: World, generating: bool) -> None:
    """What can be refused before any work, from the configuration and the rank count alone
    (the same answer on every rank: rank 0 says it for the job): a run's layout against the
    ranks, the format's limits, the memory a rank would need."""
    if not generating:
        check_run(config, world)
    check_format(config, get_format(config.dataset.format))  # its class limits suffice
    check_memory(config, world, generating)


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
    if per_rank == 0:
        d = config.dataset
        raise ConfigError(
            f"{world.size} ranks but only {config.total_samples} sample(s) ({d.num_files_train} "
            f"file(s) x {d.num_samples_per_file}): a rank would read nothing; lower the ranks "
            "or raise dataset.num_files_train")
    if config.reader.batch_size > per_rank and config.reader.drop_last:
        raise ConfigError(
            f"reader.batch_size={config.reader.batch_size} is larger than the {per_rank} samples "
            f"each of {world.size} rank(s) gets per epoch; lower it or raise "
            "dataset.num_files_train"
        )


class FileSizes(Sequence[int]):
    """Real sizes of some of a dataset's files, looked up by file index: a full array when
    the files are many of the dataset's, else sorted indices searched (O(files held))."""

    def __init__(self, ids: np.ndarray, sizes: np.ndarray, num_files: int) -> None:
        self._num_files = num_files
        self._dense = ids.size * 8 >= num_files
        if self._dense:
            self._sizes = np.full(num_files, -1, np.int64)
            self._sizes[ids] = sizes
            self._ids = np.empty(0, np.int64)
        else:
            order = np.argsort(ids)
            self._ids, self._sizes = ids[order], np.asarray(sizes, np.int64)[order]

    def __len__(self) -> int:
        return self._num_files

    def __getitem__(self, index: int) -> int:  # type: ignore[override]
        if self._dense:
            size = int(self._sizes[index])
        else:
            at = int(np.searchsorted(self._ids, index))
            size = int(self._sizes[at]) if at < self._ids.size and self._ids[at] == index else -1
        if size < 0:
            raise IndexError(f"file {index} is not among the files this rank reads")
        return size

    def total(self) -> int:
        """Bytes of the files held."""
        return int(self._sizes[self._sizes >= 0].sum())


class FileRows:
    """Per-sample values (checksums) of some files, looked up by file index."""

    def __init__(self, ids: np.ndarray, rows: np.ndarray) -> None:
        order = np.argsort(ids)
        self._ids, self._rows = np.asarray(ids)[order], rows[order]

    def __getitem__(self, index: int) -> np.ndarray:
        at = int(np.searchsorted(self._ids, index))
        if at >= self._ids.size or self._ids[at] != index:
            raise IndexError(f"file {index} is not among the files this rank reads")
        row: np.ndarray = self._rows[at]
        return row
