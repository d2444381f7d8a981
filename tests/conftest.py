"""Shared fixtures: workload files in a temporary folder and an in-process CLI."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dliobench.cli.main import main


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what collection imported (torch, TensorFlow: ~480,000 objects) to gc's permanent
    generation: a test's gc.collect() then scans only what tests made (0.2-0.4 s a pass
    alone, seconds in a full suite, to microseconds)."""
    gc.freeze()


SERIAL_FOLDERS = ("slurm", "cluster")  # a fixed slurmctld port, fixed namespace names


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of ``SERIAL_FOLDERS`` are ``serial``: `make test` runs them alone, after the
    two-worker pass (pytest-xdist), as it runs the tests marked so one by one."""
    for item in items:
        if Path(str(item.fspath)).parent.name in SERIAL_FOLDERS:
            item.add_marker(pytest.mark.serial)


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Client ceilings measured by tests are cached in a folder of their own (subprocesses
    inherit it), never in the user's ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Mount a file system of our own (``mount -t TYPE -o OPTIONS``), unmounted afterwards;
    skips where mounting is not permitted (not root)."""
    done: list[Path] = []

    def mount_one(fs_type: str, options: str = "") -> Path:
        point = tmp_path / f"{fs_type}-{len(done)}"
        point.mkdir()
        argv = ["mount", "-t", fs_type, *(["-o", options] if options else []), fs_type,
                str(point)]
        if subprocess.run(argv, capture_output=True).returncode != 0:
            pytest.skip(f"cannot mount a {fs_type} here (needs root)")
        done.append(point)
        return point

    yield mount_one
    for point in done:
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary working directory (data/ and reports/ land here)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_workload(workdir: Path) -> Callable[..., Path]:
    """Write a workload YAML (a mapping) and return its path."""

    def write(doc: dict[str, Any], name: str = "tiny.yaml") -> Path:
        path = workdir / name
        path.write_text(yaml.safe_dump(doc))
        return path

    return write


def tiny_workload(**sections: dict[str, Any]) -> dict[str, Any]:
    """A small, fast workload in dliobench's key names, with section overrides merged in."""
    doc: dict[str, Any] = {
        "model": {"name": "tiny"},
        "dataset": {"data_folder": "data/tiny", "format": "npz", "num_files_train": 8,
                    "num_samples_per_file": 1, "record_length_bytes": 65536},
        "reader": {"batch_size": 2, "read_threads": 2, "prefetch_size": 2},
        "train": {"epochs": 2, "computation_time": 0.0},
    }
    for name, values in sections.items():
        doc.setdefault(name, {}).update(values)
    return doc


@pytest.fixture
def run_cli(workdir: Path) -> Callable[..., int]:
    """Run ``dliobench`` in-process and return its exit code."""

    def run(*argv: str) -> int:
        return main(list(argv))

    return run


def manifest_files(data_folder: Path) -> dict[str, tuple[int, int]]:
    """{file name: (size, CRC-32C)} of the files a dataset's manifest holds (names of
    dliobench's layout end in the file's index: ``img_0000007.npz``)."""
    from dliobench.dataset.manifest import Manifest
    from dliobench.storage.posix import PosixBackend

    manifest = Manifest.load(PosixBackend(str(data_folder)))
    assert manifest is not None, f"no manifest in {data_folder}"
    names = {index_of(p.name): p.name for p in (data_folder / "train").rglob("*")
             if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".idx")}
    return {names.get(i, f"#{i}"): entry for i, entry in manifest.held().items()}


def index_of(name: str) -> int:
    """The file index in a dliobench file name (the digits before the extension)."""
    import re

    match = re.search(r"_(\d+)\.[^.]+$", name)
    assert match, name
    return int(match.group(1))


def last_result(root: Path) -> dict[str, Any]:
    """The newest result.json under a reports folder."""
    runs = sorted(p for p in root.iterdir() if (p / "result.json").exists())
    assert runs, f"no result under {root}"
    result: dict[str, Any] = json.loads((runs[-1] / "result.json").read_text())
    return result


def rank_pid(marker: str, rank: int, variable: str = "PMI_RANK") -> int | None:
    """The pid of the process whose command line holds ``marker`` and whose environment sets
    the launcher's rank ``variable`` (MPICH's PMI_RANK, torchrun's RANK) to ``rank``."""
    wanted = f"\0{variable}={rank}\0".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd and wanted in b"\0" + env:
            return int(entry.name)
    return None


class S3Server:
    """The moto S3 server a test session runs (``tests/s3server.py``): its endpoint, the
    credentials of the one user it accepts, and the requests it counted."""

    def __init__(self, endpoint: str, access_key_id: str, secret_access_key: str) -> None:
        self.endpoint = endpoint
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key

    @functools.cached_property
    def _client(self) -> Any:
        return self.client()

    def client(self) -> Any:
        """A boto3 client of the test itself (to make buckets and damage objects)."""
        import boto3
        from botocore.config import Config as BotoConfig

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id=self.access_key_id, aws_secret_access_key=self.secret_access_key,
            config=BotoConfig(s3={"addressing_style": "path"}))

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (if need be); its name."""
        client = self._client
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=name)
        return name

    def counts(self, reset: bool = False) -> dict[str, int]:
        """Requests served by kind (list, get, put, head, ...) since the last reset."""
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint}/_counts",
                                         method="POST" if reset else "GET")
        with urllib.request.urlopen(request, timeout=10) as answer:
            counts: dict[str, int] = json.loads(answer.read())
        return counts

    def overrides(self) -> list[str]:
        """The storage keys that reach this server (credentials come from the environment)."""
        return [f"storage.s3.endpoint_url={self.endpoint}", "storage.s3.region=us-east-1",
                "storage.s3.addressing_style=path"]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """moto's S3 server on 127.0.0.1 in its own process for the session, with IAM
    enforcement: only the user made here gets in; stopped after the session."""
    import os
    import socket
    import sys

    pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3", "MOTO_PORT": str(port)}
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("s3server.py")),
                               str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        endpoint = f"http://127.0.0.1:{port}"
        iam = boto3.session.Session().client(  # the 3 requests before credentials count
            "iam", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="setup", aws_secret_access_key="setup")
        iam.create_user(UserName="bench")
        iam.put_user_policy(UserName="bench", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="bench")["AccessKey"]
        yield S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch,
           tmp_path: Path) -> S3Server:
    """The server's credentials in the AWS chain's variables, and no other AWS setting of
    this machine in the way (no config files, no instance metadata)."""
    for name in [n for n in __import__("os").environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return s3_server


@pytest.fixture(scope="session")
def vdb_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny DiskANN index built once per session (tests/vdb_index.py says its shape);
    the folder holding it is returned (vectordb.index_dir)."""
    os.environ.setdefault("RUST_LOG", "warn")  # DiskANN's per-query log lines, off (it reads
    pytest.importorskip("diskannpy", reason="the vectordb extra (diskannpy-rust)")  # it once)
    from dliobench.config.load import load
    from dliobench.run.vectordb.build import datagen
    from tests.vdb_index import SMALL

    root = tmp_path_factory.mktemp("vdb")
    workload = Path(__file__).parents[1] / "workloads" / "vectordb.yaml"
    cfg, _ = load(workload, [*SMALL, "vectordb.num_vectors=3000", "vectordb.dimension=32",
                             "vectordb.num_query_vectors=100", f"vectordb.index_dir={root}"])
    datagen(cfg.vectordb)
    return root
