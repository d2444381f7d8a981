"""Bad input and damaged data end in one sentence and the right exit code: never a traceback
or a hang. Real files, FIFOs, symlinks and signals; every run tiny."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats import get_format
from dliobench.loaders.base import SampleReader
from tests.conftest import tiny_workload

LOADERS = ["native", "pytorch",
           pytest.param("dali", marks=pytest.mark.skipif(
               importlib.util.find_spec("nvidia.dali") is None, reason="no DALI")),
           pytest.param("tensorflow", marks=pytest.mark.skipif(
               importlib.util.find_spec("tensorflow") is None, reason="no TensorFlow"))]
REPO = Path(__file__).resolve().parents[2]


def _error_lines(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith("dliobench: error:")]


def _partial(reports: Path) -> dict[str, object]:
    found = list(reports.glob("*/result.json"))
    assert len(found) == 1, found
    result: dict[str, object] = json.loads(found[0].read_text())
    assert result["status"] == "partial"
    return result


def _data_file(workdir: Path, index: int = 0) -> Path:
    """A data file, as the messages name it (relative to the workload's folder)."""
    return sorted((workdir / "data/tiny/train").glob("*.npz"))[index].relative_to(workdir)


def _generate(run_cli: Callable[..., int], path: Path) -> None:
    assert run_cli("generate", str(path), "--no-progress") == 0


def test_errors_survive_pickling() -> None:
    """What a loader worker process hands over: class, message and fields."""
    error = pickle.loads(pickle.dumps(CorruptSampleError("/d/f.npz", 4096, "bad bytes")))
    assert isinstance(error, CorruptSampleError)
    assert (error.path, error.offset) == ("/d/f.npz", 4096)
    assert str(error).startswith("corrupt sample in /d/f.npz at byte offset 4096: bad bytes")


def test_a_fifo_in_place_of_a_data_file_is_named_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "img_0.npz"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    reader = SampleReader.for_paths(get_format("npz"), [fifo], [4096], 1)
    with pytest.raises(DatasetError, match=f"cannot read {fifo}: it is a FIFO"):
        reader.read(0)


@pytest.mark.parametrize("loader", LOADERS)
def test_a_damaged_file_ends_the_run_in_one_sentence(
        loader: str, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capfd: pytest.CaptureFixture[str]) -> None:
    """Same size, damaged bytes: the stat check passes, the loader's worker finds it."""
    path = write_workload(tiny_workload(reader={"data_loader": loader}, train={"epochs": 1}))
    _generate(run_cli, path)
    damaged = _data_file(workdir, 3)
    with open(damaged, "r+b") as handle:
        handle.write(bytes(64))
    capfd.readouterr()
    assert run_cli("run", str(path), "--no-progress") == 1
    lines = _error_lines(capfd.readouterr().err)
    assert len(lines) == 1 and f"corrupt sample in {damaged} at byte offset 0" in lines[0]
    _partial(workdir / "reports")


@pytest.mark.skipif(importlib.util.find_spec("nvidia.dali") is None, reason="no DALI")
def test_dali_own_reader_names_a_damaged_file(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capfd: pytest.CaptureFixture[str]) -> None:
    """fn.readers.numpy opens the files itself: its C++ error becomes one sentence."""
    path = write_workload(tiny_workload(dataset={"format": "npy"}, train={"epochs": 1},
                                        reader={"data_loader": "dali",
                                                "dali_native_reader": True}))
    _generate(run_cli, path)
    damaged = sorted((workdir / "data/tiny/train").glob("*.npy"))[3]
    with open(damaged, "r+b") as handle:
        handle.write(bytes(64))
    capfd.readouterr()
    assert run_cli("run", str(path), "--no-progress") == 1
    lines = _error_lines(capfd.readouterr().err)
    assert len(lines) == 1 and "DALI's reader could not read" in lines[0]
    assert damaged.name in lines[0]
    _partial(workdir / "reports")


@pytest.mark.parametrize("loader", LOADERS)
def test_a_file_deleted_during_the_run_ends_it_in_one_sentence(
        loader: str, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capfd: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload(reader={"data_loader": loader},
                                        train={"epochs": 2000, "computation_time": 0.001}))
    _generate(run_cli, path)
    gone, reports = _data_file(workdir, 5), workdir / "reports"

    def delete_once_training() -> None:
        deadline = time.monotonic() + 60
        while not (reports.exists() and any(reports.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        gone.unlink()

    deleter = threading.Thread(target=delete_once_training, daemon=True)
    deleter.start()
    capfd.readouterr()
    assert run_cli("run", str(path), "--no-progress") == 1
    deleter.join()
    lines = _error_lines(capfd.readouterr().err)
    assert len(lines) == 1 and f"cannot read {gone}: it is gone" in lines[0]
    _partial(reports)  # (DALI may meet the missing file before its first step ends)


@pytest.mark.skipif(importlib.util.find_spec("nvidia.dali") is None, reason="no DALI")
def test_ctrl_c_during_a_dali_run_ends_it_as_interrupted(
        workdir: Path, write_workload: Callable[..., Path]) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C: DALI's workers too."""
    from dliobench.loaders.dali.source import FOLDER_PREFIX

    path = write_workload(tiny_workload(reader={"data_loader": "dali"},
                                        train={"epochs": 2000, "computation_time": 0.002}))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # as a shell starts a command: Ctrl-C's disposition at its default (a process that
    # inherits SIGINT ignored keeps it ignored, and the test harness's own state must not
    # decide this test), then exec'd, so the pid is the run's
    shell_like = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "signal.pthread_sigmask(signal.SIG_SETMASK, []); "
                  "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")
    proc = subprocess.Popen([sys.executable, "-c", shell_like, "-m", "dliobench", "run",
                             str(path), "--no-progress"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
    reports = workdir / "reports"
    # the workers are started once an epoch's ids are published (epoch-0.npy is removed two
    # epochs later: a short epoch can pass between two looks, so any epoch's file counts)
    first_epoch = f"{FOLDER_PREFIX}{proc.pid}-*/epoch-*.npy"
    deadline = time.monotonic() + 60
    while not list(Path("/dev/shm").glob(first_epoch)) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # DALI's workers are serving samples
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)  # ~1 s expected
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3, err
    assert err.strip().endswith("dliobench: interrupted")
    assert _partial(reports)["errors"] == ["rank 0: KeyboardInterrupt"]


def _under_file(workdir: Path) -> str:
    (workdir / "plain").write_text("a regular file")
    return str(workdir / "plain" / "x")


@pytest.mark.parametrize("key", ["dataset.data_folder", "output.folder", "storage.stage_to",
                                 "checkpoint.checkpoint_folder"])
def test_a_folder_under_a_regular_file_is_a_config_error(
        key: str, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capfd: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload(workflow={"checkpoint": True},
                                        model={"model_size_bytes": 4096}))
    folder = _under_file(workdir)
    assert run_cli("run", str(path), "--no-progress", f"{key}={folder}") == 2
    lines = _error_lines(capfd.readouterr().err)
    assert lines == [f"dliobench: error: {key}: {folder} lies under {workdir / 'plain'}, "
                     f"which is a regular file; choose another {key}"]


def test_a_train_folder_that_is_a_file_is_a_config_error(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capfd: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload())
    (workdir / "data/tiny").mkdir(parents=True)
    (workdir / "data/tiny/train").write_text("x")
    assert run_cli("generate", str(path), "--no-progress") == 2
    assert "train is a regular file, not a folder" in _error_lines(capfd.readouterr().err)[0]


@pytest.mark.parametrize("trace", [False, True])
def test_report_into_a_folder_under_a_file_is_a_config_error(
        trace: bool, workdir: Path, run_cli: Callable[..., int],
        capfd: pytest.CaptureFixture[str]) -> None:
    (workdir / "reports").mkdir()
    out = _under_file(workdir)
    argv = ["report", str(workdir / "reports"), "-o", out] + (["--trace"] if trace else [])
    assert run_cli(*argv) == 2
    assert f"-o {out} lies under" in _error_lines(capfd.readouterr().err)[0]


def _replace(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        os.symlink(path.name, path)  # a loop


@pytest.mark.parametrize("change", ["fifo", "folder", "loop", "num_files", "list"])
def test_a_damaged_manifest_is_one_sentence(
        change: str, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capfd: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload(dataset={"num_files_train": 2}))
    _generate(run_cli, path)
    header = Path("data/tiny/dliobench-manifest/manifest.json")
    doc = json.loads(header.read_text())
    if change == "num_files":
        header.write_text(json.dumps({**doc, "num_files": "x"}))
    elif change == "list":
        header.write_text(json.dumps({**doc, "journals": {"a": 1}}))
    else:
        _replace(header, change)
    capfd.readouterr()
    assert run_cli("generate", str(path), "--no-progress", "--verify") == 1
    lines = _error_lines(capfd.readouterr().err)
    assert len(lines) == 1 and f"the manifest {header} is damaged" in lines[0]


@pytest.mark.parametrize("kind", ["fifo", "loop"])
def test_generate_verify_with_an_odd_data_file(
        kind: str, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capfd: pytest.CaptureFixture[str]) -> None:
    """Neither is a complete file: both are written again."""
    path = write_workload(tiny_workload(dataset={"num_files_train": 2}))
    _generate(run_cli, path)
    odd = _data_file(workdir, 1)
    _replace(odd, kind)
    capfd.readouterr()
    code = run_cli("generate", str(path), "--no-progress", "--verify")
    lines = _error_lines(capfd.readouterr().err)
    assert code == 0 and not lines
    assert odd.is_file() and not odd.is_symlink()


def test_a_workload_fifo_is_refused_not_waited_on(
        workdir: Path, run_cli: Callable[..., int], capfd: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(workdir / "w.yaml")
    assert run_cli("run", str(workdir / "w.yaml"), "--no-progress") == 2
    assert _error_lines(capfd.readouterr().err) == [
        f"dliobench: error: cannot read workload file {workdir / 'w.yaml'}: it is a FIFO, "
        "not a regular file"]


def test_report_refuses_a_result_fifo(workdir: Path, run_cli: Callable[..., int],
                                      capfd: pytest.CaptureFixture[str]) -> None:
    run = workdir / "reports" / "20260101-000000-odd-abcdef"
    run.mkdir(parents=True)
    os.mkfifo(run / "result.json")
    assert run_cli("report", str(workdir / "reports")) == 2
    lines = _error_lines(capfd.readouterr().err)
    assert lines == [f"dliobench: error: {run / 'result.json'} cannot be read (it is a FIFO, "
                     "not a regular file); leave that folder out"]
