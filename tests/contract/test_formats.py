"""FormatContract: the suite every data format passes (add a format to FORMATS: it is tested).

Through the same SampleReader every loader uses: round trip of every sample, byte counts at
the read call, O_DIRECT, and damaged files that raise CorruptSampleError naming file and
offset instead of returning a wrong sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError
from dliobench.dataset import fill as datafill
from dliobench.formats import FORMATS, get_format
from dliobench.formats.base import stored
from dliobench.loaders.base import SampleReader
from dliobench.storage.posix import PosixBackend

# Formats describe themselves: ``lossy`` (decoded sample is not the written bytes, e.g. JPEG),
# ``checksummed`` (a flipped payload byte is detected), ``max_samples_per_file`` (None: any).


def traits(name: str) -> tuple[bool, bool, int | None]:
    fmt = get_format(name)
    return fmt.lossy, fmt.checksummed, fmt.max_samples_per_file


def samples(n: int, size: int, seed: int = 5) -> np.ndarray:
    out = np.empty((n, size), dtype=np.uint8)
    datafill.fill(out, datafill.base_buffer(seed), seed, n)
    return out


def write_file(name: str, tmp_path: Path, data: np.ndarray) -> Path:
    """The format's file of ``data``, committed through the POSIX backend's writers (side
    files first, the data file last), as the generator commits its files."""
    fmt, backend = get_format(name), PosixBackend(str(tmp_path))
    key = f"f.{fmt.extension}"
    writer = backend.open_write(key)
    spool = writer.spool_path()
    fmt.write(spool, data)
    for suffix, side in zip(fmt.side_suffixes, fmt.side_files(spool), strict=True):
        side_writer = backend.open_write(key + suffix)
        side_writer.write(side.read_bytes())
        side_writer.commit()
        side.unlink()
    writer.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [key, *(key + s for s in fmt.side_suffixes)])  # nothing temporary is left
    return tmp_path / key


def reader(name: str, path: Path, n: int, odirect: bool = False) -> SampleReader:
    return SampleReader.for_paths(get_format(name), [path], [path.stat().st_size], n,
                                  odirect=odirect)


@pytest.fixture(params=FORMATS)
def fmt_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("odirect", [False, True])
def test_round_trip_and_bytes(fmt_name: str, tmp_path: Path, n: int, odirect: bool) -> None:
    lossy, _, max_n = traits(fmt_name)
    if max_n is not None and n > max_n:
        pytest.skip(f"{fmt_name} holds at most {max_n} sample(s) per file")
    data = samples(n, 64 * 64 * 3)
    path = write_file(fmt_name, tmp_path, data)
    assert not list(tmp_path.glob(".*tmp*")), "commit must leave no temporary files"
    r = reader(fmt_name, path, n, odirect)
    total = 0
    for k in range(n):
        sample, nbytes = r.read(k)
        assert nbytes > 0
        total += nbytes
        flat = np.asarray(sample).reshape(-1)
        if not lossy:  # image formats may keep only the bytes that fill whole rows
            m = min(flat.size, data[k].size)
            assert m >= 0.9 * data[k].size
            assert np.array_equal(flat[:m], data[k][:m])
    size = sum(p.stat().st_size for p in [path, *get_format(fmt_name).side_files(path)])
    if n == 1:
        assert total >= path.stat().st_size * 0.9  # a one-sample file is read whole
    assert total <= size * n + 64 * 1024  # never wildly more than the files


def test_truncated_file_raises(fmt_name: str, tmp_path: Path) -> None:
    path = write_file(fmt_name, tmp_path, samples(1, 32 * 1024 * 3))
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) * 2 // 3])
    r = SampleReader.for_paths(get_format(fmt_name), [path], [len(raw)], 1)
    with pytest.raises(CorruptSampleError, match=path.name):
        r.read(0)


def test_flipped_byte_raises_or_is_declared_undetectable(fmt_name: str, tmp_path: Path) -> None:
    if not traits(fmt_name)[1]:
        pytest.skip(f"{fmt_name} has no checksum of its payload")
    path = write_file(fmt_name, tmp_path, samples(1, 32 * 1024 * 3))
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptSampleError, match=path.name):
        reader(fmt_name, path, 1).read(0)


def test_deterministic_bytes(fmt_name: str, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    n = 1 if traits(fmt_name)[2] == 1 else 2
    a = write_file(fmt_name, tmp_path / "a", samples(n, 4096))
    b = write_file(fmt_name, tmp_path / "b", samples(n, 4096))
    assert a.read_bytes() == b.read_bytes()


class Recorder:
    """A POSIX backend that records every range it reads and every file object it opens."""

    def __init__(self, root: Path) -> None:
        self.inner = PosixBackend(str(root))
        self.reads: list[tuple[str, int, int, int]] = []  # key, offset, bytes returned, counted
        self.files: list[Any] = []

    def read_range(self, key: str, offset: int, length: int,
                   direct: bool = False) -> tuple[memoryview, int]:
        data, counted = self.inner.read_range(key, offset, length, direct)
        self.reads.append((key, offset, len(data), counted))
        return data, counted

    def open_read(self, key: str, direct: bool = False) -> Any:
        reader = self.inner.open_read(key, direct)
        self.files.append(reader)
        return reader

    def local_path(self, key: str) -> None:
        """None: libraries read through this backend's file objects, which it records (a
        local file pyarrow reads itself is counted by the thread's read counters instead:
        tests/integration/test_parquet.py checks that count against this one)."""
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("odirect", [False, True])
def test_bytes_counted_are_the_ranges_the_layout_reads(fmt_name: str, tmp_path: Path, n: int,
                                                       odirect: bool) -> None:
    """Through the seam every byte the storage transferred is counted, and nothing else:
    whole one-sample files; for multi-sample files the head, each side file once, and
    exactly the sample ranges ``layout`` gives."""
    fmt = get_format(fmt_name)
    if fmt.max_samples_per_file is not None and n > fmt.max_samples_per_file:
        pytest.skip(f"{fmt_name} holds at most {fmt.max_samples_per_file} sample(s) per file")
    path = write_file(fmt_name, tmp_path, samples(n, 5000))
    size = path.stat().st_size
    backend = Recorder(tmp_path)
    reader = SampleReader(fmt, backend, [path.name], [size], n,  # type: ignore[arg-type]
                          odirect=odirect)
    counted = sum(reader.read(k)[1] for k in range(n)) + reader.read(0)[1]  # once more: cached
    transferred = sum(c for *_, c in backend.reads) + sum(f.nbytes for f in backend.files)
    assert counted == transferred > 0
    if fmt.reads_itself:  # h5py reads through the backend's counted file object
        assert backend.files and not [r for r in backend.reads if r[0] == path.name]
        return
    data_reads = [(offset, got) for key, offset, got, _ in backend.reads if key == path.name]
    if n == 1:
        assert data_reads == [(0, size), (0, size)]  # the whole file, at each read
        return
    ranges = fmt.layout(stored(path), memoryview(path.read_bytes()[:fmt.head_bytes]), size, n)
    head = [(0, min(fmt.head_bytes, size))] if fmt.head_bytes else [(0, 0)]
    want = head + [(r.offset, r.length) for r in reversed(ranges)]
    assert sorted(data_reads[:-1]) == sorted(want)  # the last read: sample 0 again, no head
    assert data_reads[-1] == (ranges[0].offset, ranges[0].length)
    sides = [key for key, *_ in backend.reads if key != path.name]
    assert sorted(sides) == sorted(path.name + s for s in fmt.side_suffixes)  # once each
