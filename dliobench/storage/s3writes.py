"""The S3 writer: one object as a single PUT, or a multipart upload once it outgrows
``part_size``, each part sent as soon as it is complete (nothing large sits whole in
memory). Every request carries its CRC-32C, which the server checks the body against, and
the answer is checked at commit: the stored CRC-32C (or, without checksums, the MD5 ETag) of
a single PUT; the size and the parts' CRC-32C of a multipart object, looked up after it
completes. An aborted upload leaves nothing.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import crc32c

from dliobench.base.errors import DatasetError
from dliobench.storage.s3target import S3Target


def _b64(crc: int) -> str:
    """A CRC-32C as S3 writes it: the big-endian 4 bytes in base64."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode()



def _same_checksum(stored: str | None, sent: str) -> bool:
    """Whether a stored checksum is the one sent (None: the server keeps none). A multipart
    object's carries its part count, which some servers leave out of a HEAD."""
    if stored is None:
        return True
    base, _, parts = sent.partition("-")
    return stored in (sent, base) if parts else stored == sent


class S3Writer:
    """One object being written: a single PUT, or a multipart upload once it outgrows a
    part; CRC-32C sent with every request and checked against the stored object at commit."""

    def __init__(self, backend: S3Target, key: str) -> None:
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
