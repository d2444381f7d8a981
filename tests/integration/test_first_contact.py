"""Defaults on first contact: `make run` measures the storage, not the page cache (O_DIRECT
where the file system takes it, said otherwise); a large generation is not started unasked;
a place the run cannot write is found before any work. Real file systems: the repo's disk,
a tmpfs and a ramfs mounted here, a read-only mount, a path under a regular file."""

from __future__ import annotations

import os
import pty
import select
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import last_result, tiny_workload

REPO = Path(__file__).resolve().parents[2]
DEFAULT = str(REPO / "workloads" / "default.yaml")
# the default workload, small: 16 files of 256 KiB, two epochs, no compute
SMALL = ["dataset.num_files_train=16", "dataset.record_length_bytes=262144",
         "dataset.record_length_bytes_stdev=0", "dataset.record_length_bytes_resize=0",
         "train.epochs=2", "train.computation_time=0", "--no-progress"]
REFUSES_ODIRECT = "refuses O_DIRECT"
IN_MEMORY = "a file system in memory"


def device_read_bytes(path: Path) -> int | None:
    """Bytes read so far from the block device holding ``path`` (/sys/dev/block/M:m/stat's
    sectors read), or None where it has no such device (an overlay, a network share)."""
    dev = os.stat(path).st_dev
    stat = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat")
    if not stat.exists():
        return None
    return int(stat.read_text().split()[2]) * 512


def test_make_run_reads_the_repo_disk_with_odirect_every_time(
        run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    # `make run` twice on the repo's own disk: the second run finds the dataset in place
    # (and, without O_DIRECT, in the page cache); both must read it from the device.
    with tempfile.TemporaryDirectory(dir=REPO, prefix=".test-first-contact-") as scratch:
        data = Path(scratch) / "data"
        for attempt in ("first", "second"):
            before = device_read_bytes(Path(scratch))
            assert run_cli("run", DEFAULT, f"dataset.data_folder={data}", "--output",
                           f"{scratch}/{attempt}", *SMALL) == 0
            after = device_read_bytes(Path(scratch))
            result = last_result(Path(scratch) / attempt)
            assert result["honesty"]["odirect"] is True
            assert result["honesty"]["page_cache_possible"] is False
            assert not any(REFUSES_ODIRECT in w for w in result["warnings"])
            out = capsys.readouterr().out
            assert f"reads: O_DIRECT from {result['storage']['fs_type']} at {data}" in out
        if before is not None and after is not None:  # the second run's reads hit the disk
            assert after - before >= 0.9 * result["metrics"]["bytes"], (before, after)


@pytest.mark.parametrize("fs_type", ["tmpfs", "ramfs"])
def test_a_memory_file_system_is_named_and_o_direct_refusal_falls_back(
        fs_type: str, mount: Callable[..., Path], run_cli: Callable[..., int],
        caplog: pytest.LogCaptureFixture) -> None:
    # ramfs refuses O_DIRECT on every kernel; tmpfs did before Linux 6.6 and takes it (as a
    # no-op) since. Either way its reads come from RAM, and the run must say so.
    data = mount(fs_type, "size=16m" if fs_type == "tmpfs" else "") / "data"
    # ramfs reports no free space at all: the space check cannot apply to it
    assert run_cli("run", DEFAULT, f"dataset.data_folder={data}", "dataset.check_free_space="
                   f"{'false' if fs_type == 'ramfs' else 'true'}", "--output",
                   str(data.parent / "out"), *SMALL) == 0
    result = last_result(data.parent / "out")
    warnings = " ".join(result["warnings"])
    assert f"{data} is on {fs_type}, {IN_MEMORY}" in warnings
    refused = REFUSES_ODIRECT in warnings
    assert refused == (fs_type == "ramfs" or not result["honesty"]["odirect"])
    if refused:  # buffered reads, the cache dropped before every epoch, said on the console
        assert f"{fs_type} at {data} {REFUSES_ODIRECT}" in warnings
        assert result["honesty"]["odirect"] is False
        assert result["honesty"]["evicted"] is True
        assert REFUSES_ODIRECT in caplog.text  # the console's warning
    assert result["metrics"]["exactly_once"] is True


@pytest.mark.parametrize("command", ["run", "generate"])
def test_the_readme_unet3d_example_is_not_generated_unasked(
        command: str, mount: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    # docs/workloads.md's `run unet3d --accelerator a100` writes 25.7 GB. Aimed at a 2 MB tmpfs
    # whose free space is not trusted, so that a build without the refusal fails at once
    # (the disk fills) instead of writing 25.7 GB; without a terminal it must refuse.
    data = mount("tmpfs", "size=2m") / "unet3d"
    argv = [command, "unet3d", "--accelerator", "a100", f"dataset.data_folder={data}",
            "dataset.check_free_space=false", "--no-progress"]
    if command == "run":
        argv += ["--output", str(data.parent / "out")]
    assert run_cli(*argv) == 2
    err = capsys.readouterr().err
    assert "25.74 GB (168 npz files)" in err and "--yes" in err
    assert len(err.strip().splitlines()) == 1
    assert not data.exists(), "nothing may be written before the user agrees"


def test_half_the_free_space_needs_a_yes(mount: Callable[..., Path],
                                         write_workload: Callable[..., Path],
                                         run_cli: Callable[..., int],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # 16 files of 256 KiB (4.2 MB) on an 8 MB tmpfs: small, but more than half of the free
    # space. Refused without --yes, generated with it.
    data = mount("tmpfs", "size=8m") / "data"
    path = write_workload(tiny_workload(dataset={"data_folder": str(data),
                                                 "num_files_train": 16,
                                                 "record_length_bytes": 262144}))
    assert run_cli("generate", str(path), "--no-progress") == 2
    assert "more than 50% of the free space unasked; run again with --yes" in \
        capsys.readouterr().err
    assert not data.exists()
    assert run_cli("generate", str(path), "--no-progress", "--yes") == 0
    assert len(list((data / "train").glob("*.npz"))) == 16


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bytes], Callable[[], str]]]:
    """Make a pseudo-terminal the command's stdin and stdout, with ``answer`` typed ahead;
    returns what was printed on it, when called."""
    fds: list[int] = []

    def attach(answer: bytes) -> Callable[[], str]:
        leader, follower = pty.openpty()
        fds.append(leader)
        os.write(leader, answer + b"\n")  # typed ahead: the terminal holds it for the read
        monkeypatch.setattr(sys, "stdin", os.fdopen(os.dup(follower), "r"))
        monkeypatch.setattr(sys, "stdout", os.fdopen(follower, "w"))

        def printed() -> str:
            sys.stdout.flush()
            seen = b""
            while select.select([leader], [], [], 0.2)[0]:
                seen += os.read(leader, 65536)
            return seen.decode(errors="replace")

        return printed

    yield attach
    for fd in fds:
        os.close(fd)


