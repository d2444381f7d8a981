"""Where an S3 backend's objects are and how one request on one of them is made.

``S3Target`` is a prefix in a bucket reached with some settings: it names objects, gives
this process's client, and makes one request (``call``) whose failure is one sentence, a
FileNotFoundError for a missing object, or ``Refused`` for a code its caller expects. The
backend (``storage.s3``), its reads (``storage.s3reads``) and its writer
(``storage.s3writes``) all go through it.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import dliobench.storage.s3client as s3client
from dliobench.storage.location import BucketPrefix
from dliobench.storage.s3client import S3Settings

T = TypeVar("T")
MISSING = frozenset({"NoSuchKey", "404", "NotFound"})
EMPTY_RANGE = "InvalidRange"  # a range starting at or past the end of the object


@dataclass(frozen=True)
class S3Target:
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
            if code is None and not botocore_error(exc):
                raise
            raise s3client.failure(exc, self.settings, self.bucket, self.describe(key),
                                   doing) from None

    def head(self, key: str) -> dict[str, Any] | None:
        """The object's HEAD (with its checksum), or None when there is no such object."""
        client = self.client()
        try:
            return self.call("look up", key, client.head_object, ChecksumMode="ENABLED")
        except FileNotFoundError:
            return None

    def delete(self, key: str) -> None:
        """One DELETE (deleting a missing object is no error in S3)."""
        client = self.client()
        with contextlib.suppress(FileNotFoundError):
            self.call("delete", key, client.delete_object)


class Refused(Exception):
    """A request refused with an error code its caller expects (``S3Target.call``)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def botocore_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from botocore (connection, credentials, parameters)."""
    return type(exc).__module__.startswith(("botocore", "urllib3"))
