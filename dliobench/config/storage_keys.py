"""The ``storage`` section: the storage under the dataset (posix or S3, and the S3 client's
settings) and how runs keep the page cache out of the numbers."""

from __future__ import annotations

from dataclasses import dataclass

from dliobench.config.keys import key


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
    lock_wait_s: float = key(3600.0, "float", "seconds a dliobench waits for the lock of a "
                             "data folder another one holds (a generation writing it, or runs "
                             "reading it while this one must write) before it stops, naming "
                             "the holder (0: no limit)", minimum=0, maximum=7 * 86400)
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
