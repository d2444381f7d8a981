"""The S3 backend: a prefix in a bucket of any S3-compatible object store.

Keys are object names under the prefix. Reads are ranged GETs received straight into a
buffer, counted as the bytes received (``storage.s3reads``); nothing is ever listed but by
``list`` (the manifest names the objects). Writes go through ``storage.s3writes.S3Writer``
(a single PUT or a multipart upload, CRC-32C sent and checked). An object appears complete
or not at all: S3 makes a PUT or a completed upload visible at once, and an aborted upload
leaves nothing. Requests and their failures: ``storage.s3target``.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dliobench.storage.latency as latency
import dliobench.storage.s3client as s3client
import dliobench.storage.s3reads as s3reads
from dliobench.storage.backend import ObjectStat
from dliobench.storage.posix_io import SpanFile
from dliobench.storage.s3target import Refused, S3Target, botocore_error
from dliobench.storage.s3writes import S3Writer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class S3Backend(S3Target):
    """The ``Backend`` over a prefix in a bucket (``S3Target``: where, settings, requests)."""

    def read_range(self, key: str, offset: int, length: int,
                   direct: bool = False) -> tuple[memoryview, int]:
        """A ranged GET; the bytes received are counted. A run's data reads (``timed``) go
        through ``storage.s3.read_client`` and their latency is recorded; every other read
        (lock, manifest, checkpoints) through boto3, so a process that forks loader workers
        later has not started obstore's runtime, which a forked child cannot use."""
        if length <= 0:
            return memoryview(b""), 0
        if self.timed and self.settings.read_client == "obstore" and s3reads.usable():
            data, first, total = s3reads.get_obstore(self, key, offset, length)
        else:
            data, first, total = s3reads.get_boto3(self, key, offset, length)
        if self.timed:
            latency.record(first, total)
        return data, len(data)

    def open_read(self, key: str, direct: bool = False, sequential: bool = False) -> S3File:
        """A seekable file object over the object (ranged GETs, a read-ahead span kept;
        a caller reading start to end asks for large ranges by itself)."""
        stat = self.stat(key)
        if stat is None:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(key))
        return S3File(self, key, stat.size)

    def stat(self, key: str) -> ObjectStat | None:
        """Size and (ETag, modification time) of ``key``, or None."""
        head = self.head(key)
        if head is None:
            return None
        etag = str(head.get("ETag", "")).strip('"')
        tag = int(hashlib.blake2b(etag.encode(), digest_size=8).hexdigest(), 16)
        modified = head.get("LastModified")
        stamp = int(modified.timestamp() * 1e9) if modified is not None else 0
        return ObjectStat(int(head["ContentLength"]), (tag, stamp))

    def size(self, key: str) -> int | None:
        """See ``Backend.size``."""
        st = self.stat(key)
        return None if st is None else st.size

    def open_write(self, key: str, direct: bool = False, atomic: bool = True) -> S3Writer:
        """A streaming writer (``direct`` does not apply to an object store; its objects
        appear whole at commit, ``atomic`` or not)."""
        return S3Writer(self, key)

    def write_new(self, key: str, data: memoryview | bytes) -> None:
        """See ``Backend.write_new``: one PUT."""
        self.put(key, bytes(data))

    def put(self, key: str, data: bytes, replace: bool = True) -> bool:
        """One PUT; with ``replace=False`` a conditional one (If-None-Match: *)."""
        client = self.client()
        extra: dict[str, Any] = {} if replace else {"IfNoneMatch": "*"}
        try:
            self.call("write", key, client.put_object,  # S3 answers 409 to one of two at once
                      expect=("PreconditionFailed", "ConditionalRequestConflict"),
                      Body=data, **extra)
        except Refused:  # another writer's object is there: it wins
            return False
        return True

    def append(self, key: str, data: bytes) -> None:
        """Objects cannot grow: the object is read and written again with ``data`` after it
        (journals are small; one rank appends to each)."""
        size = self.size(key)
        old = self.read_range(key, 0, size)[0] if size else memoryview(b"")
        self.call("write", key, self.client().put_object, Body=bytes(old) + data)

    def reserve(self, key: str, nbytes: int) -> None:
        """Nothing to set aside: an object store does not fill up like a disk."""

    def sync(self) -> None:
        """Nothing: an object is durable when its PUT returns."""

    def evict(self, keys: list[str], flush: bool = True) -> None:
        """Nothing: this client keeps no cache (a server may, which results say)."""

    def make_room(self, prefix: str) -> None:
        """Nothing: an object store has no folders."""

    def local_path(self, key: str) -> Path | None:
        """None: objects have no local path."""
        return None

    def facts(self) -> dict[str, Any]:
        """Object store, endpoint, region and addressing (no credentials)."""
        s = self.settings
        return {"data_folder": self.describe(), "fs_type": "s3", "bucket": self.bucket,
                "prefix": self.where.prefix,
                "endpoint": s.endpoint(),
                "region": s.region or os.environ.get("AWS_REGION") or None,
                "addressing_style": s.addressing_style, "part_size": s.part_size,
                "checksums": s.checksums, "read_client": s.read_client}

    def free_bytes(self) -> int | None:
        """None: object stores do not say."""
        return None

    def block_bytes(self) -> int:
        """1: objects take their size."""
        return 1

    def drop_leftovers(self, prefix: str = "") -> int:
        """Abort the multipart uploads under ``prefix`` that were begun and never completed
        or aborted (a writer killed part way): their parts stay invisible, and stored (and
        billed), until aborted. The number aborted; a server that cannot list uploads is
        left as it is (a warning says so)."""
        client = self.client()
        base = self.name(prefix)
        aborted = 0
        try:
            for page in client.get_paginator("list_multipart_uploads").paginate(
                    Bucket=self.bucket, Prefix=f"{base}/" if base else ""):
                for upload in page.get("Uploads", []):
                    client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"],
                                                  UploadId=upload["UploadId"])
                    aborted += 1
        except Exception as exc:
            if s3client.error_code(exc) is None and not botocore_error(exc):
                raise
            log.warning("%s", s3client.failure(exc, self.settings, self.bucket,
                                               self.describe(prefix),
                                               "abort the unfinished uploads under"))
        return aborted

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under ``prefix`` by ListObjectsV2 (for indexing an existing dataset, and the
        lock's readers' objects: never a dataset of its own)."""
        client = self.client()
        base = self.name(prefix)
        base = f"{base}/" if base else ""
        strip = len(self.name("")) + 1 if self.where.prefix else 0
        try:
            for page in client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=base):
                for item in page.get("Contents", []):
                    yield str(item["Key"])[strip:]
        except Exception as exc:
            raise s3client.failure(exc, self.settings, self.bucket, self.describe(prefix),
                                   "list") from None


class S3File(SpanFile):
    """A read-only, seekable file object over an object: each read is a ranged GET of at
    least the ``SPAN`` around it, kept, so a library's many small reads (h5py's metadata,
    parquet's footer) cost one request; ``nbytes`` counts what was received."""

    SPAN = 64 << 10  # as DirectFile keeps: metadata reads in one request, little read twice

    def __init__(self, backend: S3Backend, key: str, size: int) -> None:
        super().__init__(size)
        self._backend = backend
        self._key = key

    def _fetch(self, pos: int, want: int) -> tuple[int, memoryview, int, bool]:
        """One GET of the ``SPAN``-aligned bytes around the ones asked for (an object
        smaller than a span in one request, whichever end a library reads first)."""
        start = pos - pos % self.SPAN
        span, got = self._backend.read_range(self._key, start,
                                             max(pos + want - start, self.SPAN))
        return start, span, got, True
