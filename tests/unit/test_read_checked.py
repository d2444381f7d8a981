"""Whole npz and npy files checked against the first file's headers in C (``read_checked``):
zlib's CRC-32 by every way the extension computes it, the 64 KiB samples a generated dataset
holds read as arrays with no parsing, and a file that differs read through its format: a
valid one right, a damaged one with the format's CRC-32 sentence."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError
from dliobench.loaders import sample_reader
from dliobench.loaders.base import SampleReader
from dliobench.storage import checked_reads, posix_io
from tests.contract.test_loaders import dataset

CHECKED = pytest.mark.skipif(not posix_io.BATCHED_READS,
                             reason="the _readfiles extension is not built here")
EXT = posix_io._readfiles


@CHECKED
def test_crc32_is_zlibs_on_odd_lengths_and_offsets() -> None:
    data = os.urandom(70_000)
    lengths = [*range(0, 600, 7), 255, 256, 257, 511, 512, 1023, 65_536 + 183, 69_999]
    for level in range(EXT.CRC32_FOLDS + 1):  # tables, PCLMULQDQ, VPCLMULQDQ: as the CPU has
        for n in lengths:
            for offset in (0, 1, 13):
                part = data[offset:offset + n]
                for start in (0, 0xDEADBEEF):
                    assert EXT.crc32(part, start, level) == zlib.crc32(part, start), (level, n)


def _reader(tmp_path: Path, fmt: str, size: int = 65536) -> tuple[SampleReader, list[Path]]:
    plan = dataset(tmp_path, f"dataset.format={fmt}", "dataset.num_samples_per_file=1",
                   f"dataset.record_length_bytes={size}", "dataset.num_files_train=5")
    reader = sample_reader(plan)
    return reader, [Path(reader.backend.path(k)) for k in plan.keys]  # type: ignore[attr-defined]


def _array(path: Path) -> np.ndarray:
    loaded = np.load(path)
    return (loaded["x"] if path.suffix == ".npz" else loaded).reshape(-1)


def _misses(reader: SampleReader, ids: list[int]) -> int:
    """Files of ``ids`` that do not match their template, as read_many's C call finds."""
    sizes = [reader.sizes[i] for i in ids]
    _, misses = reader.backend.read_checked(  # type: ignore[attr-defined]
        [reader.keys[i] for i in ids], sizes, [reader.templates.get(n) for n in sizes])
    return int(misses)


@CHECKED
@pytest.mark.parametrize("fmt", ["npz", "npy"])
def test_generated_files_are_read_through_the_first_ones_headers(tmp_path: Path,
                                                                 fmt: str) -> None:
    reader, paths = _reader(tmp_path, fmt)
    first = reader.read_many([0])  # parsed through the format: its headers are the template
    assert _misses(reader, [1, 2, 3, 4]) == 0
    got = first + reader.read_many([1, 2, 3, 4])
    for path, (sample, nbytes) in zip(paths, got, strict=True):
        assert isinstance(sample, np.ndarray) and sample.size == 65536
        assert np.array_equal(sample, _array(path)) and nbytes == path.stat().st_size
    if fmt == "npy":  # valid, the same size, other headers: numpy's of a 1-D array
        np.save(paths[2], _array(paths[2]))
    else:  # valid, other headers: the version needed to extract (20, not 45)
        _patch(paths[2], 4, b"\x14")
        _patch(paths[3], 10, b"\x21\x43\x65\x47")  # another time: np.savez's of its own
    assert _misses(reader, [1, 2, 3]) == 1  # the time is not compared, the version is
    again = reader.read_many([1, 2, 3])
    assert all(np.array_equal(sample, _array(paths[i]))
               for i, (sample, _) in zip([1, 2, 3], again, strict=True))


def _patch(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(data)


@CHECKED
@pytest.mark.parametrize(("size", "flipped"), [(65536, 40_000), (1_200_000, 262_144),
                                               (1_200_000, 1_199_000)])
def test_a_flipped_byte_in_a_64_kib_npz_is_a_crc_mismatch(tmp_path: Path, size: int,
                                                         flipped: int) -> None:
    """64 KiB: one read; 1.2 MB: the CRC-32 folded in along 256 KiB reads, a byte flipped at a
    piece's start and in the last piece."""
    reader, paths = _reader(tmp_path, "npz", size)
    reader.read_many([0, 1])
    data = bytearray(paths[3].read_bytes())
    data[flipped] ^= 0x01  # in the member's data, after the headers the template holds
    paths[3].write_bytes(bytes(data))
    assert _misses(reader, [2, 3, 4]) == 1  # the C call's CRC-32 finds it
    with pytest.raises(CorruptSampleError, match="CRC-32 mismatch in the npz member"):
        reader.read_many([2, 3, 4])


def test_without_the_extension_the_same_samples(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(posix_io, "_read_files", None)
    reader, paths = _reader(tmp_path, "npz")
    got = reader.read_many([0, 1, 2]) + reader.read_many([3, 4])
    assert all(np.array_equal(sample, _array(path))
               for path, (sample, _) in zip(paths, got, strict=True))
    assert checked_reads.read_checked([str(paths[0])], [reader.sizes[0]], [None])[1] == 1


@CHECKED
def test_templates_out_of_order_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    buf = [np.empty(100, np.uint8)]
    for bad in [(b"x" * 10, 6, 4, 8, 0, 10, 100), (b"x" * 10, 0, 0, -1, 0, 10, 5),
                (b"x", 0, 0, -2, 0, 1, 100), (b"x" * 4, 2, 4, -1, 0, 4, 100)]:
        with pytest.raises(ValueError, match="out of order"):
            EXT.read_checked([str(path)], buf, [bad])
    with pytest.raises(TypeError):
        EXT.read_checked([str(path)], buf, [[b"x", 0, 0, -1, 0, 1, 100]])
    got, misses = EXT.read_checked([str(path)], buf, [(b"xyxx", 1, 1, -1, 0, 4, 100)])
    assert misses == 0 and bytes(got[0][0]) == b"x" * 96 and got[0][1] == 100
