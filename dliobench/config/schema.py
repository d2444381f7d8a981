"""The configuration as frozen dataclasses: every key, its default, kind, aliases and help.

Each field's metadata drives parsing and validation in ``dliobench.config.load``, so a key is
declared once, here. Key names follow DLIO where they mean the same thing (see DESIGN.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dliobench.config.names import FORMAT_NAMES as FORMATS  # the registries' names
from dliobench.config.names import LOADER_NAMES as LOADERS

SHUFFLE_MODES = ("off", "seed", "random")
# dataset.compression: hdf5 takes gzip and lzf, parquet its own codecs (each format checks)
COMPRESSIONS = ("none", "gzip", "lzf", "snappy", "lz4", "zstd", "brotli")
DATATYPES = ("int8", "uint8", "fp16", "bf16", "fp32", "fp64")  # DLIO's get_datatype_size
PARQUET_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64")


@dataclass(frozen=True)
class ParquetColumn:
    """One column of generated parquet files (DLIO's ``dataset.parquet.columns`` item):
    ``size`` values of ``dtype`` per row; ``read: false`` columns are written, not read."""

    name: str
    dtype: str = "float32"
    size: int = 1
    read: bool = True

    @property
    def width(self) -> int:
        """Bytes of this column in one row."""
        import numpy as np

        return int(np.dtype(self.dtype).itemsize) * self.size


def key(
    default: Any,
    kind: str,
    help: str,
    *,
    aliases: tuple[str, ...] = (),
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    words: tuple[tuple[Any, Any], ...] = (),
    nonempty: bool = False,
    secret: bool = False,
) -> Any:
    """Declare one configuration key (a dataclass field carrying its parsing rules).

    ``kind``: int, size, float, seconds, bool, choice, shuffle, str, ``path`` (a file-system
    path) or ``name`` (part of a file name: no '/'). Integers and sizes are bounded to
    int64 unless ``maximum`` says less. ``words``: (raw value, value) pairs taken before the
    kind's conversion, e.g. the word ``model`` for a size, or YAML's ``false`` read from a bare
    ``off``. ``nonempty``: the empty string is refused (a folder that would be the current
    directory).
    ``secret``: a credential, never shown (results, show-config, messages: ``config.secrets``).
    """
    meta = {
        "kind": kind,
        "help": help,
        "aliases": aliases,
        "minimum": minimum,
        "maximum": maximum,
        "choices": choices,
        "words": words,
        "nonempty": nonempty,
        "secret": secret,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class DatasetConfig:
    """What the synthetic dataset looks like and where it lives."""

    data_folder: str = key("data/default", "path", "folder holding the dataset (train/ inside)",
                           nonempty=True)
    format: str = key("npz", "choice", "file format of the samples", choices=FORMATS)
    source: str = key(
        "generate", "choice", "generate: dliobench writes the dataset; existing: read the files "
        "already in data_folder (your own, or DLIO's), indexed once into a manifest (format, "
        "file count, samples per file and sizes then come from the files)",
        choices=("generate", "existing"))
    layout: str = key(
        "auto", "choice", "names and folders of the files: dliobench's, dlio's "
        "(train/<prefix>_<i>_of_<n>.<format>, subfolders included; read as an existing "
        "dataset), or auto (a DLIO dataset is recognised by its first file's name)",
        choices=("auto", "dliobench", "dlio"))
    index_checksums: bool = key(
        False, "bool", "existing datasets: also record every file's CRC-32C when indexing (reads "
        "every byte once; `dliobench generate --verify` can then check the files)")
    npz_member: str = key(
        "x", "name", "existing npz datasets: the member holding the samples (DLIO's x; other "
        "members, such as DLIO's labels y, are not read, as DLIO reads x only)", nonempty=True)
    npz_sample_axis: int = key(
        -1, "int", "existing npz datasets: the axis of npz_member along which its samples lie "
        "(-1, the last: x[..., i], as DLIO writes and reads them; 0: x[i]); "
        "num_samples_per_file=1 on the command line reads the member whole as one sample")
    num_files_train: int = key(8, "int", "number of training files", minimum=1)
    num_samples_per_file: int = key(1, "int", "samples stored in each file", minimum=1)
    num_subfolders_train: int = key(
        0, "int", "spread the files over this many subfolders (0: none)", minimum=0
    )
    record_length_bytes: int = key(
        65536, "size", "mean bytes per sample", aliases=("record_length",), minimum=1
    )
    record_length_bytes_stdev: int = key(
        0, "size", "standard deviation of the sample size", aliases=("record_length_stdev",),
        minimum=0,
    )
    record_length_bytes_resize: int = key(
        0, "size", "bytes of the preprocessed sample handed to compute (0: as read)",
        aliases=("record_length_resize",), minimum=0,
    )
    file_prefix: str = key("img", "name", "prefix of the data file names")
    generation_seed: int = key(0, "int", "seed of the generated bytes and sample sizes",
                               minimum=0)
    enable_chunking: bool = key(False, "bool", "hdf5: store the dataset in chunks (DLIO's key)")
    chunk_size: int = key(0, "size", "hdf5: bytes per chunk within a sample when chunking",
                          minimum=0)
    compression: str = key("none", "choice", "hdf5: compression filter of the chunks (gzip, "
                           "lzf); parquet: codec of the pages (snappy, gzip, lz4, zstd, brotli)",
                           choices=COMPRESSIONS)
    compression_level: int = key(4, "int", "hdf5: gzip level", minimum=0, maximum=9)
    parquet_columns: tuple[ParquetColumn, ...] = key(
        (), "columns", "parquet: columns of a row, a list of {name, dtype, size, read} (DLIO's "
        "dataset.parquet.columns; their bytes must add up to record_length_bytes); none: one "
        "uint8 column of record_length_bytes", aliases=("dataset.parquet.columns",))
    parquet_row_group_size: int = key(
        1024, "int", "parquet: rows per row group", minimum=1,
        aliases=("dataset.parquet.row_group_size",))
    parquet_read_mode: str = key(
        "row_group", "choice", "parquet: DLIO's read_mode; both read a sample's whole row group "
        "(of the columns read) and keep the last one decoded", choices=("default", "row_group"),
        aliases=("dataset.parquet.read_mode",))
    parquet_generation_batch_size: int = key(
        0, "int", "parquet: DLIO's rows generated at once; accepted, the generator works one "
        "row group at a time", minimum=0, aliases=("dataset.parquet.generation_batch_size",))
    compressibility: float = key(
        0.0, "float", "fraction of each block made of zeros, so storage compression can "
        "shrink it (like fio's buffer_compress_percentage / 100)", minimum=0, maximum=0.99,
    )
    sample_checksums: bool = key(
        False, "bool", "also record every sample's CRC-32C in the manifest, so reads can be "
        "verified sample by sample (reader.verify_samples)",
    )
    write_odirect: bool = key(
        True, "bool", "write generated npz, npy, tfrecord and indexed_binary files of 1 MiB or "
        "more with O_DIRECT, bypassing the page cache (buffered where the file system refuses "
        "it)",
    )
    check_free_space: bool = key(
        True, "bool", "refuse to generate when the files (payload, format overhead and block "
        "rounding, measured on a few small probe files) would not fit in the free space; off "
        "for storage whose free space is not what it reports (quotas, thin provisioning)",
    )


@dataclass(frozen=True)
class ReaderConfig:
    """How samples are read, batched and sharded."""

    data_loader: str = key("native", "choice", "loader implementation", choices=LOADERS)
    batch_size: int = key(1, "int", "samples per step on each rank", minimum=1)
    read_threads: int = key(1, "int", "reader threads per rank (0: read inline)", minimum=0)
    prefetch_size: int = key(2, "int", "batches read ahead of compute (tensorflow: also "
                             "`autotune`, tf.data.AUTOTUNE)", minimum=-1,
                             words=(("autotune", -1), ("AUTOTUNE", -1)))
    file_shuffle: str = key("off", "shuffle", "file order per epoch", choices=SHUFFLE_MODES)
    sample_shuffle: str = key("off", "shuffle", "sample order per epoch", choices=SHUFFLE_MODES)
    sharding: str = key(
        "sample", "choice", "split samples or whole files across ranks", choices=("sample", "file")
    )
    drop_last: bool = key(True, "bool", "drop a rank's last partial batch of an epoch")
    multiprocessing_context: str = key(
        "fork", "choice", "start method of loader worker processes",
        choices=("fork", "spawn", "forkserver"),
    )
    odirect: bool = key(False, "bool", "read with O_DIRECT, bypassing the page cache")
    verify_samples: bool = key(
        False, "bool", "check every sample read against the CRC-32C the manifest recorded "
        "(the dataset needs dataset.sample_checksums; lossy formats cannot be checked)",
        aliases=("verify_checksums",))
    decode: bool = key(
        True, "bool", "decode image samples (jpeg, png) with Pillow, as DLIO's image reader "
        "(np.asarray(Image.open(f))) and real training do; false hands compute the encoded "
        "bytes, so a run shows what the reads alone cost and what decoding adds")
    persistent_workers: bool = key(True, "bool", "pytorch: keep worker processes across epochs")
    pin_memory: bool = key(True, "bool", "pytorch: pin batches in page-locked memory (CUDA only)")
    dali_native_reader: bool = key(
        False, "bool", "dali: use DALI's own readers (numpy, tfrecord, file) where they fit the "
        "format; they shard, shuffle and pad their own way, reported as deviations")
    file_access: str = key(
        "multi", "choice", "one file per reader (multi) or one shared file",
        choices=("multi", "shared"),
    )


@dataclass(frozen=True)
class TrainConfig:
    """The emulated training loop."""

    epochs: int = key(1, "int", "passes over the dataset", minimum=1)
    computation_time: float = key(0.0, "seconds", "emulated compute per batch", minimum=0)
    computation_time_stdev: float = key(0.0, "seconds", "its standard deviation", minimum=0)
    total_training_steps: int = key(-1, "int", "stop after this many steps (-1: all epochs)")
    seed: int = key(123, "int", "seed of the shuffles", minimum=0)
    seed_change_epoch: bool = key(True, "bool", "reshuffle with a new seed each epoch")
    accelerator: str = key("", "str", "accelerator profile from the `accelerators` section")
    allreduce_bytes: int = key(
        0, "size", "bytes of emulated gradients summed over ranks each step (0: none, as "
        "MLPerf Storage and DLIO; 'model' or -1: model.model_size_bytes; one rank never "
        "communicates)", minimum=-1, words=(("model", -1),),
    )
    stall_timeout_s: float = key(
        600.0, "seconds", "end the job when a rank makes no progress (a training step, a "
        "checkpoint, a data file written or checked) for this long: a stopped rank or hung "
        "storage (0: never)", minimum=0)
    allreduce_overlap: bool = key(
        True, "bool", "run the allreduce alongside the step's compute, as DDP overlaps it with "
        "the backward pass (false: after compute, blocking)",
    )


@dataclass(frozen=True)
class MetricConfig:
    """How the metrics are computed and judged."""

    au: float = key(0.90, "float", "accelerator-utilization floor", minimum=0, maximum=1)
    fail_below_floor: bool = key(
        False, "bool", "exit with code 3 when the run's AU is below the floor (for scripts)")
    client_ceiling: str = key(
        "auto", "str", "samples/s one rank of this host can take in from memory with these "
        "loader settings: a number, 'off', or 'auto' (measured with `dliobench ceiling` when a "
        "run misses its floor waiting, then cached); a run demanding more is client-limited",
        words=((False, "off"),))  # YAML reads a bare `off` as false
    exclude_start_steps: int = key(1, "int", "warm-up steps left out of each epoch", minimum=0)
    exclude_end_steps: int = key(0, "int", "closing steps left out of each epoch", minimum=0)


@dataclass(frozen=True)
class WorkflowConfig:
    """Which phases run."""

    generate_data: bool = key(True, "bool", "generate missing dataset files before training")
    train: bool = key(True, "bool", "run the training emulation")
    checkpoint: bool = key(False, "bool", "write checkpoints during training, or with "
                           "train: false the checkpoint-only workflow (see checkpoint.*)")
    metadata: bool = key(False, "bool", "before training, measure stat, open, close, create and "
                         "unlink rates over the dataset's files (the result's `metadata`)")


@dataclass(frozen=True)
class OutputConfig:
    """Where results go."""

    folder: str = key("reports", "path", "root folder of run results", nonempty=True)
    label: str = key("", "str", "a name for this run in reports (sweep files set it from "
                     "their `labels:`); empty: reports name runs by what sets them apart")


@dataclass(frozen=True)
class CheckpointConfig:
    """When and how the emulated training writes checkpoints (``workflow.checkpoint``), or,
    with ``workflow.train: false``, how the checkpoint-only workflow writes and reads them."""

    checkpoint_folder: str = key("checkpoints", "path", "root folder of checkpoint files",
                                 nonempty=True)
    checkpoint_after_epoch: int = key(1, "int", "first epoch that ends with a checkpoint",
                                      minimum=1)
    epochs_between_checkpoints: int = key(1, "int", "epochs from one checkpoint to the next",
                                          minimum=1)
    steps_between_checkpoints: int = key(
        -1, "int", "checkpoint every N steps instead of by epochs (-1: by epochs)", minimum=-1)
    type: str = key("rank_zero", "choice", "rank 0 writes all (rank_zero) or every rank a "
                    "shard (all_ranks)", choices=("rank_zero", "all_ranks"))
    fsync: bool = key(True, "bool", "fsync checkpoint files, so the time includes storage")
    read_after_write: bool = key(False, "bool", "read each checkpoint back after evicting it")
    keep: bool = key(False, "bool", "keep the checkpoint files after the run (by default "
                     "they are deleted once measured)")
    optimizer_state_factor: float = key(
        0.0, "float", "optimizer state as a multiple of the model size (Adam in fp32: 2)",
        minimum=0, maximum=1000)
    num_checkpoints_write: int = key(
        10, "int", "checkpoint-only workflow (workflow.train: false): checkpoints written, "
        "one after another (-1 or 0: none, only read what an earlier run wrote)", minimum=-1)
    num_checkpoints_read: int = key(
        10, "int", "checkpoint-only workflow: checkpoints read after the writes (-1 or 0: none)",
        minimum=-1)
    time_between_checkpoints: float = key(
        0.0, "seconds", "checkpoint-only workflow: pause between two checkpoints (DLIO's "
        "stand-in for training steps)", minimum=0)
    mode: str = key(
        "default", "choice", "checkpoint-only workflow: every rank of the layout writes its "
        "shard (default), or the launched ranks write only their share of it, the MLPerf "
        "Storage rules' node-local mode: num_gpus / (TP x PP x DP) of the checkpoint (subset)",
        choices=("default", "subset"))
    scale: float = key(
        1.0, "float", "checkpoint-only workflow: write this fraction of every tensor's "
        "elements (the layout, files and tensors stay; the result states the scale)",
        minimum=0, maximum=1)
    file_format: str = key(
        "auto", "choice", "checkpoint-only workflow: torch.save files (torch), raw bytes "
        "(raw), or torch when it is installed (auto)", choices=("auto", "torch", "raw"))
    evict_before_read: bool = key(
        True, "bool", "checkpoint-only workflow: drop the written checkpoints from the page "
        "cache before reading them, so reads reach the storage")


@dataclass(frozen=True)
class StorageConfig:
    """The storage under the dataset, and how runs keep the page cache out of the numbers."""

    storage_type: str = key("local_fs", "choice", "POSIX file system (DLIO's local_fs or "
                            "parallel_fs; both read through the POSIX API) or s3 (an object "
                            "store; a data folder s3://bucket/prefix implies it)",
                            choices=("local_fs", "parallel_fs", "s3"))
    storage_root: str = key("", "path", "prefix of relative data folders (DLIO's key; with "
                            "storage_type s3: the bucket)")
    drop_cache: bool = key(False, "bool", "evict the dataset from the page cache before every "
                           "epoch (fsync + POSIX_FADV_DONTNEED, once per node)")
    stage_to: str = key("", "path", "copy the dataset to this node-local folder before training "
                        "and train from the copy (\"\": read the data folder directly)")
    stage_scope: str = key("node", "choice", "what to stage: each rank's files (shard), what "
                           "the node's ranks read (node), or everything (all)",
                           choices=("shard", "node", "all"))
    keep_staged: bool = key(False, "bool", "keep the staged copy after the run")
    lustre_stripe_count: int = key(0, "int", "Lustre: `lfs setstripe -c` on the data and "
                                   "checkpoint folders before writing (0: leave as is)",
                                   aliases=("storage.lustre.stripe_count",), minimum=-1)
    lustre_stripe_size: int = key(0, "size", "Lustre: `lfs setstripe -S` (0: leave as is)",
                                  aliases=("storage.lustre.stripe_size",), minimum=0)
    s3_endpoint_url: str = key("", "str", "S3: endpoint URL (\"\": the AWS chain's, e.g. "
                               "AWS_ENDPOINT_URL, else AWS itself)",
                               aliases=("storage.s3.endpoint_url",
                                        "storage.storage_options.endpoint_url"))
    s3_region: str = key("", "str", "S3: region (\"\": the AWS chain's, e.g. AWS_REGION)",
                         aliases=("storage.s3.region", "storage.storage_options.region"))
    s3_addressing_style: str = key(
        "auto", "choice", "S3: bucket in the host name (virtual) or in the path (path: MinIO, "
        "Ceph and most servers on an IP address)", choices=("auto", "path", "virtual"),
        aliases=("storage.s3.addressing_style", "storage.storage_options.s3_force_path_style"),
        words=((True, "path"), (False, "auto")))
    s3_access_key_id: str = key("", "str", "S3: access key id (\"\": the AWS chain: "
                                "environment, profile, instance role; preferred over keys in "
                                "files)", aliases=("storage.s3.access_key_id",
                                                    "storage.storage_options.access_key_id"),
                                secret=True)
    s3_secret_access_key: str = key("", "str", "S3: secret access key (never written to "
                                    "results, logs or messages)",
                                    aliases=("storage.s3.secret_access_key",
                                             "storage.storage_options.secret_access_key"),
                                    secret=True)
    s3_part_size: int = key(16 << 20, "size", "S3: objects larger than this are uploaded in "
                            "parts of this size (multipart)", aliases=("storage.s3.part_size",),
                            minimum=5 << 20, maximum=5 << 30)
    s3_checksums: bool = key(True, "bool", "S3: send each object's CRC-32C with its upload and "
                             "check the stored one (false: size and MD5 ETag only, for "
                             "servers without checksums)", aliases=("storage.s3.checksums",))
    s3_max_attempts: int = key(5, "int", "S3: attempts per request before an error",
                               aliases=("storage.s3.max_attempts",
                                        "storage.storage_options.s3_max_attempts"), minimum=1)
    s3_read_client: str = key("obstore", "choice", "S3: the client of reads (obstore: Rust, "
                              "fastest measured; boto3: the client writes use)",
                              choices=("obstore", "boto3"), aliases=("storage.s3.read_client",))


@dataclass(frozen=True)
class ModelConfig:
    """The model being emulated."""

    name: str = key("", "str", "workload name (default: the workload file's name)")
    model_size_bytes: int = key(
        0, "size", "model size in bytes", aliases=("checkpoint.model_size",), minimum=0
    )
    type: str = key("", "str", "model kind; 'transformer' sizes checkpoints from the keys "
                    "below (DLIO main's model.type)")
    num_layers: int = key(0, "int", "transformer layers (0: not a transformer layout)",
                          minimum=0)
    model_datatype: str = key("fp16", "choice", "datatype of the model's weights",
                              choices=DATATYPES)
    optimizer_datatype: str = key("fp32", "choice", "datatype of the optimizer state",
                                  choices=DATATYPES)
    vocab_size: int = key(0, "int", "vocabulary size", minimum=0,
                          aliases=("model.transformer.vocab_size",))
    hidden_size: int = key(0, "int", "hidden dimension", minimum=0,
                           aliases=("model.transformer.hidden_size",))
    ffn_hidden_size: int = key(0, "int", "feed-forward (MLP) dimension", minimum=0,
                               aliases=("model.transformer.ffn_hidden_size",))
    num_attention_heads: int = key(1, "int", "attention heads", minimum=1,
                                   aliases=("model.transformer.num_attention_heads",))
    num_kv_heads: int = key(1, "int", "key/value heads (grouped-query attention)", minimum=1,
                            aliases=("model.transformer.num_kv_heads",))
    tensor_parallelism: int = key(1, "int", "tensor-parallel degree (TP)", minimum=1,
                                  aliases=("model.parallelism.tensor",))
    pipeline_parallelism: int = key(1, "int", "pipeline-parallel degree (PP)", minimum=1,
                                    aliases=("model.parallelism.pipeline",))
    data_parallelism: int = key(
        -1, "int", "data-parallel degree (DP) of the checkpoint layout (-1: launched ranks / "
        "(TP x PP)); more than that spreads the layout's shards over the launched ranks",
        minimum=-1, aliases=("model.parallelism.data",))
    zero_stage: int = key(0, "int", "ZeRO stage: 0 none, 1-2 optimizer sharded over DP, "
                          "3 weights too", minimum=0, maximum=3,
                          aliases=("model.parallelism.zero_stage",))


@dataclass(frozen=True)
class AcceleratorProfile:
    """One accelerator's measured compute time per batch and AU floor (and the batch size
    that time is for, when the accelerator's batch differs from the workload's)."""

    computation_time: float
    au: float
    computation_time_stdev: float = 0.0
    batch_size: int | None = None


@dataclass(frozen=True)
class Config:
    """The fully resolved configuration of one run."""

    dataset: DatasetConfig = DatasetConfig()
    reader: ReaderConfig = ReaderConfig()
    train: TrainConfig = TrainConfig()
    metric: MetricConfig = MetricConfig()
    workflow: WorkflowConfig = WorkflowConfig()
    output: OutputConfig = OutputConfig()
    model: ModelConfig = ModelConfig()
    storage: StorageConfig = StorageConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    accelerators: dict[str, AcceleratorProfile] = field(default_factory=dict)
    source: str = ""
    given: tuple[str, ...] = ()  # keys the command line set: an existing dataset honours them

    @property
    def name(self) -> str:
        """The workload's name, used in run ids and data folders."""
        return self.model.name or "default"

    @property
    def total_samples(self) -> int:
        """Samples in the training dataset."""
        return self.dataset.num_files_train * self.dataset.num_samples_per_file


SECTIONS: dict[str, type] = {
    "dataset": DatasetConfig,
    "reader": ReaderConfig,
    "train": TrainConfig,
    "metric": MetricConfig,
    "workflow": WorkflowConfig,
    "output": OutputConfig,
    "model": ModelConfig,
    "storage": StorageConfig,
    "checkpoint": CheckpointConfig,
}
