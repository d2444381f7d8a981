"""DLIO's indexed_binary layout: raw samples plus .off.idx / .sz.idx uint64 side files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats import get_format
from dliobench.formats.base import stored
from dliobench.loaders.base import SampleReader

FMT = get_format("indexed_binary")


def samples(n: int, size: int) -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (n, size), dtype=np.uint8)


def write(tmp_path: Path, data: np.ndarray, name: str = "img_0_of_1.indexed_binary") -> Path:
    final = tmp_path / name
    FMT.write(final, data)
    return final


def dlio_read_longs(path: Path, n: int) -> np.ndarray:
    """How DLIO's IndexedBinaryReader reads an index: n int64 with readinto."""
    out = np.empty(n, dtype=np.int64)
    with open(path, "rb") as handle:
        handle.readinto(out.data)
    return out


def test_files_have_dlio_names_and_contents(tmp_path: Path) -> None:
    data = samples(5, 1000)
    path = write(tmp_path, data)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "img_0_of_1.indexed_binary", "img_0_of_1.indexed_binary.off.idx",
        "img_0_of_1.indexed_binary.sz.idx"]
    assert FMT.side_files(path) == [tmp_path / "img_0_of_1.indexed_binary.off.idx",
                                    tmp_path / "img_0_of_1.indexed_binary.sz.idx"]
    assert path.read_bytes() == data.tobytes()
    offsets, sizes = FMT.side_files(path)
    assert offsets.read_bytes() == np.arange(0, 5000, 1000, dtype="<u8").tobytes()
    assert sizes.read_bytes() == np.full(5, 1000, dtype="<u8").tobytes()
    assert dlio_read_longs(offsets, 5).tolist() == [0, 1000, 2000, 3000, 4000]
    assert dlio_read_longs(sizes, 5).tolist() == [1000] * 5


@pytest.mark.parametrize("n", [1, 6])
@pytest.mark.parametrize("odirect", [False, True])
def test_round_trip_counts_sample_bytes(tmp_path: Path, n: int, odirect: bool) -> None:
    data = samples(n, 4096 + 17)
    path = write(tmp_path, data)
    reader = SampleReader.for_paths(FMT, [path], [path.stat().st_size], n, odirect=odirect)
    # the first read of a file also reads its two indexes; a whole one-sample file is
    # checked against its size index (8 bytes): side files read are counted too
    index = 16 * n if n > 1 else 8
    for k in reversed(range(n)):
        sample, nbytes = reader.read(k)
        assert np.array_equal(sample, data[k])
        if odirect:
            assert data[k].size + index <= nbytes <= data[k].size + index + 2 * 4096
        else:
            assert nbytes == data[k].size + index
        index = 0


def test_samples_of_different_sizes_follow_the_index(tmp_path: Path) -> None:
    sizes = [10, 3000, 1, 77]
    blob = np.random.default_rng(4).integers(0, 256, sum(sizes), dtype=np.uint8)
    path = tmp_path / "v.indexed_binary"
    path.write_bytes(blob.tobytes())
    offsets = np.cumsum([0, *sizes[:-1]]).astype("<u8")
    offsets.tofile(FMT.side_files(path)[0])
    np.array(sizes, dtype="<u8").tofile(FMT.side_files(path)[1])
    reader = SampleReader.for_paths(FMT, [path], [blob.size], 4)
    for k, (start, size) in enumerate(zip(offsets.tolist(), sizes, strict=True)):
        sample, nbytes = reader.read(k)
        assert nbytes == size + (64 if k == 0 else 0)  # 4 samples x 2 indexes x 8 bytes
        assert np.array_equal(sample, blob[start:start + size])


def test_missing_index_is_a_dataset_error(tmp_path: Path) -> None:
    path = write(tmp_path, samples(3, 100))
    FMT.side_files(path)[1].unlink()
    with pytest.raises(DatasetError, match=r"sz\.idx is missing"):
        FMT.layout(stored(path), memoryview(b""), path.stat().st_size, 3)


def test_index_length_must_match_the_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, samples(3, 100))
    size = path.stat().st_size
    with pytest.raises(DatasetError, match="more samples than the manifest's 2"):
        FMT.layout(stored(path), memoryview(b""), size, 2)
    with pytest.raises(CorruptSampleError, match=r"off\.idx at byte offset 24: index is trunc"):
        FMT.layout(stored(path), memoryview(b""), size, 4)


def test_truncated_data_file_raises(tmp_path: Path) -> None:
    path = write(tmp_path, samples(4, 1000))
    path.write_bytes(path.read_bytes()[:2500])
    with pytest.raises(CorruptSampleError, match=r"offset 2500.*sample 2 ends at byte 3000"):
        FMT.layout(stored(path), memoryview(b""), 2500, 4)
    reader = SampleReader.for_paths(FMT, [path], [4000], 4)  # the manifest's size: read fails
    assert reader.read(1)[1] == 1000 + 64  # the sample, and the index the first time
    with pytest.raises(CorruptSampleError, match="truncated"):
        reader.read(2)


def test_truncated_one_sample_file_is_caught(tmp_path: Path) -> None:
    path = write(tmp_path, samples(1, 3000))
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(CorruptSampleError, match=r"offset 2000.*truncated"):
        SampleReader.for_paths(FMT, [path], [3000], 1).read(0)
