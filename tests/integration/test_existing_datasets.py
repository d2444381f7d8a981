"""Existing datasets: one DLIO wrote (its names and layout), a folder of the user's own JPEGs,
a read-only data folder, and the refusals; indexed once, then read without listing."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dliobench.storage.posix import PosixBackend
from tests.conftest import last_result
from tests.dlio_written import write_dlio_dataset

QUICK = ["++workload.train.epochs=2", "++workload.train.computation_time=0.001",
         "++workload.reader.batch_size=2", "++workload.reader.read_threads=2", "--no-progress"]


def no_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, listing a folder fails the test (later runs read the index)."""
    def refuse(self: PosixBackend, prefix: str = "") -> Iterator[str]:
        raise AssertionError(f"listed {prefix!r} although the dataset is indexed")

    monkeypatch.setattr(PosixBackend, "list", refuse)


@pytest.mark.parametrize("loader", ["native", "pytorch"])
def test_a_dlio_dataset_trains_exactly_once(loader: str, workdir: Path,
                                            run_cli: Callable[..., int],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    data = workdir / "dlio"
    written = write_dlio_dataset(data, files=16, dim=48, subfolders=2, eval_files=2)
    # DLIO's own command line for the same dataset: recognised by its first file's name
    args = ["run", "workload=default", f"++workload.dataset.data_folder={data}",
            "++workload.dataset.num_files_train=16", "++workload.dataset.num_subfolders_train=2",
            f"++workload.reader.data_loader={loader}", *QUICK]
    assert run_cli(*args) == 0
    first = last_result(workdir / "reports")
    d = first["config"]["dataset"]
    assert (d["source"], d["layout"], d["format"], d["num_files_train"]) == \
        ("existing", "dlio", "npz", 16)
    assert first["metrics"]["exactly_once"] is True
    assert first["honesty"]["data_origin"].startswith("a dataset DLIO generated")
    sizes = sorted(p.stat().st_size for p in written)
    assert first["honesty"]["dataset_bytes"] == sum(sizes)  # sizes from the files
    assert (data / "dliobench-manifest" / "names.txt").read_text().count("_of_16.npz") == 16
    if loader == "pytorch":
        return
    no_listing(monkeypatch)  # later runs: found again by the index, said or recognised
    assert run_cli(*args) == 0
    assert run_cli(*args, "++workload.dataset.layout=dlio") == 0
    assert last_result(workdir / "reports")["metrics"]["exactly_once"] is True


def test_a_folder_of_pillow_jpegs_is_indexed_and_read_once(workdir: Path,
                                                            run_cli: Callable[..., int]) -> None:
    photos = workdir / "photos"
    (photos / "cats").mkdir(parents=True)
    rng = np.random.default_rng(1)
    for i in range(12):  # real photos' sizes differ; a subfolder, as ImageNet's classes
        pixels = rng.integers(0, 255, (40 + 4 * i, 56, 3), dtype=np.uint8)
        folder = photos / "cats" if i % 2 else photos
        Image.fromarray(pixels).save(folder / f"photo{i}.jpg", quality=90)
    assert run_cli("run", "--dataset", str(photos), "reader.data_loader=native", *QUICK) == 0
    result = last_result(workdir / "reports")
    d = result["config"]["dataset"]
    assert (d["format"], d["num_files_train"], d["num_samples_per_file"]) == ("jpeg", 12, 1)
    assert result["metrics"]["exactly_once"] is True
    assert result["metrics"]["samples"] > 0
    assert result["honesty"]["data_origin"].startswith("the user's own files")


@pytest.fixture
def read_only_folder(mount: Callable[..., Path]) -> Path:
    """A tmpfs mounted for the test (made read-only by the test); skipped where mounting is
    not allowed."""
    return mount("tmpfs", "size=8m")


def test_a_read_only_folder_gets_its_index_in_the_output_folder(
        read_only_folder: Path, workdir: Path, run_cli: Callable[..., int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(6):  # the last file holds a sample more: the smallest count is read
        np.save(read_only_folder / f"part{i}.npy", np.full((3 + i // 5, 1000), i, np.uint8))
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_folder)], check=True)
    args = ["run", "--dataset", str(read_only_folder), "--output", str(workdir / "out"),
            "dataset.source=existing", *QUICK]
    assert run_cli(*args) == 0
    result = last_result(workdir / "out")
    d = result["config"]["dataset"]
    assert (d["format"], d["num_files_train"], d["num_samples_per_file"]) == ("npy", 6, 3)
    assert result["metrics"]["exactly_once"] is True
    assert not (read_only_folder / "dliobench-manifest").exists()
    assert list((workdir / "out" / "dataset-index").glob("*/dliobench-manifest/names.txt"))
    no_listing(monkeypatch)
    assert run_cli(*args) == 0


def _missing(folder: Path) -> None:
    pass


def _empty(folder: Path) -> None:
    folder.mkdir()


def _mixed(folder: Path) -> None:
    folder.mkdir()
    np.save(folder / "a.npy", np.zeros(4, np.uint8))
    Image.new("L", (8, 8)).save(folder / "b.png")


def _unsupported(folder: Path) -> None:
    folder.mkdir()
    (folder / "notes.txt").write_text("not a sample")


def _corrupt(folder: Path) -> None:
    folder.mkdir()
    np.save(folder / "good.npy", np.zeros((2, 8), np.uint8))
    (folder / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")


@pytest.mark.parametrize(("make", "says"), [
    (_missing, "is not a folder"), (_empty, "holds no files"),
    (_mixed, "mixes file kinds (1 npy, 1 png)"),
    (_unsupported, "cannot read as samples (.txt"), (_corrupt, "bad.npy is not a readable npy"),
])
def test_bad_folders_are_one_sentence(make: Callable[[Path], None], says: str, workdir: Path,
                                      run_cli: Callable[..., int],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    make(workdir / "mine")
    assert run_cli("run", "--dataset", str(workdir / "mine"), "--no-progress") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and err[0].startswith("dliobench: error:"), err


def test_tfrecords_with_or_without_their_index_and_checksums_on_request(workdir: Path,
                                                             run_cli: Callable[..., int]) -> None:
    from dliobench.dataset.manifest import Manifest
    from dliobench.formats import get_format

    records = workdir / "records"
    records.mkdir()
    rng = np.random.default_rng(2)
    for i in range(4):
        get_format("tfrecord").write(records / f"shard-{i}.tfrecord",
                                     rng.integers(0, 255, (3, 700), dtype=np.uint8))
        if i % 2:  # as DLIO's, whose indexes lie elsewhere: the records are walked
            (records / f"shard-{i}.tfrecord.idx").unlink()
    assert run_cli("run", "--dataset", str(records), "dataset.index_checksums=true",
                   *QUICK) == 0
    result = last_result(workdir / "reports")
    d = result["config"]["dataset"]
    assert (d["format"], d["num_files_train"], d["num_samples_per_file"]) == ("tfrecord", 4, 3)
    assert result["metrics"]["exactly_once"] is True
    manifest = Manifest.load(PosixBackend(str(records)))
    assert manifest is not None
    crcs = [crc for _, crc in manifest.held().values()]
    assert len(crcs) == 4 and all(crcs)


def test_dlio_names_of_2_0_and_of_1_x_are_recognised(tmp_path: Path) -> None:
    from dataclasses import replace

    from dliobench.config.schema import DatasetConfig
    from dliobench.dataset.existing import dlio_first_keys, wanted

    d = replace(DatasetConfig(), data_folder=str(tmp_path), num_files_train=16,
                num_subfolders_train=2)
    assert dlio_first_keys(d) == ["train/0/img_00_of_16.npz", "train/0/img_0_of_16.npz"]
    assert not wanted(d)
    old = tmp_path / "train" / "0" / "img_0_of_16.npz"  # DLIO 1.x: no padding
    old.parent.mkdir(parents=True)
    np.savez(old, x=np.zeros((4, 4, 1), np.uint8))
    assert wanted(d)
    assert not wanted(replace(d, layout="dliobench"))


def test_a_copy_of_dliobenchs_own_npz_split_into_bytes_is_refused_before_any_work(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 49, item 7: dliobench's own train/*.npz (member x of shape (1, N)) read through
    --dataset would be N samples of 1 B per file: refused in one sentence naming the split and
    the keys that change it; the member read whole runs, and its run can be recovered."""
    import shutil

    from dliobench.results.recover import config_from_dict

    assert run_cli("generate", "default", "dataset.num_files_train=4",
                   "dataset.record_length_bytes=65536", "dataset.record_length_bytes_stdev=0",
                   "dataset.data_folder=gen", "--yes", "--no-progress") == 0
    own = workdir / "own"
    own.mkdir()
    for path in (workdir / "gen" / "train").glob("*.npz"):
        shutil.copy(path, own / path.name)
    capsys.readouterr()
    assert run_cli("run", "unet3d", "--dataset", str(own), "--no-progress") == 2
    said = capsys.readouterr().err.strip()
    assert "x[..., i] along axis -1" in said and "65,536 sample(s) of about 1 B" in said
    assert "dataset.num_samples_per_file=1" in said and len(said.splitlines()) == 1
    assert not (workdir / "reports").exists() or not list((workdir / "reports").iterdir())
    assert run_cli("run", "unet3d", "--dataset", str(own), "dataset.num_samples_per_file=1",
                   "reader.batch_size=2", "reader.data_loader=native", "train.epochs=1",
                   "train.computation_time=0", "--no-progress") == 0
    result = last_result(workdir / "reports")
    assert result["config"]["dataset"]["layout"] == "own"
    assert config_from_dict(result["config"]).dataset.layout == "own"  # recover can start it
