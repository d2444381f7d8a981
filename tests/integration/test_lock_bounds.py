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

from dliobench.dataset.lock import FolderLock
from dliobench.storage.posix import PosixBackend
from tests.conftest import tiny_workload

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
