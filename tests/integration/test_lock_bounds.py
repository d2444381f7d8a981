"""The dataset lock's waits (issue 54): bounded by ``storage.lock_wait_s``, naming the holder
when it gives up; ``generate`` takes the lock exclusively only when it writes, so a complete
dataset's readers are left be. Real ``flock`` on a real folder (two locks in one process
exclude each other as two processes do: a ``flock`` belongs to its open file)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dliobench.base.errors import DatasetError
from dliobench.dataset.lock import FolderLock
from dliobench.storage.posix import PosixBackend
from tests.conftest import S3Server, tiny_workload

BOUND = "storage.lock_wait_s=0.3"


@pytest.fixture
def dataset(workdir: Path, write_workload: Callable[..., Path],
            run_cli: Callable[..., int]) -> Path:
    """A generated 4-file dataset's workload (asks for those 4 files)."""
    path = write_workload(tiny_workload(dataset={"num_files_train": 4}))
    assert run_cli("generate", str(path), "--no-progress") == 0
    return path


def _held(workdir: Path, exclusive: bool, doing: str) -> Iterator[FolderLock]:
    lock = FolderLock(PosixBackend(str(workdir / "data/tiny")))
    lock.acquire(exclusive, doing)
    try:
        yield lock
    finally:
        lock.release()


@pytest.fixture
def writer(workdir: Path) -> Iterator[FolderLock]:
    """Another dliobench generating the dataset (holding its lock exclusively)."""
    yield from _held(workdir, True, "generating")


@pytest.fixture
def reader(workdir: Path) -> Iterator[FolderLock]:
    """Another dliobench's run reading the dataset (holding its lock shared)."""
    yield from _held(workdir, False, "by a run")


def test_a_reader_gives_up_on_a_writer_naming_it(dataset: Path, writer: FolderLock,
                                                 run_cli: Callable[..., int],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """main waited for ever; now the bound ends the run with the writer named."""
    code = run_cli("run", str(dataset), "--no-progress", "workflow.generate_data=false", BOUND)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1
    assert "gave up after 0.3 s (storage.lock_wait_s) waiting for the writer of the dataset " \
           f"in data/tiny to finish (generating by pid {os.getpid()} on" in err, err
    assert "raise storage.lock_wait_s (0: no limit)" in err


def test_generate_leaves_a_complete_datasets_readers_be(
        dataset: Path, reader: FolderLock, run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    """``generate`` of a complete dataset while a run reads it: done at once (main took the
    lock exclusively from its start and waited for the reader); to write 4 more files it
    waits for the readers, and gives up at the bound, saying so."""
    began = time.monotonic()
    assert run_cli("generate", str(dataset), "--no-progress", BOUND) == 0
    assert time.monotonic() - began < 10 and "waiting" not in capsys.readouterr().err
    assert run_cli("generate", str(dataset), "--no-progress", BOUND,
                   "dataset.num_files_train=8") == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "gave up after 0.3 s (storage.lock_wait_s) waiting for the dliobench runs reading " \
           "the dataset in data/tiny to finish before writing it" in err, err


def test_a_lease_wait_gives_up_naming_the_holder(s3_env: S3Server,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """On an object store (lock objects with leases), the same bound: a reader waiting for
    a live writer's object stops at it, naming the writer."""
    from dliobench.config.load import load
    from dliobench.dataset import lease
    from dliobench.dataset.lock import LOCK_KEY
    from dliobench.storage import backend_for

    monkeypatch.setattr(lease, "POLL_S", 0.05)
    config, _ = load(None, [f"dataset.data_folder=s3://{s3_env.bucket('bound')}/tiny",
                            *s3_env.overrides()])
    backend = backend_for(config.dataset.data_folder, config.storage)
    writer, reader = lease.LeaseLock(backend, LOCK_KEY), lease.LeaseLock(backend, LOCK_KEY, 0.3)
    writer.acquire(True, "generating")
    try:
        with pytest.raises(DatasetError, match=r"gave up after 0\.3 s \(storage\.lock_wait_s\) "
                           r"waiting for the writer of the dataset in s3://bound/tiny to "
                           r"finish \(being written \(generating\) by "):
            reader.acquire(False, "by a run")
    finally:
        reader.release()
        writer.release()
