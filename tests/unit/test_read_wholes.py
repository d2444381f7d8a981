"""Whole files read as a list (``posix_io.read_wholes``, the optional C extension): the same
bytes and counts as one ``read_range`` per file, errors left to the one-by-one path, and
``SampleReader.read_many`` equal to ``read`` of each sample, errors worded the same."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.dataset.sharding import rank_samples
from dliobench.formats import npz
from dliobench.loaders import make_loader, sample_reader
from dliobench.loaders.base import SampleReader
from dliobench.storage import posix_io
from dliobench.storage.buffers import SampleBuffers
from tests.contract.test_loaders import dataset

BUILT = pytest.mark.skipif(not posix_io.BATCHED_READS,
                           reason="the _readfiles extension is not built here")


def _files(tmp_path: Path, sizes: list[int]) -> list[Path]:
    rng = np.random.default_rng(7)
    paths = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"f{i}"
        path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        paths.append(path)
    return paths


@BUILT
def test_the_extension_reads_what_read_range_reads(tmp_path: Path) -> None:
    paths = _files(tmp_path, [0, 1, 4096, 65_537, 3 << 20])
    names = [str(p) for p in paths]
    asked = [0, 1, 4096, 65_537, 3 << 20]
    got = posix_io.read_wholes(names, asked)
    for name, size, whole in zip(names, asked, got, strict=True):
        assert whole is not None
        want, n = posix_io.read_range(name, 0, size)
        assert whole[1] == n == len(whole[0])
        assert bytes(whole[0]) == bytes(want)


@BUILT
def test_the_extension_reports_errors_per_file(tmp_path: Path) -> None:
    good, short = _files(tmp_path, [100, 10])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # open would block without O_NONBLOCK; it is not a regular file
    folder = tmp_path / "folder"
    folder.mkdir()
    names = [str(good), str(tmp_path / "gone"), str(fifo), str(folder), str(short)]
    got = posix_io._read_files(names, [np.empty(100, np.uint8) for _ in names])  # type: ignore[misc]
    assert got == [100, -errno.ENOENT, -errno.EINVAL, -errno.EINVAL, 10]
    wholes = posix_io.read_wholes(names, [100] * len(names))
    assert [w is None for w in wholes] == [False, True, True, True, False]
    assert len(wholes[4][0]) == 10  # type: ignore[index]  # short: the caller says truncated
    with pytest.raises(BufferError):
        posix_io._read_files(names[:1], [b"read-only"])  # type: ignore[misc]
    with pytest.raises(ValueError, match="as many buffers"):
        posix_io._read_files(names, [])  # type: ignore[misc]


def _npz_reader(tmp_path: Path, count: int) -> tuple[SampleReader, list[Path]]:
    paths = []
    for i in range(count):
        path = tmp_path / f"s{i}.npz"
        np.savez(path, x=np.full((1, 5000 + i), i, dtype=np.uint8))
        paths.append(path)
    sizes = [p.stat().st_size for p in paths]
    return SampleReader.for_paths(npz.FORMAT, paths, sizes, 1), paths


@pytest.mark.parametrize("built", [True, False])
def test_read_many_is_read_of_each(tmp_path: Path, built: bool,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if built and not posix_io.BATCHED_READS:
        pytest.skip("the _readfiles extension is not built here")
    if not built:
        monkeypatch.setattr(posix_io, "_read_files", None)
    reader, _ = _npz_reader(tmp_path, 6)
    ids = [4, 0, 5, 2]
    many = reader.read_many(ids)
    for sample_id, (sample, nbytes) in zip(ids, many, strict=True):
        one, n = reader.read(sample_id)
        assert nbytes == n
        assert np.array_equal(sample, one)
        assert sample.size == 5000 + sample_id and int(sample[0]) == sample_id


@BUILT
def test_read_many_words_errors_as_read_does(tmp_path: Path) -> None:
    reader, paths = _npz_reader(tmp_path, 4)
    paths[1].unlink()
    with pytest.raises(DatasetError) as many:
        reader.read_many([0, 1, 2])
    with pytest.raises(DatasetError) as one:
        reader.read(1)
    assert str(many.value) == str(one.value)
    assert "it is gone" in str(many.value)
    data = bytearray(paths[3].read_bytes())
    data[2000] ^= 0xFF  # a flipped byte in the member: the CRC-32 catches it
    paths[3].write_bytes(bytes(data))
    with pytest.raises(CorruptSampleError, match="CRC-32 mismatch"):
        reader.read_many([2, 3])
    paths[2].write_bytes(paths[2].read_bytes()[:200])  # shorter than the manifest says
    with pytest.raises(CorruptSampleError, match="file is truncated"):
        reader.read_many([0, 2])


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def test_a_pool_block_comes_back_only_when_every_view_is_gone() -> None:
    pool = SampleBuffers(1 << 20, keep=2)
    first = pool.take()
    where = _address(first)
    view = np.frombuffer(first.data[100:], dtype=np.uint8)  # as a format's decode makes one
    del first  # refcounting gives blocks back: no gc pass (seconds in a full suite)
    second = pool.take()
    assert _address(second) != where  # the view still holds the first block
    del view
    assert _address(pool.take()) == where  # back, and lent again
    held = [pool.take() for _ in range(4)]
    del held, second
    assert len(pool._free) == 2  # no more free blocks than ``keep``


@BUILT
def test_read_many_into_a_pool_reads_the_same_samples(tmp_path: Path) -> None:
    _npz_reader(tmp_path, 4)
    same = list(tmp_path.glob("s*.npz"))
    for i, path in enumerate(sorted(same)):
        np.savez(path, x=np.full((1, 5000), i, dtype=np.uint8))
    size = same[0].stat().st_size
    reader = SampleReader.for_paths(npz.FORMAT, sorted(same), [size] * 4, 1)
    pool = SampleBuffers(size, keep=4)
    for _ in range(3):  # blocks come back between rounds and are read into again
        got = reader.read_many([3, 1, 0, 2], pool)
        assert [int(sample[0]) for sample, _ in got] == [3, 1, 0, 2]
        assert all(np.array_equal(sample, reader.read(i)[0])
                   for i, (sample, _) in zip([3, 1, 0, 2], got, strict=True))
        del got  # the last views go: each block is given back at once (refcounting, no gc
        assert len(pool._free) == 4  # pass: a full collection costs seconds in a full suite)


@BUILT
def test_the_native_loader_reads_large_samples_into_reused_memory(tmp_path: Path) -> None:
    plan = dataset(tmp_path, "reader.data_loader=native", "dataset.num_samples_per_file=1",
                   "dataset.record_length_bytes=1100000", "reader.prefetch_size=1")
    loader = make_loader(plan)
    fresh = sample_reader(plan)
    try:
        assert loader._pool is not None and loader._pool.size == plan.sizes[0]  # type: ignore[attr-defined]
        seen = []
        for epoch in range(2):
            for batch in loader.epoch(rank_samples(plan.spec, epoch)):
                for sample_id, sample in zip(batch.ids, batch.data, strict=True):
                    assert np.array_equal(sample, fresh.read(int(sample_id))[0])
                seen.extend(batch.ids.tolist())
                del batch, sample
        assert sorted(seen) == sorted(list(range(6)) * 2)
        assert loader._pool._free  # type: ignore[attr-defined]  # blocks came back
    finally:
        loader.close()


def _minor_faults() -> int:
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[7])


def test_reserved_pool_blocks_are_touched_before_they_are_lent() -> None:
    # 1 MiB: below numpy's huge-page threshold, so fresh memory faults once per 4 KiB page
    pool = SampleBuffers(1 << 20, keep=4)
    pool.reserve(8)  # at most ``keep``
    assert len(pool._free) == 4
    before = _minor_faults()
    lent = [pool.take() for _ in range(4)]
    for block in lent:
        block[:] = 1  # what a read into it does
    assert _minor_faults() - before < 64  # fresh blocks: 4 x 256 faults
    pool.reserve(4)  # all four exist (lent): none made
    assert not pool._free


@BUILT
def test_the_native_loader_makes_its_sample_memory_before_the_first_batch(
        tmp_path: Path) -> None:
    plan = dataset(tmp_path, "reader.data_loader=native", "dataset.num_samples_per_file=1",
                   "dataset.record_length_bytes=1100000", "reader.prefetch_size=1")
    loader = make_loader(plan)
    try:
        pool = loader._pool  # type: ignore[attr-defined]
        assert pool is not None and not pool._free
        ids = rank_samples(plan.spec, 0)
        batches = loader.epoch(ids)
        first = next(batches)
        # a block for every sample in flight (``keep``, or the epoch if fewer), made before
        # the first batch: lent (to it, or to batches read ahead) or free
        assert pool._made >= min(ids.size, pool._keep)
        assert len(first.data) == 2
        del first
        batches.close()
    finally:
        loader.close()
