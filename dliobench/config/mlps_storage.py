"""mlpstorage's storage selection translated onto our ``storage.*`` keys.

Two ways upstream names the storage under a run, both taken here:

- ``--object`` (or the positional ``object``) with upstream's environment variables, from
  mlcommons/storage ``docs/OBJECT_STORAGE_GUIDE.md``@224fbfbc ("Environment Variables",
  "Multi-Protocol With s3dlio"): ``BUCKET`` is ``storage.storage_root``; ``STORAGE_URI_SCHEME``
  ``s3`` (default) is our S3 backend, ``file``/``direct`` a POSIX folder named by ``BUCKET``;
  ``STORAGE_LIBRARY`` (s3dlio, minio, s3torchconnector) picks upstream's client library, ours
  reads through one; path-style addressing when ``AWS_ENDPOINT_URL`` is set, as upstream
  enables it. Endpoint, region and keys stay in ``AWS_*`` variables, which our S3 client
  reads itself. Variables may also come from ``./.env``, as upstream reads it.
- ``--params storage.storage_type=s3dlio|minio|s3torchconnector storage.storage_root=URI``
  (``docs/QUICK_START.md``@dfe7b1f): an ``s3://BUCKET/PREFIX`` root is our S3 backend on
  BUCKET with the data folder PREFIX, a ``file://`` or ``direct://`` root a POSIX folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dliobench.base.errors import ConfigError

LIBRARIES = ("s3dlio", "minio", "s3torchconnector")
POSIX_SCHEMES = ("file", "direct")
OBJECT_VARS = ("BUCKET", "STORAGE_LIBRARY", "STORAGE_URI_SCHEME", "AWS_ENDPOINT_URL")


def dotenv(path: Path = Path(".env")) -> dict[str, str]:
    """``KEY=VALUE`` lines of a ``.env`` file (comments, blanks and ``export`` allowed)."""
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip().removeprefix("export ").strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip("'\"")
    return out


def object_overrides(env: Mapping[str, str] | None = None) -> list[str]:
    """Our overrides for ``--object``, from upstream's variables (the environment over
    ``./.env``); a missing ``BUCKET`` or a scheme we do not read is one sentence."""
    env = {**dotenv(), **(os.environ if env is None else env)}
    bucket = env.get("BUCKET", "").strip()
    if not bucket or bucket.startswith("s3://"):
        raise ConfigError("--object needs the BUCKET environment variable (the bucket's name, "
                          "not s3://...), as mlpstorage does: export BUCKET=mlperf-storage-bench "
                          "or put it in ./.env")
    library = env.get("STORAGE_LIBRARY", "s3dlio")
    if library not in LIBRARIES:
        raise ConfigError(f"STORAGE_LIBRARY={library} is not one of mlpstorage's libraries "
                          f"({', '.join(LIBRARIES)}); dliobench reads S3 through its own "
                          "client whichever is named")
    scheme = env.get("STORAGE_URI_SCHEME", "s3")
    if scheme in POSIX_SCHEMES:
        return ["storage.storage_type=local_fs", f"storage.storage_root={bucket}"]
    if scheme != "s3":
        raise ConfigError(f"STORAGE_URI_SCHEME={scheme}: dliobench reads S3 and POSIX "
                          "folders (s3, file, direct), not Azure or GCS; use an S3 gateway")
    out = ["storage.storage_type=s3", f"storage.storage_root={bucket}"]
    if env.get("AWS_ENDPOINT_URL"):
        out.append("storage.s3_addressing_style=path")
    return out


def translate_params(params: list[str]) -> list[str]:
    """``--params`` with upstream's storage spellings as ours (the rest unchanged)."""
    given = dict(p.split("=", 1) for p in params if "=" in p)
    kind = given.get("storage.storage_type")
    endpoints = given.get("storage.endpoint_urls")
    drop = {"storage.endpoint_urls"} | \
        ({"storage.storage_type", "storage.storage_root"} if kind in LIBRARIES else set())
    out = [p for p in params if p.split("=", 1)[0] not in drop]
    if endpoints is not None:
        urls = [u for u in endpoints.split(",") if u]
        if len(urls) != 1:
            raise ConfigError(f"storage.endpoint_urls names {len(urls)} endpoints and "
                              "dliobench talks to one: give one URL (storage.s3.endpoint_url) "
                              "and balance across endpoints in front of them")
        out.append(f"storage.s3_endpoint_url={urls[0]}")
    if kind in LIBRARIES:
        out += _root(given.get("storage.storage_root", ""))
    return out


def _root(root: str) -> list[str]:
    """Our keys for an s3dlio-style storage root URI."""
    scheme, sep, rest = root.partition("://")
    if not sep:
        return ["storage.storage_type=s3", f"storage.storage_root={root}"] if root else \
            ["storage.storage_type=s3"]
    if scheme in POSIX_SCHEMES:
        return ["storage.storage_type=local_fs", f"storage.storage_root={rest}"]
    if scheme != "s3":
        raise ConfigError(f"storage.storage_root={root}: dliobench reads s3://, file:// and "
                          "direct:// roots, not Azure or GCS; use an S3 gateway")
    bucket, _, prefix = rest.partition("/")
    out = ["storage.storage_type=s3", f"storage.storage_root={bucket}"]
    return [*out, f"dataset.data_folder={prefix}"] if prefix.strip("/") else out
