"""Data files are written in place; the manifest's journal, not a rename, commits them.

A file on storage that the manifest does not list (a killed writer's, or anything else that
holds its name) is not part of the dataset: the next generation creates the file anew,
never writing through what held the name.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.storage.posix import PosixBackend
from tests.conftest import manifest_files, tiny_workload


def test_an_in_place_writer_shows_its_file_at_once_and_abort_removes_it(
        tmp_path: Path) -> None:
    backend = PosixBackend(str(tmp_path))
    writer = backend.open_write("obj", atomic=False)
    writer.write(b"partial ")
    assert backend.size("obj") == 8  # no temporary name: the file itself, in part
    writer.abort()
    assert backend.size("obj") is None and list(backend.list()) == []
    (tmp_path / "kept").write_bytes(b"not ours")
    untouched = backend.open_write("kept", atomic=False)
    untouched.abort()  # aborted before it wrote anything: what held the name stays
    assert (tmp_path / "kept").read_bytes() == b"not ours"
    empty = backend.open_write("kept", atomic=False)
    empty.commit()
    assert backend.size("kept") == 0  # committed with nothing written: an empty object


def test_files_the_manifest_does_not_list_are_created_anew(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    shape = {"format": "npy", "record_length_bytes": 3968}  # files of 4 KiB
    first = write_workload(tiny_workload(dataset={**shape, "num_files_train": 6}), "six.yaml")
    doc = tiny_workload(dataset={**shape, "num_files_train": 9})
    nine = write_workload(doc, "nine.yaml")
    fresh = write_workload(tiny_workload(dataset={**doc["dataset"], "data_folder": "data/fresh"}),
                           "fresh.yaml")
    assert run_cli("generate", str(first), "--no-progress") == 0
    assert run_cli("generate", str(fresh), "--no-progress") == 0
    train = workdir / "data/tiny/train"
    outside, linked = workdir / "outside.bin", workdir / "linked.bin"
    outside.write_bytes(b"a symlink's target")
    linked.write_bytes(b"x" * 4096)
    (train / "img_0000006.npy").write_bytes(b"\xff" * 4096)  # a killed writer's, full size
    (train / "img_0000007.npy").symlink_to(outside)
    os.link(linked, train / "img_0000008.npy")
    capsys.readouterr()
    assert run_cli("generate", str(nine), "--no-progress") == 0
    assert "wrote 3 of 9 files" in capsys.readouterr().out
    assert outside.read_bytes() == b"a symlink's target"  # never written through
    assert linked.read_bytes() == b"x" * 4096
    for index in (6, 7, 8):
        path = train / f"img_{index:07d}.npy"
        assert not path.is_symlink() and path.stat().st_nlink == 1
        assert path.read_bytes() == (workdir / "data/fresh/train" / path.name).read_bytes()
    assert len(manifest_files(workdir / "data/tiny")) == 9
    assert run_cli("generate", str(nine), "--no-progress", "--verify") == 0
    assert "all 9 files are already" in capsys.readouterr().out
