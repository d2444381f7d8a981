"""Checkpoints on a full disk, a real tmpfs of our own: the first checkpoint fits, the second
does not. One sentence (the folder, the space needed and free, what to do), no traceback, the
completed checkpoint's figures in a partial result.json that names the failure, and no
checkpoint left looking whole with files missing."""

from __future__ import annotations

import contextlib
import errno
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.run.checkpoint.space import Room, is_full, write_error
from dliobench.storage import backend_for
from tests.conftest import last_result, tiny_workload

PRESET = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
# llama3_8b at scale 0.0001: 16 files, 11.2 MB a checkpoint; 16 MiB hold one, not two
SMALL = ["checkpoint.scale=0.0001", "checkpoint.time_between_checkpoints=0",
         "checkpoint.num_checkpoints_write=2", "checkpoint.num_checkpoints_read=1",
         "--no-progress"]


@pytest.fixture
def disk(mount: Callable[..., Path]) -> Path:
    """A 16 MiB tmpfs of our own, unmounted afterwards."""
    return mount("tmpfs", "size=16M")


def _one_sentence(err: str, folder: Path) -> str:
    """The one line on stderr, checked to be the full-disk sentence."""
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"dliobench: error: the storage holding checkpoint.checkpoint_folder "
                          f"{folder} is full"), err
    assert re.search(r"checkpoint 1 needs 11\.\d MB on this rank and \d\.\d MB was free", err)
    return err


@pytest.mark.parametrize(("fmt", "keep"), [("torch", True), ("raw", False)])
def test_a_full_disk_keeps_the_first_checkpoint_in_a_partial_result(
        disk: Path, workdir: Path, run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str], fmt: str, keep: bool) -> None:
    if fmt == "torch":
        pytest.importorskip("torch")
    folder = disk / "ckpt"
    assert run_cli("run", str(PRESET), *SMALL, f"checkpoint.file_format={fmt}",
                   f"checkpoint.keep={str(keep).lower()}",
                   f"checkpoint.checkpoint_folder={folder}") == 1
    err = _one_sentence(capsys.readouterr().err, folder)
    assert "is full (No space left on device)" in err  # torch's dropped errno recovered
    result = last_result(workdir / "reports")
    assert f"reports/{result['run_id']}/result.json (status: partial)" in err
    assert result["status"] == "partial" and "is full" in result["errors"][0]
    write = result["checkpoint"]["write"]
    assert write["count"] == 1 and write["checkpoints"][0]["index"] == 0
    assert write["checkpoints"][0]["bytes"] >= result["checkpoint"]["layout"]["planned_bytes"]
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    if keep:  # the whole first checkpoint stays; nothing of the second, not even a temp file
        assert len(files) == 16 and all(f.startswith("llama3_8b/checkpoint-0000/z")
                                        for f in files), files
    else:
        assert files == []


def test_a_full_disk_during_training_keeps_the_epochs_and_checkpoints(
        disk: Path, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    # 6 MB a checkpoint after every epoch, all kept until the run ends: the third does not fit
    path = write_workload(tiny_workload(train={"epochs": 3, "computation_time": 0.001}))
    folder = disk / "ckpt"
    assert run_cli("run", str(path), "--no-progress", "workflow.checkpoint=true",
                   "model.model_size_bytes=6MB", "checkpoint.optimizer_state_factor=0",
                   f"checkpoint.checkpoint_folder={folder}") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = next(ln for ln in err.splitlines() if ln.startswith("dliobench: error:"))
    assert f"checkpoint.checkpoint_folder {folder} is full" in line
    assert "checkpoint 2 needs 6.0 MB on this rank" in line
    result = last_result(workdir / "reports")
    assert result["status"] == "partial" and "is full" in result["errors"][0]
    assert [c["index"] for c in result["checkpoint"]["checkpoints"]] == [0, 1]
    assert len(result["epochs"]) >= 2 and result["metrics"]["steps"] > 0
    assert not [p for p in folder.rglob("*") if p.is_file()]


def test_a_full_disk_is_known_by_its_errno_chain_or_the_free_space(
        disk: Path, tmp_path: Path) -> None:
    """torch reports a full disk as a RuntimeError: an ENOSPC/EDQUOT in its chain says so;
    without one, the free space decides (none on the filled tmpfs; plenty in tmp_path:
    another failure, said as such)."""
    with open(disk / "filler", "wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"x" * 65536)
            handle.flush()
    assert is_full(RuntimeError("unexpected pos 1 vs 2"), backend_for(str(disk), None), 4096)
    backend = backend_for(str(tmp_path), None)
    room = Room.measure(backend, 3, 1 << 20, "checkpoint.scale")
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as quota:
            raise RuntimeError("basic_ios::clear: iostream error") from quota
    except RuntimeError as wrapped:
        assert is_full(wrapped, backend, 1 << 20)
        said = str(write_error(wrapped, backend, "a/b.pt", room, 1 << 20))
        assert "is full (Disk quota exceeded): checkpoint 3 needs 1.0 MB" in said
    plain = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1 vs 2")
    assert not is_full(plain, backend, 1 << 20)
    said = str(write_error(plain, backend, "a/b.pt", room, 1 << 20))
    assert said.startswith(f"cannot write checkpoint {tmp_path}/a/b.pt: [enforce fail")
    assert write_error(KeyboardInterrupt(), backend, "a/b.pt", room, 1) is None
