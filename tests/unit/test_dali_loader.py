"""The DALI loader beyond the LoaderContract: DALI's own readers (native_reader), their
deviations from the plan and recovered ids; the external source's data, partial batches,
epochs left early and clean-up. Tiny datasets written straight through the format modules."""

from __future__ import annotations

import importlib
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from dliobench.base.errors import DlioBenchError
from dliobench.dataset.sharding import ShardSpec, rank_samples
from dliobench.formats import get_format
from dliobench.formats.base import Stored
from dliobench.loaders.base import SampleReader
from dliobench.loaders.dali.files import FileFeed
from dliobench.loaders.dali.loader import DaliLoader, start_method
from dliobench.loaders.dali.native import OPENS_FILES

NATIVE = {"npy": 1, "tfrecord": 3, "jpeg": 1, "png": 1}  # format -> samples per file
FILES = 5
RECORD = 900


def write_dataset(root: Path, name: str, per_file: int) -> SampleReader:
    """FILES files of format ``name``."""
    fmt = get_format(name)
    rng = np.random.default_rng(7)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(FILES):
        path = root / f"img_{i}.{fmt.extension}"
        if not path.exists():
            fmt.write(path, rng.integers(0, 256, (per_file, RECORD), dtype=np.uint8))
        paths.append(path)
    return SampleReader.for_paths(fmt, paths, [p.stat().st_size for p in paths], per_file)


