"""The tf.data loader on TFRecord: TensorFlow's own reader, sharding, bytes and errors.

(The loader contract suite runs it on npz through ``from_generator``; these are the parts
only TFRecord has.) TensorFlow's import costs seconds: one dataset per module, few runs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError
from dliobench.dataset.plan import Plan
from dliobench.dataset.sharding import rank_samples
from dliobench.loaders import make_loader
from tests.contract.test_loaders import dataset, deliver, rank_plan

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                reason="TensorFlow (the tensorflow extra) is not installed")


TFRECORD = ("dataset.format=tfrecord", "reader.data_loader=tensorflow")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding 7 TFRecord files of 3 records (generated once for the module)."""
    path = tmp_path_factory.mktemp("tfrecord")
    dataset(path, *TFRECORD)
    return path


def records(folder: Path, *overrides: str) -> Plan:
    """The module's dataset read by tf.data under these reader settings."""
    return dataset(folder, *TFRECORD, *overrides)


def rchar() -> int:
    """Bytes this process has read through read system calls so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.parametrize(("sharding", "ranks"), [("file", 2), ("sample", 3)])
def test_every_record_once_and_bytes_of_the_files_handed(folder: Path, sharding: str,
                                                        ranks: int) -> None:
    plan = records(folder, f"reader.sharding={sharding}", "reader.sample_shuffle=seed",
                       "reader.file_shuffle=seed", "reader.drop_last=false",
                       "reader.read_threads=2")
    got = deliver(plan, ranks)
    for epoch in range(2):
        merged = np.concatenate([got[r, epoch][0] for r in range(ranks)])
        assert np.array_equal(np.sort(merged), np.arange(21))
        for rank in range(ranks):
            nbytes = got[rank, epoch][1]
            files = np.unique(rank_samples(rank_plan(plan, rank, ranks).spec, epoch) // 3)
            assert nbytes == sum(plan.sizes[i] for i in files)  # whole files, once each


def test_deviations_say_how_tf_data_departs(folder: Path) -> None:
    plan = records(folder, "reader.sharding=sample", "reader.sample_shuffle=seed",
                       "reader.read_threads=2")
    loader = make_loader(rank_plan(plan, 0, 3))
    try:
        list(loader.epoch(rank_samples(rank_plan(plan, 0, 3).spec, 0)))
    finally:
        loader.close()
    said = " | ".join(loader.deviations)
    assert "opens the TFRecord files itself" in said
    assert "buffer of 1024" in said
    assert "order differed from the plan in 1 of 1" in said
    assert "outside this rank's shard were read and skipped" in said  # 7 files over 3 ranks


def test_unshuffled_single_reader_follows_the_plan(folder: Path) -> None:
    plan = records(folder, "reader.sharding=file", "reader.read_threads=1",
                       "reader.prefetch_size=autotune")
    loader = make_loader(plan)
    try:
        got = np.concatenate([b.ids for b in loader.epoch(rank_samples(plan.spec, 0))])
    finally:
        loader.close()
    assert np.array_equal(got, rank_samples(plan.spec, 0)[:got.size])
    assert not any("order differed" in d for d in loader.deviations)


def test_bytes_counted_agree_with_rchar(tmp_path: Path) -> None:
    """Over 56 MB, the bytes counted (files handed to TFRecordDataset) are what the process
    read (/proc/self/io rchar) across the epoch, within 3 %. The second epoch is measured:
    the first also loads TensorFlow's lazily imported modules."""
    plan = dataset(tmp_path, *TFRECORD, "dataset.num_files_train=14",
                   "dataset.num_samples_per_file=4", "dataset.record_length_bytes=1MiB",
                   "reader.batch_size=4", "reader.sharding=file", "reader.file_shuffle=seed")
    loader = make_loader(plan)
    try:
        list(loader.epoch(rank_samples(plan.spec, 0)))
        before = rchar()
        got = [b.nbytes for b in loader.epoch(rank_samples(plan.spec, 1))]
        read = rchar() - before
    finally:
        loader.close()
    counted = sum(got)
    assert counted == sum(plan.sizes) >= 50e6
    assert min(got) == max(got)  # each batch carries the bytes of its records, not of a file
    assert read == pytest.approx(counted, rel=0.03)


def test_a_damaged_record_is_one_sentence(tmp_path: Path) -> None:
    """TensorFlow says only "corrupted record at 12"; the loader names the file."""
    plan = dataset(tmp_path, *TFRECORD)
    victim = sorted((tmp_path / "data").rglob("*.tfrecord"))[0]
    raw = bytearray(victim.read_bytes())
    raw[40] ^= 0xFF  # inside the first record's data: its CRC no longer matches
    victim.write_bytes(bytes(raw))
    loader = make_loader(plan)
    try:
        with pytest.raises(CorruptSampleError, match=f"{victim} at byte offset 0: CRC mismatch"):
            list(loader.epoch(np.arange(21)))
    finally:
        loader.close()
