"""Small files made together: the same bytes as file by file, records of complete files only."""

from __future__ import annotations

from pathlib import Path

import crc32c
import numpy as np
import pytest

from dliobench.base.errors import DatasetError
from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.dataset import fill as datafill
from dliobench.dataset.batch_writer import FileBatch, Job, PartialBatch, write_batch
from dliobench.dataset.file_writer import Fill
from dliobench.dataset.generate import generate
from dliobench.dataset.layout import dataset_files, train_dir
from dliobench.dataset.manifest import Manifest
from dliobench.formats import get_format
from dliobench.run.planning import resolve
from dliobench.storage.posix import PosixBackend


@pytest.mark.parametrize("compressibility", [0.0, 0.4])
@pytest.mark.parametrize("nbytes", [1, 2047, 2048, 3968, 40_000, (4 << 20) + 5])
def test_rows_filled_together_are_the_bytes_of_each_file(nbytes: int,
                                                         compressibility: float) -> None:
    base = datafill.base_buffer(3)
    # indices whose start in the base buffer is near its end: their files wrap around it
    indices = np.array([0, 1, 2, 7, 1023, 1024, 98_765, 10**9], dtype=np.int64)
    out = np.full((indices.size, nbytes + 32), 0xEE, dtype=np.uint8)
    datafill.fill_rows(out[:, 16:16 + nbytes], base, 3, indices, compressibility)
    for row, index in zip(out, indices, strict=True):
        ref = np.empty(nbytes, dtype=np.uint8)
        datafill.fill(ref, base, 3, int(index), compressibility)
        assert np.array_equal(row[16:16 + nbytes], ref)
        assert (row[:16] == 0xEE).all() and (row[16 + nbytes:] == 0xEE).all()


def test_small_files_made_together_match_the_format_and_the_manifest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg, _ = load(None, [f"dataset.data_folder={data}", "dataset.format=npy",
                         "dataset.num_files_train=40", "dataset.num_samples_per_file=2",
                         "dataset.record_length_bytes=3000", "dataset.record_length_bytes_stdev=0",
                         "dataset.compressibility=0.5", "dataset.sample_checksums=true",
                         "dataset.generation_seed=5"])
    generate(resolve(cfg, World.single(), LocalComm()), World.single(), LocalComm(),
             show_progress=False)
    manifest = Manifest.load(PosixBackend(str(data)))
    assert manifest is not None
    held, sample_crcs = manifest.held(), manifest.sample_checksums(np.arange(40))
    fmt, base, root = get_format("npy"), datafill.base_buffer(5), train_dir(cfg.dataset)
    for f in dataset_files(cfg.dataset, fmt.extension):
        samples = np.empty((2, 3000), dtype=np.uint8)
        datafill.fill(samples, base, 5, f.index, 0.5)
        fmt.write(tmp_path / "ref.npy", samples)
        on_disk = (root / f.relpath).read_bytes()
        assert on_disk == (tmp_path / "ref.npy").read_bytes()
        assert held[f.index] == (len(on_disk), crc32c.crc32c(on_disk))
        assert list(sample_crcs[f.index]) == [crc32c.crc32c(s.tobytes()) for s in samples]


def test_a_batch_failing_part_way_records_only_the_complete_files(tmp_path: Path) -> None:
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path}", "dataset.format=npy",
                         "dataset.num_files_train=6", "dataset.record_length_bytes=100",
                         "dataset.record_length_bytes_stdev=0"])
    backend = PosixBackend(str(tmp_path))
    backend.make_room("train")
    job = Job(get_format("npy"), backend, Fill.for_dataset(cfg.dataset), cfg.dataset, True)
    (tmp_path / job.key(3)).mkdir()  # a folder where file 3 goes: it cannot be replaced
    batch = FileBatch(np.arange(6, dtype=np.int64), np.full(6, 100, np.int64), 1)
    with pytest.raises(PartialBatch) as caught:
        write_batch(job, batch)
    assert caught.value.records["index"].tolist() == [0, 1, 2]
    assert isinstance(caught.value.error, DatasetError)
    assert "cannot write" in str(caught.value.error)
    for index, size, crc in caught.value.records[["index", "size", "crc"]]:
        on_disk = (tmp_path / job.key(int(index))).read_bytes()
        assert (len(on_disk), crc32c.crc32c(on_disk)) == (size, crc)
    assert not (tmp_path / job.key(4)).exists()
