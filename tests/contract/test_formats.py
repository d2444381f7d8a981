"""FormatContract: the suite every data format passes (add a format to FORMATS: it is tested).

Through the same SampleReader every loader uses: round trip of every sample, byte counts at
the read call, O_DIRECT, and damaged files that raise CorruptSampleError naming file and
offset instead of returning a wrong sample.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dliobench.dataset import fill as datafill
from dliobench.errors import CorruptSampleError
from dliobench.formats import FORMATS, get_format
from dliobench.loaders.base import SampleReader

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
    fmt = get_format(name)
    final = tmp_path / f"f.{fmt.extension}"
    tmp = tmp_path / f".f.{fmt.extension}.tmp"
    fmt.write(tmp, data)
    fmt.commit(tmp, final)
    return final


def reader(name: str, path: Path, n: int, odirect: bool = False) -> SampleReader:
    return SampleReader(get_format(name), [path], [path.stat().st_size], n, odirect=odirect)


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
    r = SampleReader(get_format(fmt_name), [path], [len(raw)], 1)
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
