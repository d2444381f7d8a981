"""Faults a user meets: a full disk during generation, SIGTERM. Complete files must stay
valid and what was measured must reach the user."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

from dliobench.base import leftovers
from dliobench.loaders.dali.source import FOLDER_PREFIX, LEFTOVER_PATTERN
from tests.conftest import manifest_files, tiny_workload


@pytest.fixture
def small_fs(mount: Callable[..., Path]) -> Path:
    """A 2 MB tmpfs of our own (not the real disk), unmounted afterwards."""
    return mount("tmpfs", "size=2M")


@pytest.mark.parametrize(("fmt", "files", "size"),
                         [("npz", 400, 4097), ("npz", 700, 2000), ("hdf5", 400, 4000)],
                         ids=["writer-thread", "writer-processes", "hdf5"])
def test_full_disk_stops_generation_cleanly(small_fs: Path, write_workload: Callable[..., Path],
                                            run_cli: Callable[..., int],
                                            capsys: pytest.CaptureFixture[str], fmt: str,
                                            files: int, size: int) -> None:
    # The space check is off (as for storage whose free space is not what it says), so the
    # disk fills up while writing: 700 small files are written by writer processes, 400 by a
    # thread, hdf5 through h5py. Then, with room, generation resumes with the missing files.
    doc = tiny_workload(dataset={"data_folder": str(small_fs / "data"), "num_files_train": files,
                                 "record_length_bytes": size, "format": fmt,
                                 "check_free_space": False})
    workload = write_workload(doc)
    assert run_cli("generate", str(workload), "--no-progress") == 1
    err = capsys.readouterr().err
    assert "is full" in err and err.count("\n") == 1
    assert "Traceback" not in err and "Exception ignored" not in err
    train = small_fs / "data/train"
    assert not list(train.glob(".*tmp*")), "half-written files must not remain"
    complete = sorted(p.name for p in train.glob(f"img_*.{fmt}"))
    assert complete, "some files fit"
    subprocess.run(["mount", "-o", "remount,size=8M", str(small_fs)], check=True)
    assert run_cli("generate", str(workload), "--no-progress") == 0
    # every complete file was recorded before the disk filled up: only the others are written
    assert f"wrote {files - len(complete)} of {files} files" in capsys.readouterr().out
    recorded = manifest_files(small_fs / "data")
    assert len(recorded) == files
    for name in complete:
        assert (train / name).stat().st_size == recorded[name][0]
    reader = np.load if fmt == "npz" else h5py.File
    for path in train.glob(f"img_*.{fmt}"):
        with reader(path) as data:  # every file is complete
            assert data["x" if fmt == "npz" else "records"].shape == (1, size)


def test_full_disk_while_streaming_parquet_leaves_only_complete_files(
        small_fs: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Parquet goes out a slice of row groups at a time (4 slices a file here): the disk
    fills up part way through a file; the one sentence, no partial file (the writer's footer
    does not create it again), and every file on disk reads whole."""
    import pyarrow.parquet as pq

    from dliobench.formats import _parquet_write

    monkeypatch.setattr(_parquet_write, "STREAM_BYTES", 16 << 10)
    doc = tiny_workload(dataset={"data_folder": str(small_fs / "data"), "num_files_train": 40,
                                 "num_samples_per_file": 64, "record_length_bytes": 1024,
                                 "format": "parquet", "parquet": {"row_group_size": 8},
                                 "check_free_space": False})
    assert run_cli("generate", str(write_workload(doc)), "--no-progress") == 1
    err = capsys.readouterr().err
    assert "is full" in err and err.count("\n") == 1 and "Traceback" not in err
    train = small_fs / "data/train"
    on_disk = sorted(train.glob("img_*.parquet"))
    recorded = manifest_files(small_fs / "data")
    assert on_disk and len(on_disk) < 40
    assert sorted(recorded) == [p.name for p in on_disk]
    for path in on_disk:
        assert pq.ParquetFile(path).metadata.num_rows == 64
        assert path.stat().st_size == recorded[path.name][0]


