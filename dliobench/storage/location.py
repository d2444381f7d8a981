"""Where a data or checkpoint folder is: a POSIX path, or an object-store URL
(``s3://bucket/prefix``). Parsed here only, so every caller agrees on what a URL is."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dliobench.base.errors import ConfigError

S3_SCHEME = "s3://"
# S3's bucket naming rules (3-63 characters, lower case, digits, dots and hyphens)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def is_url(location: str) -> bool:
    """Whether ``location`` names an object store rather than a POSIX path."""
    return location.startswith(S3_SCHEME)


@dataclass(frozen=True)
class BucketPrefix:
    """A bucket and a key prefix inside it ('' or without leading and trailing '/')."""

    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        """``s3://bucket/prefix``."""
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}".rstrip("/")


def parse_s3(location: str, key: str = "dataset.data_folder") -> BucketPrefix:
    """The bucket and prefix of ``s3://bucket[/prefix]``; ConfigError (naming ``key``) for
    anything else."""
    rest = location[len(S3_SCHEME):] if is_url(location) else ""
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.match(bucket):
        raise ConfigError(f"{key}: {location!r} does not name an S3 bucket; write "
                          "s3://BUCKET/PREFIX with a bucket of 3-63 lower-case letters, "
                          "digits, dots and hyphens")
    prefix = re.sub("/+", "/", prefix).strip("/")
    return BucketPrefix(bucket, prefix)
