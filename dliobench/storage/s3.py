"""The S3 backend: a prefix in a bucket of any S3-compatible object store.

Keys are object names under the prefix. Reads are ranged GETs received straight into a
buffer, counted as the bytes received; nothing is ever listed but by ``list`` (the manifest
names the objects). A writer sends a single PUT, or a multipart upload once an object
outgrows ``part_size``, each part as soon as it is complete (nothing large sits whole in
memory); every upload carries its CRC-32C, which the server checks the body against, and
the answer is checked: the stored CRC-32C (or, without checksums, the MD5 ETag) of a single
PUT; the size and the parts' CRC-32C of a multipart object, looked up after it completes.
An object appears complete or not at all: S3 makes a PUT or a completed upload visible at
once, and an aborted upload leaves nothing.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import crc32c

from dliobench.errors import DatasetError
from dliobench.storage import latency, s3client, s3reads
from dliobench.storage.backend import ObjectStat
from dliobench.storage.location import BucketPrefix
from dliobench.storage.posix_io import SpanFile
from dliobench.storage.s3client import S3Settings

T = TypeVar("T")
log = logging.getLogger(__name__)
MISSING = frozenset({"NoSuchKey", "404", "NotFound"})
EMPTY_RANGE = "InvalidRange"  # a range starting at or past the end of the object


def _b64(crc: int) -> str:
    """A CRC-32C as S3 writes it: the big-endian 4 bytes in base64."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


@dataclass(frozen=True)
class S3Backend:
    """A prefix in a bucket (``where``), reached with ``settings``. Picklable: a loader
    worker makes its own client."""

    where: BucketPrefix
    settings: S3Settings
    timed: bool = False  # record each read's latency (``storage.latency``): a run's data reads

    @property
    def bucket(self) -> str:
        return self.where.bucket

    def name(self, key: str) -> str:
        """The object name of ``key``."""
        prefix = self.where.prefix
        return f"{prefix}/{key}" if prefix and key else (key or prefix)

    def describe(self, key: str = "") -> str:
        """``s3://bucket/prefix/key``."""
        return BucketPrefix(self.bucket, self.name(key)).url

    def client(self) -> Any:
        """This process's client."""
        return s3client.client(self.settings, self.bucket, self.describe())

    def call(self, doing: str, key: str, request: Callable[..., T],
             expect: tuple[str, ...] = (), **kwargs: Any) -> T:
        """One request on ``key``: a missing object is FileNotFoundError, an error code in
        ``expect`` is ``Refused``, any other failure a DatasetError of one sentence."""
        try:
            return request(Bucket=self.bucket, Key=self.name(key), **kwargs)
        except Exception as exc:
            code = s3client.error_code(exc)
            if code in expect:
                raise Refused(code) from None
            if code in MISSING:
                raise FileNotFoundError(errno.ENOENT, "no such object",
                                        self.describe(key)) from None
            if code is None and not _botocore_error(exc):
                raise
            raise s3client.failure(exc, self.settings, self.bucket, self.describe(key),
                                   doing) from None

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
            data, first, total = self._get_boto3(key, offset, length)
        if self.timed:
            latency.record(first, total)
        return data, len(data)

    def _get_boto3(self, key: str, offset: int, length: int) -> tuple[memoryview, float, float]:
        """A ranged GET by boto3 received into a new buffer; seconds to the first byte (the
        answer's head) and to the last."""
        client = self.client()
        start = time.perf_counter()
        try:
            response = self.call("read", key, client.get_object, expect=(EMPTY_RANGE,),
                                 Range=f"bytes={offset}-{offset + length - 1}")
        except Refused:  # at or past the end: nothing to read
            return memoryview(b""), time.perf_counter() - start, time.perf_counter() - start
        first = time.perf_counter() - start
        size = int(response.get("ContentLength", 0))
        buffer = bytearray(min(size, length))
        try:
            got = _receive(response["Body"], memoryview(buffer))
        except Exception as exc:  # the connection failed after the answer began
            if not _botocore_error(exc):
                raise
            raise OSError(errno.EIO, f"the connection failed while receiving ({exc})",
                          self.describe(key)) from None
        if got < len(buffer):
            raise OSError(errno.EIO, f"the connection ended after {got} of {len(buffer)} "
                                     "bytes", self.describe(key))
        return memoryview(buffer), first, time.perf_counter() - start

    def open_read(self, key: str, direct: bool = False, sequential: bool = False) -> S3File:
        """A seekable file object over the object (ranged GETs, a read-ahead span kept;
        a caller reading start to end asks for large ranges by itself)."""
        stat = self.stat(key)
        if stat is None:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(key))
        return S3File(self, key, stat.size)

    def head(self, key: str) -> dict[str, Any] | None:
        """The object's HEAD (with its checksum), or None when there is no such object."""
        client = self.client()
        try:
            return self.call("look up", key, client.head_object, ChecksumMode="ENABLED")
        except FileNotFoundError:
            return None

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

    def delete(self, key: str) -> None:
        """One DELETE (deleting a missing object is no error in S3)."""
        client = self.client()
        with contextlib.suppress(FileNotFoundError):
            self.call("delete", key, client.delete_object)

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
            if s3client.error_code(exc) is None and not _botocore_error(exc):
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


