"""JPEG and PNG: real images Pillow opens, DLIO's shape, honest corruption handling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats import get_format
from dliobench.formats._image import image_shape
from dliobench.formats.base import stored
from dliobench.formats.jpeg import JpegFormat
from dliobench.storage import posix_io as storage

IMAGE_FORMATS = ["jpeg", "png"]
RESNET50_RECORD = 114_660


def sample(size: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (1, size), dtype=np.uint8)


def write(name: str, path: Path, data: np.ndarray) -> Path:
    get_format(name).write(path, data)
    return path


def decode(name: str, path: Path, odirect: bool = False) -> np.ndarray:
    view, _ = storage.read_range(path, 0, path.stat().st_size, odirect)
    return get_format(name).decode(stored(path), view, whole_file=True)


def test_shape_is_dlio_square_plus_the_rows_that_fit() -> None:
    assert image_shape(RESNET50_RECORD) == (339, 338)  # DLIO: 338 x 338
    assert image_shape(64 * 64) == (64, 64)
    assert image_shape(1) == (1, 1)
    assert image_shape(3) == (3, 1)
    for n in (5, 99, 12_345, RESNET50_RECORD, 10**7 + 1):
        rows, cols = image_shape(n)
        assert 0 <= n - rows * cols < cols


def test_empty_record_is_refused() -> None:
    with pytest.raises(DatasetError, match="at least 1"):
        image_shape(0)


@pytest.mark.parametrize("name", IMAGE_FORMATS)
def test_traits_declared(name: str) -> None:
    fmt = get_format(name)
    assert fmt.max_samples_per_file == 1
    assert fmt.lossy is (name == "jpeg")
    assert fmt.checksummed is (name == "png")


@pytest.mark.parametrize("name", IMAGE_FORMATS)
def test_file_is_a_grayscale_image_pillow_opens(name: str, tmp_path: Path) -> None:
    path = write(name, tmp_path / f"a.{get_format(name).extension}", sample(RESNET50_RECORD))
    with Image.open(path) as image:
        assert image.format == name.upper()
        assert image.mode == "L"
        assert image.size == (338, 339)  # (width, height)


@pytest.mark.parametrize("odirect", [False, True])
@pytest.mark.parametrize("size", [1, 3, 1000, RESNET50_RECORD])
def test_png_round_trip_is_exact(tmp_path: Path, size: int, odirect: bool) -> None:
    data = sample(size)
    path = write("png", tmp_path / "a.png", data)
    pixels = decode("png", path, odirect)
    rows, cols = image_shape(size)
    assert pixels.shape == (rows, cols) and pixels.dtype == np.uint8
    assert np.array_equal(pixels.reshape(-1), data[0, : rows * cols])


@pytest.mark.parametrize("odirect", [False, True])
def test_jpeg_round_trip_is_close(tmp_path: Path, odirect: bool) -> None:
    data = sample(RESNET50_RECORD)
    path = write("jpeg", tmp_path / "a.jpg", data)
    pixels = decode("jpeg", path, odirect)
    assert pixels.shape == (339, 338) and pixels.dtype == np.uint8
    expected = data[0, : 339 * 338].reshape(339, 338).astype(np.int16)
    error = np.abs(pixels.astype(np.int16) - expected).mean()
    assert 0 < error < 10  # random pixels are JPEG's worst case; about 7.5 at quality 75


@pytest.mark.parametrize("name", IMAGE_FORMATS)
def test_same_bytes_make_identical_files(name: str, tmp_path: Path) -> None:
    a = write(name, tmp_path / "a", sample(50_000, seed=9)).read_bytes()
    b = write(name, tmp_path / "b", sample(50_000, seed=9)).read_bytes()
    c = write(name, tmp_path / "c", sample(50_000, seed=10)).read_bytes()
    assert a == b
    assert a != c


@pytest.mark.parametrize("name", IMAGE_FORMATS)
def test_more_than_one_sample_per_file_is_refused(name: str, tmp_path: Path) -> None:
    data = np.zeros((2, 100), dtype=np.uint8)
    with pytest.raises(DatasetError, match="one sample"):
        get_format(name).write(tmp_path / "a", data)
    with pytest.raises(DatasetError, match="one sample"):
        get_format(name).layout(stored(tmp_path / "a"), memoryview(b""), 100, 2)


@pytest.mark.parametrize("name", IMAGE_FORMATS)
def test_layout_is_the_whole_file(name: str, tmp_path: Path) -> None:
    ranges = get_format(name).layout(stored(tmp_path / "a"), memoryview(b""), 1234, 1)
    assert [(r.offset, r.length) for r in ranges] == [(0, 1234)]


@pytest.mark.parametrize("load_truncated", [False, True])
@pytest.mark.parametrize("cut", [2, 1000])
@pytest.mark.parametrize("name", IMAGE_FORMATS)
def test_truncated_file_raises_naming_file_and_size(
        name: str, tmp_path: Path, cut: int, load_truncated: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", load_truncated)
    path = write(name, tmp_path / "a", sample(20_000))
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises(CorruptSampleError, match="a at byte") as info:
        decode(name, path)
    assert info.value.offset == path.stat().st_size


@pytest.mark.parametrize("name", IMAGE_FORMATS)
def test_garbage_with_a_valid_end_marker_raises(name: str, tmp_path: Path) -> None:
    fmt = get_format(name)
    path = tmp_path / "a"
    path.write_bytes(b"\x01" * 500 + getattr(fmt, "trailer", b""))
    with pytest.raises(CorruptSampleError, match="damaged"):
        decode(name, path)


def test_png_decoded_as_jpeg_raises(tmp_path: Path) -> None:
    path = write("png", tmp_path / "a", sample(5000))
    with pytest.raises(CorruptSampleError):
        decode("jpeg", path)


def test_png_flipped_byte_raises(tmp_path: Path) -> None:
    path = write("png", tmp_path / "a", sample(20_000))
    raw = bytearray(path.read_bytes())
    for pos in range(100, len(raw) - 100, 997):  # anywhere in the pixel data
        damaged = bytearray(raw)
        damaged[pos] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(CorruptSampleError, match="damaged"):
            decode("png", path)


def test_jpeg_flipped_byte_goes_unnoticed_as_declared(tmp_path: Path) -> None:
    path = write("jpeg", tmp_path / "a", sample(20_000))
    good = decode("jpeg", path)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    damaged = decode("jpeg", path)  # no checksum: different pixels, no error
    assert damaged.shape == good.shape
    assert not np.array_equal(damaged, good)


def test_jpeg_side_limit_is_a_clear_error(tmp_path: Path) -> None:
    class TinyJpeg(JpegFormat):
        max_side = 10

    with pytest.raises(DatasetError, match="at most 10 pixels"):
        TinyJpeg().write(tmp_path / "a", sample(500))
