"""The npz format: real numpy files, zero-copy decoding, and corruption that never passes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError
from dliobench.formats import get_format
from dliobench.formats.base import stored
from dliobench.storage import posix_io as storage

FMT = get_format("npz")


def write(path: Path, samples: int, size: int) -> np.ndarray:
    data = np.random.default_rng(1).integers(0, 256, (samples, size), dtype=np.uint8)
    FMT.write(path, data)
    return data


def read_whole(path: Path, odirect: bool = False) -> tuple[np.ndarray, int]:
    view, n = storage.read_range(path, 0, path.stat().st_size, odirect)
    return FMT.decode(stored(path), view, whole_file=True), n


def test_written_file_is_a_real_npz(tmp_path: Path) -> None:
    data = write(tmp_path / "a.npz", 3, 1000)
    with np.load(tmp_path / "a.npz") as loaded:
        assert np.array_equal(loaded["x"], data)


@pytest.mark.parametrize("odirect", [False, True])
def test_whole_file_round_trip_counts_bytes(tmp_path: Path, odirect: bool) -> None:
    path = tmp_path / "a.npz"
    data = write(path, 1, 12345)
    sample, nbytes = read_whole(path, odirect)
    assert np.array_equal(sample, data.reshape(-1))
    size = path.stat().st_size
    assert nbytes == size  # O_DIRECT reads whole blocks, but the file ends first


def test_sample_ranges_of_a_multi_sample_file(tmp_path: Path) -> None:
    path = tmp_path / "m.npz"
    data = write(path, 5, 777)
    head, _ = storage.read_range(path, 0, FMT.head_bytes)
    ranges = FMT.layout(stored(path), head, path.stat().st_size, 5)
    for k, rng in enumerate(ranges):
        view, n = storage.read_range(path, rng.offset, rng.length)
        assert n == 777
        assert np.array_equal(FMT.decode(stored(path), view, whole_file=False), data[k])


def test_truncated_file_raises_naming_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "t.npz"
    write(path, 1, 50000)
    path.write_bytes(path.read_bytes()[:30000])
    with pytest.raises(CorruptSampleError, match=r"t\.npz at byte offset 30000.*truncated"):
        read_whole(path)


def test_flipped_byte_fails_the_crc(tmp_path: Path) -> None:
    path = tmp_path / "c.npz"
    write(path, 1, 50000)
    raw = bytearray(path.read_bytes())
    raw[20000] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptSampleError, match="CRC-32 mismatch"):
        read_whole(path)


def test_garbage_is_not_an_npz(tmp_path: Path) -> None:
    path = tmp_path / "g.npz"
    path.write_bytes(b"hello world" * 10)
    with pytest.raises(CorruptSampleError, match="zip signature"):
        read_whole(path)


@pytest.mark.slow
def test_same_data_same_bytes_at_another_time(tmp_path: Path) -> None:
    import time
    import zipfile

    data = np.arange(5000, dtype=np.uint8).reshape(5, 1000)
    FMT.write(tmp_path / "a.npz", data)
    # zip headers carry a time with 2-second resolution (even seconds, in any time zone):
    # wait into the next 2-second slot, not 2 s and more (1 s on average)
    time.sleep(2.05 - time.time() % 2)
    FMT.write(tmp_path / "b.npz", data)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.npz") as archive:
        assert archive.testzip() is None  # zip's own CRC check agrees