@pytest.mark.parametrize("answer", [b"n", b"y"])
def test_on_a_terminal_the_size_is_shown_and_asked(
        answer: bytes, mount: Callable[..., Path], write_workload: Callable[..., Path],
        run_cli: Callable[..., int], terminal: Callable[[bytes], Callable[[], str]]) -> None:
    data = mount("tmpfs", "size=8m") / "data"
    path = write_workload(tiny_workload(dataset={"data_folder": str(data),
                                                 "num_files_train": 16,
                                                 "record_length_bytes": 262144}))
    printed = terminal(answer)
    code = run_cli("generate", str(path), "--no-progress")
    said = printed()
    assert f"generate 4.3 MB (16 npz files) into {data}, where" in said, said
    if answer == b"y":
        assert code == 0 and "wrote 16 of 16 files" in said, said
    else:
        assert code == 2
        assert not data.exists()


def read_only(mount: Callable[..., Path]) -> str:
    """A folder to be made on a read-only tmpfs (root ignores permission bits, not this)."""
    return str(mount("tmpfs", "ro,size=1m") / "made-here")


def under_a_file(tmp_path: Path) -> str:
    """A folder to be made under a regular file."""
    (tmp_path / "file.txt").write_text("not a folder")
    return str(tmp_path / "file.txt" / "sub")


@pytest.mark.parametrize(("key", "where"), [
    ("output.folder", "read-only"), ("output.folder", "under-a-file"),
    ("storage.stage_to", "read-only"), ("checkpoint.checkpoint_folder", "read-only"),
    ("dataset.data_folder", "read-only")])
def test_a_place_the_run_cannot_write_is_found_before_any_work(
        key: str, where: str, mount: Callable[..., Path], tmp_path: Path,
        run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    bad = read_only(mount) if where == "read-only" else under_a_file(tmp_path)
    data = tmp_path / "data"
    settings: dict[str, Any] = {"dataset.data_folder": str(data),
                                "output.folder": str(tmp_path / "out"), key: bad}
    if key == "checkpoint.checkpoint_folder":
        settings.update({"workflow.checkpoint": "true", "checkpoint.model_size": "1MB"})
    assert run_cli("run", DEFAULT, *(f"{k}={v}" for k, v in settings.items()), *SMALL) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dliobench: error: {key}: {bad} ") and len(err.splitlines()) == 1
    assert not data.exists() or key == "dataset.data_folder", "nothing may be generated"
    assert not (tmp_path / "out").exists()


def test_generate_into_a_read_only_folder_is_refused_before_writing(
        mount: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    bad = read_only(mount)
    assert run_cli("generate", DEFAULT, f"dataset.data_folder={bad}", *SMALL) == 2
    assert "dataset.data_folder: " + bad + " cannot be written" in capsys.readouterr().err
