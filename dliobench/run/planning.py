"""Deciding a run's Plan, once per rank, where the run is assembled: the format looked up,
an existing dataset indexed, the shard, the seed and the steps of every epoch; and what can be
refused from the configuration and the rank count before any work.

The ``Plan`` value itself is ``dliobench.dataset.plan`` (the dataset reads it; deciding it
needs the dataset, so this half sits above).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import replace

from dliobench.base.errors import ConfigError
from dliobench.comm.world import Comm, World
from dliobench.config.folders import check_folders
from dliobench.config.schema import Config
from dliobench.dataset.bounds import check_memory
from dliobench.dataset.existing import adopt
from dliobench.dataset.layout import TRAIN, FileKeys
from dliobench.dataset.plan import Plan
from dliobench.dataset.sharding import ShardSpec, rank_sample_count
from dliobench.formats import format_for, get_format
from dliobench.formats.base import Format
from dliobench.storage import backend_for


def resolve(config: Config, world: World, comm: Comm, seed: int | None = None) -> Plan:
    """The plan of this rank: the one place a configuration's format is looked up.

    ``seed`` defaults to ``shuffle_seed`` (a collective when a shuffle is ``random``). An
    existing dataset (``dataset.source: existing``, or DLIO's) is indexed first, once: the
    index decides the format, files and sizes.
    """
    found = adopt(config, world, comm)
    if found is not None:
        config = found.config
    fmt = format_for(config.dataset, config.reader.decoder)
    check_format(config, fmt)
    check_folders(config, TRAIN)
    seed = shuffle_seed(config, comm) if seed is None else seed
    spec = shard_spec(config, world, seed)
    backend = backend_for(config.dataset.data_folder, config.storage)
    keys: Sequence[str] = found.keys if found else FileKeys(config.dataset, fmt.extension)
    return Plan(config, fmt, backend, keys, seed, spec, planned_steps(config, spec), [],
                index_backend=found.manifest_backend if found else None)


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
