"""The S3 client: settings from the configuration and the AWS chain, one boto3 client per
process, and S3's failures put in one sentence each (with no secret in it).

boto3 is imported here only, when an ``s3://`` folder is used (the ``s3`` extra). Credentials
given as configuration keys stay in this process and its loader workers: ``S3Settings``
never shows them (``repr``), and every message is passed through ``redact``.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dliobench.base.errors import ConfigError, DatasetError, MissingExtraError
from dliobench.config.keys import REDACTED

if TYPE_CHECKING:
    from dliobench.config.schema import StorageConfig

# Error codes S3 answers when the credentials (not the request) are the problem.
# The two halves of a key pair: the configuration key and the AWS chain's variable of each.
PAIR = (("storage.s3.access_key_id", "AWS_ACCESS_KEY_ID"),
        ("storage.s3.secret_access_key", "AWS_SECRET_ACCESS_KEY"))
CREDENTIAL_CODES = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                              "InvalidToken", "ExpiredToken", "AuthorizationHeaderMalformed",
                              "InvalidSecurity", "403", "Forbidden"})


@dataclass(frozen=True)
class S3Settings:
    """How to reach the object store: endpoint, region, addressing, credentials (empty: the
    AWS chain), multipart part size, checksums, attempts per request, the client of reads."""

    endpoint_url: str = ""
    region: str = ""
    addressing_style: str = "auto"
    access_key_id: str = field(default="", repr=False)
    secret_access_key: str = field(default="", repr=False)
    part_size: int = 16 << 20
    checksums: bool = True
    max_attempts: int = 5
    read_client: str = "obstore"

    @classmethod
    def from_config(cls, storage: StorageConfig | None) -> S3Settings:
        """The settings the ``storage.s3_*`` keys give (defaults without a configuration)."""
        if storage is None:
            return cls()
        return cls(storage.s3_endpoint_url, storage.s3_region, storage.s3_addressing_style,
                   storage.s3_access_key_id, storage.s3_secret_access_key,
                   storage.s3_part_size, storage.s3_checksums, storage.s3_max_attempts,
                   storage.s3_read_client)

    def endpoint(self) -> str:
        """Where requests go: the key, else the AWS chain's variables, else AWS."""
        return (self.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL") or "aws")

    def secrets(self) -> list[str]:
        """The credential values given as keys (to be kept out of every message)."""
        return [s for s in (self.secret_access_key, self.access_key_id) if s]

    def half_pair(self) -> str | None:
        """One sentence when a key pair is given by half (no value in it), else None.

        botocore uses keys given in the configuration only as a pair (it does not complete one
        from the environment) and refuses ``AWS_ACCESS_KEY_ID`` without its secret; both
        would end in a PartialCredentialsError deep in client creation."""
        given = [bool(self.access_key_id), bool(self.secret_access_key)]
        if any(given) and not all(given):
            (have, _), (missing, variable) = PAIR if given[0] else PAIR[::-1]
            env = (f" ({variable} is in the environment, but keys in the configuration are "
                   "used only as a pair)") if os.environ.get(variable) else ""
            return (f"{have} is given in the configuration without {missing}{env}; give "
                    f"{missing} as well, or neither key to use the AWS chain "
                    "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)")
        if not any(given) and os.environ.get(PAIR[0][1]) and not os.environ.get(PAIR[1][1]):
            return ("AWS_ACCESS_KEY_ID is set in the environment without "
                    "AWS_SECRET_ACCESS_KEY; set AWS_SECRET_ACCESS_KEY as well, unset "
                    "AWS_ACCESS_KEY_ID to use AWS_PROFILE, or give storage.s3.access_key_id "
                    "and storage.s3.secret_access_key")
        return None

    def redact(self, text: str) -> str:
        """``text`` with every credential value replaced."""
        for secret in self.secrets():
            text = text.replace(secret, REDACTED)
        return text


_clients: dict[tuple[int, S3Settings, str], Any] = {}
_lock = threading.Lock()


def _after_fork() -> None:
    """A forked loader worker makes its own clients (connections are not shared)."""
    global _lock
    _lock = threading.Lock()
    _clients.clear()


os.register_at_fork(after_in_child=_after_fork)


def client(settings: S3Settings, bucket: str, where: str) -> Any:
    """This process's client for ``bucket`` (thread-safe; made once per process, after a
    HeadBucket that turns a missing bucket, a wrong endpoint or refused credentials into one
    sentence before any other request)."""
    key = (os.getpid(), settings, bucket)
    made = _clients.get(key)
    if made is not None:
        return made
    with _lock:
        made = _clients.get(key)
        if made is None:
            try:
                made = _make(settings)
                made.head_bucket(Bucket=bucket)
            except (ConfigError, MissingExtraError):
                raise
            except Exception as exc:
                raise failure(exc, settings, bucket, where, "open the bucket") from None
            _clients[key] = made
    return made


def _make(settings: S3Settings) -> Any:
    """A boto3 S3 client with these settings (checksums only where we send them); a key pair
    given by half is a ConfigError of one sentence, before any request."""
    half = settings.half_pair()
    if half is not None:
        raise ConfigError(settings.redact(half))
    try:
        import boto3
        from botocore.config import Config as BotoConfig
    except ImportError:
        raise MissingExtraError("boto3", "s3") from None
    config = BotoConfig(
        region_name=settings.region or None,
        s3={"addressing_style": settings.addressing_style},
        retries={"max_attempts": settings.max_attempts, "mode": "standard"},
        max_pool_connections=64, connect_timeout=10, read_timeout=120,
        # we send CRC-32C ourselves (computed while writing); no second pass over the bytes
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = boto3.session.Session()  # sessions are not thread-safe: one per client
    return session.client("s3", endpoint_url=settings.endpoint_url or None,
                          aws_access_key_id=settings.access_key_id or None,
                          aws_secret_access_key=settings.secret_access_key or None,
                          config=config)


def error_code(exc: BaseException) -> str | None:
    """The S3 error code of a botocore ClientError (None for other exceptions)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    return str(response.get("Error", {}).get("Code", "")) or None


def failure(exc: BaseException, settings: S3Settings, bucket: str, where: str,
            doing: str) -> DatasetError:
    """One sentence for a failed S3 request (``doing``: what it was for; ``where``: the URL)."""
    from botocore.exceptions import (
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    endpoint = settings.endpoint()
    endpoint = "AWS" if endpoint == "aws" else endpoint
    code = error_code(exc)
    if isinstance(exc, PartialCredentialsError):  # from a profile or a credentials file
        text = (f"the AWS chain's S3 credentials to {doing} {where} are incomplete ({exc}); "
                "complete that profile or file, or give storage.s3.access_key_id and "
                "storage.s3.secret_access_key")
    elif isinstance(exc, NoCredentialsError):
        half = (" (AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID)"
                if os.environ.get(PAIR[1][1]) and not os.environ.get(PAIR[0][1]) else "")
        text = (f"no S3 credentials to {doing} {where}{half}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or storage.s3.access_key_id and "
                "storage.s3.secret_access_key")
    elif isinstance(exc, EndpointConnectionError) or (code is None and _is_connection(exc)):
        text = (f"cannot reach the S3 endpoint {endpoint} to {doing} {where}; check "
                "storage.s3.endpoint_url (or AWS_ENDPOINT_URL) and that the server is up")
    elif code in ("NoSuchBucket", "404", "NotFound"):
        text = (f"the bucket {bucket!r} does not exist at {endpoint}; create it (e.g. `aws "
                f"s3 mb s3://{bucket}`) or correct dataset.data_folder")
    elif code in CREDENTIAL_CODES:
        text = (f"{endpoint} refused the credentials to {doing} {where} ({code}); check "
                "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_PROFILE, or "
                "storage.s3.access_key_id and storage.s3.secret_access_key")
    else:
        reason = code or type(exc).__name__
        message = getattr(exc, "response", {}).get("Error", {}).get("Message") if code \
            else str(exc)
        text = f"S3 could not {doing} {where}: {reason}" + (f" ({message})" if message else "")
    return DatasetError(settings.redact(text))


def _is_connection(exc: BaseException) -> bool:
    """A botocore error of the connection (refused, reset, timed out) rather than of S3."""
    try:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import ReadTimeoutError
    except ImportError:
        return False
    return isinstance(exc, (BotoConnectionError, ReadTimeoutError, ConnectionError))
