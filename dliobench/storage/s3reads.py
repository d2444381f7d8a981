"""Ranged GETs, timed to the first byte and to the last, through the read client
``storage.s3.read_client`` names: obstore (Rust; the GIL is released while a request waits
and receives, and the body lands in one buffer that is handed over without a copy) or boto3.

obstore took 3x (1 MiB objects) to 7x (64 KiB) less client CPU per GB than boto3 from the
same threads on the same server and objects, and as little as boto3 at 16 MiB
(``benchmarks/s3/s3_clients.py``, RESULTS.md); writes stay with boto3 (checksums, multipart,
conditional PUTs). One obstore store per process and bucket, made after the boto3 client's
HeadBucket has turned a missing bucket, a wrong endpoint or refused credentials into one
sentence. Only a run's data reads use it (``S3Backend.read_range``): obstore's runtime hangs
in a process forked after it ran, so a forked worker of such a process reads with boto3.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from dliobench.base.errors import DatasetError, MissingExtraError
from dliobench.storage.s3target import EMPTY_RANGE, Refused, S3Target, botocore_error

if TYPE_CHECKING:
    from dliobench.storage.s3client import S3Settings


_stores: dict[tuple[int, S3Settings, str], Any] = {}
_lock = threading.Lock()
_inherited = False  # this process was forked after obstore ran in it or an ancestor


def _after_fork() -> None:
    """A forked loader worker makes its own store (connections are not shared); if its
    parent had used obstore, it cannot: obstore's runtime hangs in a forked child."""
    global _lock, _inherited
    _lock = threading.Lock()
    _inherited = _inherited or bool(_stores)
    _stores.clear()


def usable() -> bool:
    """Whether obstore can serve this process (not forked from one that used it)."""
    return not _inherited


os.register_at_fork(after_in_child=_after_fork)


def _store(settings: S3Settings, bucket: str) -> Any:
    """This process's obstore store of ``bucket``."""
    key = (os.getpid(), settings, bucket)
    made = _stores.get(key)
    if made is None:
        with _lock:
            made = _stores.get(key)
            if made is None:
                made = _stores[key] = _make(settings, bucket)
    return made


def _make(settings: S3Settings, bucket: str) -> Any:
    """An obstore S3Store with these settings; credentials from the keys, else boto3's chain
    (environment, profile, instance role), as the boto3 client has them."""
    try:
        import boto3
        from obstore.store import S3Store
    except ImportError:
        raise MissingExtraError("obstore", "s3") from None
    endpoint = settings.endpoint()
    session = boto3.session.Session()
    region = settings.region or session.region_name or "us-east-1"
    options: dict[str, Any] = {"region": region, "virtual_hosted_style_request":
                               settings.addressing_style == "virtual"
                               or (settings.addressing_style == "auto" and endpoint == "aws")}
    if endpoint != "aws":
        options["endpoint"] = endpoint
    if settings.access_key_id:
        options.update(access_key_id=settings.access_key_id,
                       secret_access_key=settings.secret_access_key)
    else:
        from obstore.auth.boto3 import Boto3CredentialProvider

        options["credential_provider"] = Boto3CredentialProvider(session)
    return S3Store(bucket, client_options={"allow_http": endpoint.startswith("http://"),
                                           "connect_timeout": "10s", "timeout": "120s"},
                   retry_config={"max_retries": settings.max_attempts - 1}, **options)


def get_obstore(backend: S3Target, key: str, offset: int,
                length: int) -> tuple[memoryview, float, float]:
    """Bytes ``offset`` .. ``offset + length`` of ``key`` (fewer at the end, none past it),
    seconds to the first byte and to the last."""
    import obstore
    from obstore.exceptions import NotFoundError, PermissionDeniedError, UnauthenticatedError

    backend.client()  # the bucket checked once per process, failures in one sentence
    store = _store(backend.settings, backend.bucket)
    start = time.perf_counter()
    try:
        answer = obstore.get(store, backend.name(key),
                             options={"range": (offset, offset + length)})
        first = time.perf_counter() - start
        data = answer.bytes()
    except (NotFoundError, FileNotFoundError):  # obstore raises the latter
        raise FileNotFoundError(errno.ENOENT, "no such object", backend.describe(key)) from None
    except (PermissionDeniedError, UnauthenticatedError) as exc:
        raise DatasetError(backend.settings.redact(
            f"{backend.settings.endpoint()} refused the credentials to read "
            f"{backend.describe(key)} ({_first_line(exc)}); check AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY and AWS_PROFILE, or storage.s3.access_key_id and "
            "storage.s3.secret_access_key")) from None
    except Exception as exc:
        if _past_the_end(exc):
            return memoryview(b""), time.perf_counter() - start, time.perf_counter() - start
        raise OSError(errno.EIO, backend.settings.redact(
            f"the GET failed ({_first_line(exc)})"), backend.describe(key)) from None
    return memoryview(data), first, time.perf_counter() - start


def get_boto3(backend: S3Target, key: str, offset: int,
              length: int) -> tuple[memoryview, float, float]:
    """A ranged GET by boto3 received into a new buffer; seconds to the first byte (the
    answer's head) and to the last."""
    client = backend.client()
    start = time.perf_counter()
    try:
        response = backend.call("read", key, client.get_object, expect=(EMPTY_RANGE,),
                           Range=f"bytes={offset}-{offset + length - 1}")
    except Refused:  # at or past the end: nothing to read
        return memoryview(b""), time.perf_counter() - start, time.perf_counter() - start
    first = time.perf_counter() - start
    size = int(response.get("ContentLength", 0))
    buffer = bytearray(min(size, length))
    try:
        got = _receive(response["Body"], memoryview(buffer))
    except Exception as exc:  # the connection failed after the answer began
        if not botocore_error(exc):
            raise
        raise OSError(errno.EIO, f"the connection failed while receiving ({exc})",
                      backend.describe(key)) from None
    if got < len(buffer):
        raise OSError(errno.EIO, f"the connection ended after {got} of {len(buffer)} "
                                 "bytes", backend.describe(key))
    return memoryview(buffer), first, time.perf_counter() - start


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


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _past_the_end(exc: BaseException) -> bool:
    """A range starting at or past the end of the object (416 / InvalidRange)."""
    text = str(exc)
    return "InvalidRange" in text or "416 Range Not Satisfiable" in text