def test_not_enough_space_is_said_before_writing(small_fs: Path,
                                                 write_workload: Callable[..., Path],
                                                 run_cli: Callable[..., int],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # 1.6 MB of samples fit in the 2 MB disk, but 400 files of 4 KiB + 373 bytes take two
    # 4 KiB pages each: 3.3 MB. The check counts format overhead and block rounding.
    doc = tiny_workload(dataset={"data_folder": str(small_fs / "data"), "num_files_train": 400,
                                 "record_length_bytes": 4097})
    assert run_cli("generate", str(write_workload(doc)), "--no-progress") == 1
    err = capsys.readouterr().err
    assert "needs 3.3 MB more (1.6 MB of samples" in err and "free" in err
    assert not list((small_fs / "data/train").glob("*"))


def _until(predicate: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_sigterm_ends_a_run_like_ctrl_c(workdir: Path,
                                        write_workload: Callable[..., Path]) -> None:
    """What Slurm sends at a time limit: the run stops, writes what it measured, exits 143."""
    path = write_workload(tiny_workload(train={"epochs": 500, "computation_time": 0.005}))
    proc = subprocess.Popen([sys.executable, "-m", "dliobench", "run", str(path),
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    reports = workdir / "reports"
    _until(lambda: reports.exists() and any(reports.iterdir()))
    time.sleep(1.0)  # some steps
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    result = json.loads(next(reports.glob("*/result.json")).read_text())
    assert result["status"] == "partial" and result["metrics"]["steps"] > 0
    assert result["errors"] == ["rank 0: terminated by SIGTERM"]
    # (the signal may fall between two epochs, so the last epoch recorded may be complete)


def test_sigterm_during_generation_keeps_the_complete_files(
        workdir: Path, write_workload: Callable[..., Path]) -> None:
    path = write_workload(tiny_workload(dataset={"num_files_train": 6000,
                                                 "record_length_bytes": 4096}))
    cmd = [sys.executable, "-m", "dliobench", "generate", str(path), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    train = workdir / "data/tiny/train"
    _until(lambda: train.exists() and sum(1 for _ in train.glob("img_*")) > 1500)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    kept = len(manifest_files(workdir / "data/tiny"))
    assert 0 < kept < 6000
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and f"wrote {6000 - kept} of 6000 files" in done.stdout


def test_a_full_output_disk_still_delivers_the_measurements(
        small_fs: Path, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    """The results folder is on a full tmpfs: the summary prints, and result.json and
    timeline.csv go to a folder under the system's temporary directory, said in one line."""
    # fill the tmpfs to the last byte
    with open(small_fs / "filler", "wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"x" * 65536)
            handle.flush()
    path = write_workload(tiny_workload(train={"computation_time": 0.001}))
    assert run_cli("run", str(path), "--no-progress", "--output", str(small_fs / "out")) == 1
    captured = capsys.readouterr()
    assert "accelerator utilization" in captured.out  # the summary still reached the user
    assert "Traceback" not in captured.err
    line = next(ln for ln in captured.err.splitlines() if "could not write" in ln)
    fallback = Path(line.rsplit(" are in ", 1)[1])
    try:
        result = json.loads((fallback / "result.json").read_text())
        assert result["status"] == "complete" and result["metrics"]["steps"] > 0
        assert (fallback / "timeline.csv").read_text().count("\n") > 1
        assert str(small_fs / "out") in line and "No space left" in line
    finally:
        shutil.rmtree(fallback, ignore_errors=True)


def test_one_writer_or_many_readers_per_data_folder(
        workdir: Path, write_workload: Callable[..., Path]) -> None:
    """Another process holds the folder's lock (this test, with the lock dliobench uses): a
    generation waits for the writer, and for the readers, saying so in one line (the writer
    named) and writing nothing meanwhile; once the holder lets go, it writes."""
    from dliobench.dataset.lock import FolderLock
    from dliobench.storage.posix import PosixBackend

    path = write_workload(tiny_workload())
    folder = workdir / "data/tiny"
    said = {True: "waiting for the writer of the dataset in data/tiny to finish (generating by "
                  f"pid {os.getpid()} on",
            False: "waiting for the dliobench runs reading the dataset in data/tiny to finish "
                   "before writing it"}
    for exclusive, before, files in ((True, 0, 8), (False, 8, 12)):
        holder = FolderLock(PosixBackend(str(folder)))
        holder.acquire(exclusive, "generating")
        err = workdir / f"generate-{files}.err"
        try:
            with open(err, "wb") as sink:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "dliobench", "generate", str(path),
                     "dataset.generation_seed=7", f"dataset.num_files_train={files}"],
                    stdout=subprocess.DEVNULL, stderr=sink)
            _until(lambda p=proc, e=err, line=said[exclusive]: p.poll() is not None
                   or line in " ".join(e.read_text().split()))
            assert proc.poll() is None, err.read_text()
            assert len(list(folder.glob("train/*.npz"))) == before  # nothing written
        finally:
            holder.release()
        assert proc.wait(timeout=60) == 0 and "Traceback" not in err.read_text()
        assert len(manifest_files(folder)) == files


@pytest.mark.serial  # timing: alone, not beside another worker (Makefile)
@pytest.mark.skipif(importlib.util.find_spec("nvidia.dali") is None, reason="no DALI")
def test_no_dali_worker_outlives_a_killed_run(workdir: Path,
                                              write_workload: Callable[..., Path]) -> None:
    path = write_workload(tiny_workload(reader={"data_loader": "dali"},
                                        train={"epochs": 500, "computation_time": 0.005}))
    proc = subprocess.Popen([sys.executable, "-m", "dliobench", "run", str(path),
                             "--no-progress"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    reports = workdir / "reports"
    _until(lambda: reports.exists() and any(reports.iterdir()))
    time.sleep(1.5)  # training: DALI's workers have served samples
    children = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)],
                                               capture_output=True, text=True).stdout.split()]
    assert children, "no DALI worker processes seen"
    proc.kill()
    proc.wait()
    _until(lambda: not [c for c in children if Path(f"/proc/{c}").exists()], 10)
    assert not [c for c in children if Path(f"/proc/{c}").exists()]
    # the killed run could not remove its shared-memory folder: the next DALI loader does
    left = list(Path("/dev/shm").glob(f"{FOLDER_PREFIX}{proc.pid}-*"))
    assert left, "the run's folder names its pid"
    leftovers.sweep(LEFTOVER_PATTERN)  # what the next DALI loader does first
    assert not any(p.exists() for p in left)


@pytest.mark.parametrize("interrupted", ["checkpoint", "staging"])
def test_sigterm_while_copying_leaves_no_partial_copy(
        workdir: Path, write_workload: Callable[..., Path], interrupted: str) -> None:
    """SIGTERM while a checkpoint is written or the dataset is staged: no partial file or
    staged copy is left, and the run still ends with its partial result and exit 143."""
    if interrupted == "checkpoint":
        doc = tiny_workload(model={"model_size_bytes": "2GB"}, workflow={"checkpoint": True},
                            checkpoint={"steps_between_checkpoints": 2, "fsync": True},
                            train={"epochs": 3, "computation_time": 0.01})
        busy, pattern = workdir / "checkpoints", "**/.*"
    else:
        doc = tiny_workload(dataset={"num_files_train": 3000, "record_length_bytes": 65536},
                            storage={"stage_to": "staged"})
        busy, pattern = workdir / "staged", "**/*.npz"
    path = write_workload(doc)
    cmd = [sys.executable, "-m", "dliobench"]
    subprocess.run([*cmd, "generate", str(path), "--no-progress"], check=True, timeout=120)
    proc = subprocess.Popen([*cmd, "run", str(path), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _until(lambda: busy.exists() and sum(1 for _ in busy.glob(pattern)) > 0)
    proc.send_signal(signal.SIGSTOP)  # held while we look: the copy must still be under way
    if interrupted == "staging":
        assert sum(1 for _ in busy.glob(pattern)) < 3000, "staging ended before the signal"
    proc.send_signal(signal.SIGTERM)  # delivered when it goes on
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    left = [p for p in busy.rglob("*") if p.is_file()] if busy.exists() else []
    assert not left, left
    results = list((workdir / "reports").glob("*/result.json"))
    if interrupted == "checkpoint":  # staging comes before training: nothing measured yet
        assert json.loads(results[0].read_text())["status"] == "partial"
    assert all(any(run.iterdir()) for run in (workdir / "reports").glob("*"))
