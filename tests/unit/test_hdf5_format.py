"""The hdf5 format: DLIO's layout, chunking and compression, h5py reads counted exactly."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np
import pytest

from dliobench.base.errors import ConfigError, CorruptSampleError, DatasetError
from dliobench.formats import get_format
from dliobench.formats.base import stored
from dliobench.formats.hdf5 import FORMAT as FMT
from dliobench.formats.hdf5 import Hdf5Format
from dliobench.loaders.base import SampleReader
from dliobench.storage import posix_io as storage


def test_registered_format_is_the_contiguous_default() -> None:
    assert get_format("hdf5") is FMT
    assert not FMT.chunked and FMT.compression is None and not FMT.checksummed


def samples(n: int, size: int, seed: int = 6) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size), dtype=np.uint8)


def write(fmt: Hdf5Format, path: Path, data: np.ndarray) -> Path:
    fmt.write(path, data)
    return path


def read_all(fmt: Hdf5Format, path: Path, n: int, odirect: bool = False) -> list[int]:
    size = path.stat().st_size
    counts = []
    for k in range(n):
        sample, nbytes = fmt.read_sample(stored(path), size, n, k, odirect)
        assert sample.dtype == np.uint8 and sample.ndim == 1
        counts.append(nbytes)
    return counts


def test_written_file_has_dlio_layout(tmp_path: Path) -> None:
    data = samples(5, 1000)
    path = write(FMT, tmp_path / "img_0_of_1.hdf5", data)
    with h5py.File(path, "r") as h5:
        assert sorted(h5.keys()) == ["labels", "records"]
        records = h5["records"]
        assert records.shape == (5, 1000) and records.dtype == np.uint8
        assert records.chunks is None and records.compression is None
        assert not records.fletcher32
        assert np.array_equal(records[...], data)
        assert np.array_equal(h5["labels"][...], np.zeros(5, dtype=np.int64))
    assert FMT.side_files(path) == []
    assert not FMT.checksummed


@pytest.mark.parametrize(("fmt", "chunks", "compression"), [
    (Hdf5Format(chunk_samples=2, compression="gzip", compression_level=6), (2, 3000), "gzip"),
    (Hdf5Format(compression="lzf"), (1, 3000), "lzf"),
    (Hdf5Format(chunk_samples=3), (3, 3000), None),
    (Hdf5Format(chunk_bytes=1024), (1, 1024), None),
])
def test_chunked_and_compressed_round_trip(tmp_path: Path, fmt: Hdf5Format,
                                           chunks: tuple[int, int],
                                           compression: str | None) -> None:
    data = samples(5, 3000)
    data[:, 1000:] = 0  # compressible
    path = write(fmt, tmp_path / "c.hdf5", data)
    with h5py.File(path, "r") as h5:
        records = h5["records"]
        assert records.chunks == chunks
        assert records.compression == compression
        assert records.fletcher32 and fmt.checksummed
        if compression == "gzip":
            assert records.compression_opts == 6
        if compression:
            assert records.id.get_storage_size() < data.nbytes * 0.9
    for k in (4, 0, 2, 1, 3):
        sample, nbytes = fmt.read_sample(stored(path), path.stat().st_size, 5, k, False)
        assert np.array_equal(sample, data[k])
        assert nbytes > 0 or chunks[0] > 1  # a sample in a chunk already read costs nothing


def test_one_sample_read_reads_far_less_than_the_file(tmp_path: Path) -> None:
    fmt = Hdf5Format()
    data = samples(16, 64 * 1024)
    path = write(fmt, tmp_path / "m.hdf5", data)
    size = path.stat().st_size
    counts = read_all(fmt, path, 16)
    assert 64 * 1024 < counts[0] < size / 8  # metadata once, and one sample
    assert counts[1:] == [64 * 1024] * 15  # then exactly each sample's bytes
    sample, _ = fmt.read_sample(stored(path), size, 16, 9, False)
    assert np.array_equal(sample, data[9])


def test_odirect_reads_whole_blocks_around_each_sample(tmp_path: Path) -> None:
    fmt = Hdf5Format()
    data = samples(8, 10_000)
    path = write(fmt, tmp_path / "d.hdf5", data)
    counts = read_all(fmt, path, 8, odirect=True)
    assert all(c % storage.ALIGN == 0 for c in counts[1:-1])  # the last one ends at EOF
    assert all(10_000 <= c <= 10_000 + 2 * storage.ALIGN for c in counts[1:])
    assert counts[0] <= 10_000 + 4 * storage.ALIGN  # the metadata's small reads share blocks
    sample, _ = fmt.read_sample(stored(path), path.stat().st_size, 8, 5, True)
    assert np.array_equal(sample, data[5])


def test_chunked_reads_count_whole_chunks(tmp_path: Path) -> None:
    fmt = Hdf5Format(chunk_samples=4)
    path = write(fmt, tmp_path / "k.hdf5", samples(8, 4096))
    counts = read_all(fmt, path, 8)
    assert counts[1:] == [4 * 4096 + 4] * 7  # the whole chunk and its checksum, every time


@pytest.mark.parametrize("odirect", [False, True])
@pytest.mark.parametrize("fmt", [Hdf5Format(), Hdf5Format(chunk_samples=1),
                                 Hdf5Format(compression="lzf")])
def test_every_epoch_reads_from_storage_again(tmp_path: Path, fmt: Hdf5Format,
                                              odirect: bool) -> None:
    for n, size in [(1, 10_000), (20, 2500)]:  # no cache keeps samples of open files
        path = write(fmt, tmp_path / f"e{n}.hdf5", samples(n, size))
        first = read_all(fmt, path, n, odirect)
        again = read_all(fmt, path, n, odirect)
        assert min(again) >= size
        assert sum(again) <= sum(first)


def test_samples_through_the_sample_reader_and_threads(tmp_path: Path) -> None:
    fmt = Hdf5Format()
    data = samples(32, 5000)
    path = write(fmt, tmp_path / "t.hdf5", data)
    reader = SampleReader.for_paths(fmt, [path], [path.stat().st_size], 32)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(reader.read, range(32)))
    for k, (sample, _) in enumerate(results):
        assert np.array_equal(sample, data[k])
    total = sum(n for _, n in results)
    assert 32 * 5000 <= total < 32 * 5000 + 8192  # each sample once, metadata once


def test_flipped_byte_in_a_checksummed_chunk_raises(tmp_path: Path) -> None:
    fmt = Hdf5Format(chunk_samples=1)
    path = write(fmt, tmp_path / "f.hdf5", samples(3, 20_000))
    with h5py.File(path, "r") as h5:
        chunk = h5["records"].id.get_chunk_info_by_coord((1, 0)).byte_offset
    raw = bytearray(path.read_bytes())
    raw[chunk + 500] ^= 0xFF
    path.write_bytes(bytes(raw))
    size = path.stat().st_size
    assert fmt.read_sample(stored(path), size, 3, 0, False)[0].size == 20_000
    with pytest.raises(CorruptSampleError, match=rf"f\.hdf5 at byte offset {chunk}: .*sample 1"):
        fmt.read_sample(stored(path), size, 3, 1, False)


def test_truncated_file_raises_naming_file_and_size(tmp_path: Path) -> None:
    path = write(FMT, tmp_path / "t.hdf5", samples(4, 10_000))
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:20_000])
    with pytest.raises(CorruptSampleError, match=r"t\.hdf5 at byte offset 20000.*truncated"):
        FMT.read_sample(stored(path), size, 4, 3, False)
    with pytest.raises(CorruptSampleError, match=r"t\.hdf5 at byte offset 0: h5py cannot open"):
        FMT.read_sample(stored(path), 20_000, 4, 0, False)  # a manifest that agrees: h5py notices


def test_garbage_and_wrong_shapes(tmp_path: Path) -> None:
    garbage = tmp_path / "g.hdf5"
    garbage.write_bytes(b"not hdf5" * 1000)
    with pytest.raises(CorruptSampleError, match=r"g\.hdf5 at byte offset 0"):
        FMT.read_sample(stored(garbage), 8000, 1, 0, False)
    path = write(FMT, tmp_path / "s.hdf5", samples(3, 100))
    with pytest.raises(DatasetError, match=r"shape \(3, 100\), the manifest says 4"):
        FMT.read_sample(stored(path), path.stat().st_size, 4, 0, False)
    with pytest.raises(DatasetError, match="no such dataset"):
        Hdf5Format(dataset="records_0").read_sample(stored(path), path.stat().st_size, 3, 0, False)


def test_a_regenerated_file_is_reopened(tmp_path: Path) -> None:
    fmt = Hdf5Format()
    path = write(fmt, tmp_path / "r.hdf5", samples(2, 500, seed=1))
    fmt.read_sample(stored(path), path.stat().st_size, 2, 0, False)
    data = write(fmt, tmp_path / "new.hdf5", samples(2, 500, seed=2))
    data.replace(path)
    sample, _ = fmt.read_sample(stored(path), path.stat().st_size, 2, 0, False)
    assert np.array_equal(sample, samples(2, 500, seed=2)[0])


def test_open_files_are_bounded_and_closed(tmp_path: Path) -> None:
    fmt = Hdf5Format(max_open_files=2)
    paths = [write(fmt, tmp_path / f"{i}.hdf5", samples(2, 100, seed=i)) for i in range(4)]
    for _ in range(2):
        for i, path in enumerate(paths):
            sample, _ = fmt.read_sample(stored(path), path.stat().st_size, 2, 1, False)
            assert np.array_equal(sample, samples(2, 100, seed=i)[1])
    assert len(fmt._handles) == 2
    fmt.close()
    assert not fmt._handles


def test_whole_file_decode_from_memory(tmp_path: Path) -> None:
    data = samples(1, 3000)
    path = write(FMT, tmp_path / "w.hdf5", data)
    view, _ = storage.read_range(path, 0, path.stat().st_size)
    assert np.array_equal(FMT.decode(stored(path), view, whole_file=True), data[0])
    with pytest.raises(CorruptSampleError, match="h5py cannot read"):
        FMT.decode(stored(path), view[:1000], whole_file=True)


def test_from_options_follows_dlio_keys() -> None:
    plain = Hdf5Format.from_options()
    assert not plain.chunked and plain.compression is None and not plain.checksummed
    gz = Hdf5Format.from_options(enable_chunking=True, chunk_size=4096, compression="gzip",
                                 compression_level=9)
    assert gz.chunk_shape(10, 100_000) == (1, 4096)
    assert gz.compression == "gzip" and gz.compression_level == 9 and gz.checksummed
    assert Hdf5Format.from_options(compression="lzf").chunk_shape(10, 500) == (1, 500)
    assert Hdf5Format.from_options(chunk_samples=4).chunk_shape(10, 500) == (4, 500)
    assert Hdf5Format(chunk_samples=64).chunk_shape(3, 500) == (3, 500)
    with pytest.raises(ConfigError, match="chunk_size must be > 0"):
        Hdf5Format.from_options(enable_chunking=True)
    with pytest.raises(ConfigError, match="'bz2' is not supported"):
        Hdf5Format.from_options(compression="bz2")
    with pytest.raises(ConfigError, match="not in 0-9"):
        Hdf5Format(compression="gzip", compression_level=11)
