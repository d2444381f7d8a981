"""Faults a user meets: a full disk during generation. Complete files must stay valid."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import manifest_files, tiny_workload


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs of our own (not the real disk), unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize(("files", "size"), [(400, 4097), (700, 2000)],
                         ids=["writer-thread", "writer-processes"])
def test_full_disk_stops_generation_cleanly(small_fs: Path, write_workload: Callable[..., Path],
                                            run_cli: Callable[..., int],
                                            capsys: pytest.CaptureFixture[str], files: int,
                                            size: int) -> None:
    # The payload passes the free-space check (1.6 or 1.4 MB) but every file takes one or two
    # more 4 KiB pages on tmpfs than it holds: the disk fills up while writing. 700 small
    # files are written by writer processes, 400 by a thread.
    doc = tiny_workload(dataset={"data_folder": str(small_fs / "data"), "num_files_train": files,
                                 "record_length_bytes": size})
    assert run_cli("generate", str(write_workload(doc)), "--no-progress") == 1
    err = capsys.readouterr().err
    assert "is full" in err or "No space left" in err
    assert "Traceback" not in err
    train = small_fs / "data/train"
    assert not list(train.glob(".*tmp*")), "half-written files must not remain"
    if (small_fs / "data/dliobench-manifest/manifest.json").exists():
        for name, (recorded, _) in manifest_files(small_fs / "data").items():
            assert (train / name).stat().st_size == recorded
    for path in train.glob("img_*.npz"):
        with np.load(path) as npz:  # every file that exists is complete
            assert npz["x"].shape == (1, size)


def test_not_enough_space_is_said_before_writing(small_fs: Path,
                                                 write_workload: Callable[..., Path],
                                                 run_cli: Callable[..., int],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    doc = tiny_workload(dataset={"data_folder": str(small_fs / "data"), "num_files_train": 8,
                                 "record_length_bytes": 1 << 20})
    assert run_cli("generate", str(write_workload(doc)), "--no-progress") == 1
    err = capsys.readouterr().err
    assert "needs 0.01 GB more but only" in err and "free" in err
    assert not list((small_fs / "data/train").glob("*"))