@pytest.fixture(scope="module", params=sorted(NATIVE))
def native_data(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> SampleReader:
    name = str(request.param)
    return write_dataset(tmp_path_factory.mktemp(name), name, NATIVE[name])


@pytest.fixture(scope="module")
def npz_data(tmp_path_factory: pytest.TempPathFactory) -> SampleReader:
    return write_dataset(tmp_path_factory.mktemp("npz"), "npz", 3)


def run(loader: DaliLoader, reader: SampleReader, spec: ShardSpec,
        epochs: int) -> list[list[np.ndarray]]:
    """Per epoch, the delivered batches' ids; checks each sample's data on the way."""
    out = []
    for epoch in range(epochs):
        got = []
        for batch in loader.epoch(rank_samples(spec, epoch)):
            for sample_id, sample in zip(batch.ids, batch.data, strict=True):
                assert_same(reader, int(sample_id), sample)
            got.append(batch.ids)
        out.append(got)
    return out


def make(reader: SampleReader, **kwargs: object) -> DaliLoader:
    """A DaliLoader with small defaults (batches of 2, one worker) and ``kwargs``."""
    args: dict = {"batch_size": 2, "read_threads": 1, "prefetch_size": 2,  # type: ignore[type-arg]
                  "drop_last": False, "multiprocessing_context": "fork", **kwargs}
    return DaliLoader(reader, **args)


def assert_same(reader: SampleReader, sample_id: int, sample: np.ndarray) -> None:
    """DALI's sample is what dliobench's reader decodes (jpeg: within lossy decoders' noise)."""
    want, _ = reader.read(sample_id)
    assert sample.shape == want.shape
    if reader.fmt.name == "jpeg":  # libjpeg-turbo in DALI vs Pillow: IDCTs may differ a bit
        assert np.abs(sample.astype(int) - want.astype(int)).mean() < 2
    else:
        assert np.array_equal(sample, want)


def test_native_one_rank_follows_the_files_and_reports_the_padding(
        native_data: SampleReader) -> None:
    total = FILES * native_data.samples_per_file  # 5 or 15 samples: a partial last batch
    spec = ShardSpec(FILES, native_data.samples_per_file, rank=0, size=1)
    loader = make(native_data, native_reader=True, spec=spec)
    try:
        epochs = run(loader, native_data, spec, 2)
        for batches in epochs:
            ids = np.concatenate(batches)
            assert np.array_equal(ids, [*range(total), total - 1])  # the last sample, repeated
        assert loader.deviations == [OPENS_FILES, "DALI padded 2 repeated samples "
                                     "(pad_last_batch) over 2 epoch(s)"]
    finally:
        loader.close()


def test_native_bytes_are_the_files_or_records_read(native_data: SampleReader) -> None:
    spec = ShardSpec(FILES, native_data.samples_per_file, rank=0, size=1)
    loader = make(native_data, native_reader=True, spec=spec, drop_last=True)
    try:
        batches = list(loader.epoch(rank_samples(spec, 0)))
    finally:
        loader.close()
    ids = np.concatenate([b.ids for b in batches])
    assert ids.size == ids.size // 2 * 2 and np.unique(ids).size == ids.size  # no padding
    if native_data.fmt.name == "tfrecord":  # the framed records, from the index
        table = importlib.import_module("dliobench.formats.tfrecord").read_index(
            Stored(native_data.backend, native_data.keys[0]), native_data.sizes[0],
            native_data.samples_per_file)
        want = sum(int(table[i % 3, 1]) for i in ids)
    else:  # whole files (npy: the file's size; jpeg, png: the encoded bytes DALI read)
        want = sum(native_data.sizes[i] for i in ids)
    assert sum(b.nbytes for b in batches) == want
    assert loader.deviations == [OPENS_FILES]  # the library opened the files: said so


def test_native_ranks_shard_and_shuffle_dalis_way(native_data: SampleReader) -> None:
    per_file = native_data.samples_per_file
    total = FILES * per_file
    delivered: dict[int, list[np.ndarray]] = {0: [], 1: []}
    for rank in (0, 1):
        spec = ShardSpec(FILES, per_file, rank=rank, size=2, sample_shuffle=True, seed=5)
        loader = make(native_data, native_reader=True, spec=spec)
        try:
            for batches in run(loader, native_data, spec, 2):
                delivered[rank].append(np.unique(np.concatenate(batches)))  # repeats aside
            notes = " | ".join(loader.deviations)
        finally:
            loader.close()
        assert "DALI shuffles through a buffer of 1024 samples" in notes
        assert "stick_to_shard" in notes
        assert "outside this rank's planned shard" in notes
    for epoch in range(2):  # DALI's shards still cover the dataset once per epoch
        merged = np.concatenate([delivered[0][epoch], delivered[1][epoch]])
        assert np.array_equal(np.sort(merged), np.arange(total))
    assert np.array_equal(delivered[0][0], delivered[0][1])  # the same shard every epoch


def test_native_epoch_left_early_then_a_whole_epoch(native_data: SampleReader) -> None:
    spec = ShardSpec(FILES, native_data.samples_per_file, rank=0, size=1)
    loader = make(native_data, native_reader=True, spec=spec, batch_size=1)
    try:
        first = loader.epoch(rank_samples(spec, 0))
        next(first)
        first.close()
        ids = np.concatenate([b.ids for b in loader.epoch(rank_samples(spec, 1))])
    finally:
        loader.close()
    assert np.array_equal(ids, np.arange(FILES * native_data.samples_per_file))


def test_native_reader_falls_back_where_none_fits(npz_data: SampleReader) -> None:
    spec = ShardSpec(FILES, 3, rank=0, size=1, sample_shuffle=True)
    loader = make(npz_data, native_reader=True, spec=spec)
    try:
        ids = np.concatenate(run(loader, npz_data, spec, 1)[0])
        assert np.array_equal(ids, rank_samples(spec, 0))  # the plan, exactly
        assert loader.deviations == ["DALI native reader not used: no DALI reader fits npz "
                                     "files; read through fn.external_source (the plan is "
                                     "followed exactly)"]
    finally:
        loader.close()
    assert len(loader.deviations) == 1  # still there after close, for the result
    with pytest.raises(ValueError, match="ShardSpec"):
        DaliLoader(npz_data, 2, 1, 2, False, "fork", native_reader=True)


@pytest.mark.parametrize(("threads", "per_sample"), [(0, False), (2, True), (2, False)])
def test_source_partial_batches_and_data(npz_data: SampleReader, threads: int,
                                         per_sample: bool) -> None:
    spec = ShardSpec(FILES, 3, rank=0, size=1, sample_shuffle=True)
    loader = make(npz_data, batch_size=4, read_threads=threads, per_sample=per_sample)
    try:
        epochs = run(loader, npz_data, spec, 2)  # whole epochs kept: DALI's buffers are not reused
    finally:
        loader.close()
    for epoch, batches in enumerate(epochs):
        assert [b.size for b in batches] == [4, 4, 4, 3]
        assert np.array_equal(np.concatenate(batches), rank_samples(spec, epoch))
    assert loader.deviations == []


def test_source_epoch_left_early_and_empty_epochs(npz_data: SampleReader) -> None:
    spec = ShardSpec(FILES, 3, rank=0, size=1, sample_shuffle=True)
    loader = make(npz_data, batch_size=2, prefetch_size=1, read_threads=1)
    try:
        for plan in (rank_samples(spec, 0), rank_samples(spec, 1)):
            first = loader.epoch(plan)
            assert np.array_equal(next(first).ids, plan[:2])
            first.close()  # 7 batches left: finished when the next epoch starts
        almost = loader.epoch(rank_samples(spec, 2))
        for _ in range(7):
            next(almost)
        almost.close()  # one batch left, likely read already: finished right away
        assert not loader._feed.left()  # type: ignore[union-attr]
        assert list(loader.epoch(np.empty(0, dtype=np.int64))) == []
        ids = np.concatenate([b.ids for b in loader.epoch(rank_samples(spec, 3))])
        assert np.array_equal(ids, rank_samples(spec, 3))
    finally:
        loader.close()


def test_close_releases_workers_and_id_files(npz_data: SampleReader) -> None:
    before = len(multiprocessing.active_children())
    loader = make(npz_data, read_threads=2)
    folder = loader._feed.folder
    list(loader.epoch(np.arange(6)))
    assert len(multiprocessing.active_children()) == before + 2
    loader.close()
    assert len(multiprocessing.active_children()) == before
    assert not os.path.exists(folder)


def test_start_methods() -> None:
    notes: list[str] = []
    assert [start_method(m, notes) for m in ("fork", "spawn", "forkserver")] == \
        ["fork", "spawn", "spawn"]
    assert notes == ["DALI's Python workers have no 'forkserver' start method; they use spawn"]


@pytest.mark.parametrize(("threads", "per_sample"), [(0, False), (2, True), (2, False)])
def test_read_errors_reach_the_user_as_one_line(tmp_path: Path, threads: int,
                                                per_sample: bool) -> None:
    reader = write_dataset(tmp_path, "npz", 3)
    damaged = bytearray(Path(reader.keys[2]).read_bytes())
    damaged[0] ^= 0xFF
    Path(reader.keys[2]).write_bytes(damaged)
    loader = make(reader, read_threads=threads, per_sample=per_sample)
    try:
        with pytest.raises(DlioBenchError, match=r"corrupt sample in .*img_2\.npz"):
            list(loader.epoch(np.arange(15)))
    finally:
        loader.close()


@pytest.mark.parametrize("drop_last", [False, True])
def test_npy_files_are_read_by_dali_in_the_plans_order(tmp_path: Path, drop_last: bool) -> None:
    reader = write_dataset(tmp_path, "npy", 1)
    spec = ShardSpec(FILES, 1, rank=0, size=1, sample_shuffle=True)
    loader = make(reader, read_threads=2, drop_last=drop_last)
    try:
        assert isinstance(loader._feed, FileFeed)
        first = loader.epoch(rank_samples(spec, 0))
        assert np.array_equal(next(first).ids, rank_samples(spec, 0)[:2])
        first.close()  # left early: the rest is read before the next epoch
        epochs = run(loader, reader, spec, 3)[1:]
        counted = sum(b.nbytes for b in loader.epoch(np.arange(FILES)))
    finally:
        loader.close()
    for epoch, batches in enumerate(epochs, start=1):
        assert [b.size for b in batches] == ([2, 2] if drop_last else [2, 2, 1])
        assert np.array_equal(np.concatenate(batches), rank_samples(spec, epoch)[:sum(
            b.size for b in batches)])
    assert counted == sum(reader.sizes[:4 if drop_last else FILES])
    assert loader.deviations == []


@pytest.mark.parametrize("damage", ["truncated", "gone"])
def test_npy_files_dali_cannot_read_are_named_in_one_line(tmp_path: Path, damage: str) -> None:
    reader = write_dataset(tmp_path, "npy", 1)
    path = Path(reader.keys[3])
    if damage == "gone":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:500])
    loader = make(reader, read_threads=2)
    try:
        with pytest.raises(DlioBenchError, match=r"img_3\.npy") as caught:
            list(loader.epoch(np.arange(FILES)))
        assert "\n" not in str(caught.value)
    finally:
        loader.close()


def test_an_npy_file_gone_during_the_run_is_named_in_one_line(tmp_path: Path) -> None:
    """DALI 1.5x says it as "File mapping failed: PATH" after "encountered:", with no assert
    (benchmarks/faults/odd_filesystems.py, "dali own reader: data file deleted during the
    run", printed DALI's "Current pipeline object is no longer valid." before)."""
    reader = write_dataset(tmp_path, "npy", 1)
    spec = ShardSpec(FILES, 1, rank=0, size=1)
    loader = make(reader, read_threads=2, batch_size=1, native_reader=True, spec=spec)
    try:
        with pytest.raises(DlioBenchError, match=r"img_\d\.npy") as caught:
            for epoch in range(20):
                for i, _ in enumerate(loader.epoch(rank_samples(spec, epoch + 1))):
                    if epoch == 1 and i == 0:
                        for key in reader.keys:
                            Path(key).unlink()
        assert "\n" not in str(caught.value) and "no longer valid" not in str(caught.value)
    finally:
        loader.close()