def _same_checksum(stored: str | None, sent: str) -> bool:
    """Whether a stored checksum is the one sent (None: the server keeps none). A multipart
    object's carries its part count, which some servers leave out of a HEAD."""
    if stored is None:
        return True
    base, _, parts = sent.partition("-")
    return stored in (sent, base) if parts else stored == sent


class Refused(Exception):
    """A request refused with an error code its caller expects (``S3Backend.call``)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _botocore_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from botocore (connection, credentials, parameters)."""
    return type(exc).__module__.startswith(("botocore", "urllib3"))


def _receive(body: Any, out: memoryview) -> int:
    """Read a response body into ``out`` (no intermediate copies); the bytes received."""
    raw = getattr(body, "_raw_stream", None)
    done = 0
    try:
        while done < len(out):
            n = raw.readinto(out[done:]) if raw is not None else _read_into(body, out[done:])
            if not n:
                break
            done += n
    finally:
        body.close()
    return done


def _read_into(body: Any, out: memoryview) -> int:
    chunk = body.read(len(out))
    out[:len(chunk)] = chunk
    return len(chunk)


class S3Writer:
    """One object being written: a single PUT, or a multipart upload once it outgrows a
    part; CRC-32C sent with every request and checked against the stored object at commit."""

    def __init__(self, backend: S3Backend, key: str) -> None:
        self.key = key
        self._backend = backend
        self._part = backend.settings.part_size
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._size = 0
        self._crc = 0
        self._spool: Path | None = None

    def write(self, data: memoryview | bytes) -> None:
        """Append ``data``: a part is sent once more bytes follow it (the last part, or a
        single PUT, is sent at commit)."""
        view = memoryview(data).cast("B")
        self._size += len(view)
        self._crc = crc32c.crc32c(view, self._crc)
        while len(self._buffer) + len(view) > self._part:
            if not self._buffer:  # a whole part of the caller's memory: sent from there
                self._send_part(view[:self._part])
                view = view[self._part:]
                continue
            take = self._part - len(self._buffer)
            self._buffer += view[:take]
            view = view[take:]
            self._send_part(self._buffer)
            self._buffer = bytearray()
        self._buffer += view

    def _send_part(self, part: memoryview | bytearray) -> None:
        """Upload one part (the multipart upload begins with the first); a view of the
        caller's memory is copied, our own buffer is sent as it is."""
        b = self._backend
        client = b.client()
        checks = b.settings.checksums
        if self._upload_id is None:
            first: dict[str, Any] = {"ChecksumAlgorithm": "CRC32C"} if checks else {}
            made = b.call("write", self.key, client.create_multipart_upload, **first)
            self._upload_id = str(made["UploadId"])
        number = len(self._parts) + 1
        crc = crc32c.crc32c(part)
        extra: dict[str, Any] = {"ChecksumCRC32C": _b64(crc)} if checks else {}
        sent = b.call("write", self.key, client.upload_part, UploadId=self._upload_id,
                      PartNumber=number,
                      Body=part if isinstance(part, bytearray) else bytes(part), **extra)
        entry = {"PartNumber": number, "ETag": sent["ETag"], **extra}
        self._parts.append(entry)

    def spool_path(self) -> Path:
        """A local temporary file; ``commit`` uploads it."""
        if self._spool is None:
            fd, name = tempfile.mkstemp(prefix="dliobench-s3-", suffix=".spool")
            os.close(fd)
            self._spool = Path(name)
        return self._spool

    def commit(self, durable: bool = False) -> None:
        """Send what is left (a single PUT or the last part and the completion), then check
        the stored object; a mismatch removes it and raises OSError (EIO)."""
        try:
            if self._spool is not None:
                self._upload_spool()
            b = self._backend
            client = b.client()
            checks = b.settings.checksums
            if self._upload_id is None:  # the PUT's answer says what the server stored
                extra: dict[str, Any] = {"ChecksumCRC32C": _b64(self._crc)} if checks else {}
                answer = b.call("write", self.key, client.put_object, Body=self._buffer,
                                **extra)
                self._check(answer, _b64(self._crc) if checks else None)
            else:  # the completed object is looked at: the size of every part counts
                if self._buffer:
                    self._send_part(self._buffer)
                b.call("write", self.key, client.complete_multipart_upload,
                       UploadId=self._upload_id, MultipartUpload={"Parts": self._parts})
                self._check(b.head(self.key), self._composite() if checks else None)
        except BaseException:
            self.abort()
            raise
        finally:
            self._drop_spool()
        self._buffer = bytearray()

    def _upload_spool(self) -> None:
        assert self._spool is not None
        with open(self._spool, "rb") as handle:
            while chunk := handle.read(self._part):
                self.write(chunk)

    def _composite(self) -> str:
        """The CRC-32C S3 stores for a multipart upload: of the parts' CRCs, and the count."""
        joined = b"".join(base64.b64decode(p["ChecksumCRC32C"]) for p in self._parts)
        return f"{_b64(crc32c.crc32c(joined))}-{len(self._parts)}"

    def _check(self, head: dict[str, Any] | None, want_crc: str | None) -> None:
        """The stored object is what was sent, as ``head`` (a PUT's answer, or a HEAD after
        a multipart upload) says: its size, its CRC-32C (or the MD5 ETag of a single PUT)."""
        b = self._backend
        problem = None
        if head is None:
            problem = "the object is not there after its upload"
        elif "ContentLength" in head and int(head["ContentLength"]) != self._size:
            problem = f"the stored object has {head['ContentLength']} bytes, {self._size} sent"
        elif want_crc is not None and not _same_checksum(head.get("ChecksumCRC32C"), want_crc):
            problem = (f"the stored CRC-32C is {head['ChecksumCRC32C']}, {want_crc} was sent")
        elif want_crc is None and self._upload_id is None:
            etag = str(head.get("ETag", "")).strip('"')
            md5 = hashlib.md5(self._buffer, usedforsecurity=False).hexdigest()
            if len(etag) == 32 and etag != md5:
                problem = f"the stored object's ETag is {etag}, the MD5 sent {md5}"
        if problem is not None:
            with contextlib.suppress(OSError, DatasetError):
                b.delete(self.key)
            raise OSError(errno.EIO, problem, b.describe(self.key))

    def abort(self) -> None:
        """Abort a multipart upload; nothing of the object becomes visible."""
        upload, self._upload_id = self._upload_id, None
        if upload is not None:
            b = self._backend
            with contextlib.suppress(OSError, DatasetError):
                b.call("abort the upload of", self.key, b.client().abort_multipart_upload,
                       UploadId=upload)
        self._buffer = bytearray()
        self._parts = []
        self._drop_spool()

    def _drop_spool(self) -> None:
        spool, self._spool = self._spool, None
        if spool is not None:
            spool.unlink(missing_ok=True)


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
