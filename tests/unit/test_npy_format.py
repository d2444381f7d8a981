"""The npy format and the shared .npy header parser: real numpy files, zero-copy rows."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats import _npyheader as npyheader
from dliobench.formats import get_format
from dliobench.formats.base import stored
from dliobench.loaders.base import SampleReader
from dliobench.storage import posix_io as storage

FMT = get_format("npy")


def write(path: Path, samples: int, size: int) -> np.ndarray:
    data = np.random.default_rng(2).integers(0, 256, (samples, size), dtype=np.uint8)
    FMT.write(path, data)
    return data


def test_written_file_is_a_real_npy(tmp_path: Path) -> None:
    data = write(tmp_path / "a.npy", 3, 1000)
    loaded = np.load(tmp_path / "a.npy", allow_pickle=False)
    assert loaded.dtype == np.uint8 and loaded.flags.c_contiguous
    assert np.array_equal(loaded, data)


def test_layout_matches_numpy_and_rows_are_zero_copy(tmp_path: Path) -> None:
    path = tmp_path / "m.npy"
    data = write(path, 5, 777)
    head, _ = storage.read_range(path, 0, FMT.head_bytes)
    ranges = FMT.layout(stored(path), head, path.stat().st_size, 5)
    assert ranges[0].offset == np.load(path, mmap_mode="r").offset
    assert [r.length for r in ranges] == [777] * 5
    for k, rng in enumerate(ranges):
        view, n = storage.read_range(path, rng.offset, rng.length)
        assert n == 777
        sample = FMT.decode(stored(path), view, whole_file=False)
        assert np.array_equal(sample, data[k])
        assert np.shares_memory(sample, np.frombuffer(view, dtype=np.uint8))


@pytest.mark.parametrize("odirect", [False, True])
def test_whole_file_through_the_sample_reader(tmp_path: Path, odirect: bool) -> None:
    path = tmp_path / "w.npy"
    data = write(path, 1, 12345)
    size = path.stat().st_size
    sample, nbytes = SampleReader.for_paths(FMT, [path], [size], 1, odirect=odirect).read(0)
    assert np.array_equal(sample, data[0])
    assert nbytes == size


def test_truncated_file_raises_naming_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "t.npy"
    write(path, 4, 5000)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:15000])
    with pytest.raises(CorruptSampleError, match=r"t\.npy at byte offset 15000.*truncated"):
        view, _ = storage.read_range(path, 0, size)
        FMT.decode(stored(path), view, whole_file=True)
    head, _ = storage.read_range(path, 0, FMT.head_bytes)
    with pytest.raises(CorruptSampleError, match=r"at byte offset 15000.*needs 20128 bytes"):
        FMT.layout(stored(path), head, 15000, 4)
    reader = SampleReader.for_paths(FMT, [path], [size], 4)  # manifest's size; file is shorter
    reader.read(0)
    with pytest.raises(CorruptSampleError, match="truncated"):
        reader.read(3)


def test_sample_count_must_match_the_manifest(tmp_path: Path) -> None:
    path = tmp_path / "n.npy"
    write(path, 3, 100)
    head, _ = storage.read_range(path, 0, FMT.head_bytes)
    with pytest.raises(DatasetError, match="holds 3 samples, the manifest says 4"):
        FMT.layout(stored(path), head, path.stat().st_size, 4)


def test_fortran_ordered_arrays_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.npy"
    np.save(path, np.asfortranarray(np.zeros((3, 100), dtype=np.uint8)))
    head, _ = storage.read_range(path, 0, FMT.head_bytes)
    with pytest.raises(DatasetError, match="Fortran-ordered"):
        FMT.layout(stored(path), head, path.stat().st_size, 3)


def test_garbage_is_not_an_npy(tmp_path: Path) -> None:
    path = tmp_path / "g.npy"
    path.write_bytes(b"hello world" * 10)
    view, _ = storage.read_range(path, 0, 110)
    with pytest.raises(CorruptSampleError, match="magic string missing"):
        FMT.decode(stored(path), view, whole_file=True)


def npy_bytes(array: np.ndarray, version: tuple[int, int] | None = None) -> memoryview:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, version=version, allow_pickle=False)
    return memoryview(out.getvalue())


@pytest.mark.parametrize("array", [
    np.zeros((4, 3), dtype=np.uint8), np.zeros(7, dtype="<i4"), np.zeros((), dtype=np.float64),
    np.zeros((0, 5), dtype=np.uint8), np.zeros((2, 3, 4), dtype=">u2"),
    np.zeros((2, 3), dtype=np.uint8).T,  # Fortran order
    np.zeros(3, dtype=[("a", "<u1"), ("b", "<f8")]),  # structured: the literal_eval path
])
@pytest.mark.parametrize("version", [None, (2, 0), (3, 0)])
def test_header_parser_agrees_with_numpy(array: np.ndarray,
                                         version: tuple[int, int] | None) -> None:
    buf = npy_bytes(array, version)
    header = npyheader.parse(Path("x.npy"), buf)
    assert header.shape == array.shape
    assert header.dtype == array.dtype
    assert header.fortran_order == (array.flags.f_contiguous and not array.flags.c_contiguous)
    assert header.data_offset + header.nbytes == len(buf)
    assert header.data_offset % 64 == 0  # numpy aligns the data


def test_header_parser_works_inside_a_bigger_buffer() -> None:
    buf = memoryview(b"x" * 100 + bytes(npy_bytes(np.ones((2, 9), dtype=np.uint8))))
    header = npyheader.parse(Path("z.npz"), buf, start=100)
    assert bytes(buf[header.data_offset:header.data_offset + header.nbytes]) == b"\x01" * 18


@pytest.mark.parametrize("cut", [5, 9, 40])
def test_truncated_header_raises(cut: int) -> None:
    buf = npy_bytes(np.zeros((2, 2), dtype=np.uint8))[:cut]
    with pytest.raises(CorruptSampleError, match=r"truncated inside the \.npy header"):
        npyheader.parse(Path("h.npy"), buf)


def test_unreadable_header_raises() -> None:
    buf = bytearray(npy_bytes(np.zeros((2, 2), dtype=np.uint8)))
    buf[10:20] = b"{'descr': "[::-1]
    with pytest.raises(CorruptSampleError, match=r"at byte offset 10: unreadable .npy header"):
        npyheader.parse(Path("h.npy"), memoryview(bytes(buf)))
