"""TFRecord: real framing (checked against independently computed bytes), DALI's index format,
damaged records that raise, and a file that NVIDIA DALI's own reader parses."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import crc32c
import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats._tfexample import example_prefix, find_image, parse_image, varint
from dliobench.formats.base import stored
from dliobench.formats.tfrecord import FORMAT as FMT
from dliobench.formats.tfrecord import index_path, masked_crc
from dliobench.loaders.base import SampleReader
from dliobench.storage import posix_io as storage


def mask(crc: int) -> int:
    """TFRecord's CRC mask, spelled out independently of the module under test."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) % 2**32


def record(proto: bytes) -> bytes:
    """A TFRecord record around ``proto``, built from the format's definition."""
    length = struct.pack("<Q", len(proto))
    return (length + struct.pack("<I", mask(crc32c.crc32c(length))) + proto
            + struct.pack("<I", mask(crc32c.crc32c(proto))))


def write(path: Path, samples: int, size: int, seed: int = 1) -> np.ndarray:
    data = np.random.default_rng(seed).integers(0, 256, (samples, size), dtype=np.uint8)
    FMT.write(path, data)
    return data


def decode_whole(path: Path) -> np.ndarray:
    view, _ = storage.read_range(path, 0, path.stat().st_size)
    return FMT.decode(stored(path), view, whole_file=True)


# An Example {features {feature {"size": int64_list [3]}, feature {"image": bytes_list ["abc"]}}}
# encoded by hand from the protobuf wire format.
ABC_EXAMPLE = bytes.fromhex(
    "0a21"                                  # Example.features, 33 bytes
    "0a0d" "0a04" "73697a65"                # map entry (13 bytes): key "size"
    "1205" "1a03" "0a01" "03"               #   value: Feature.int64_list: packed [3]
    "0a10" "0a05" "696d616765"              # map entry (16 bytes): key "image"
    "1207" "0a05" "0a03" "616263"           #   value: Feature.bytes_list: ["abc"]
)


def test_masked_crc_matches_the_definition() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert masked_crc(b"123456789") == mask(0xE3069283)
    assert masked_crc(b"56789", crc32c.crc32c(b"1234")) == mask(0xE3069283)


def test_example_encoding_is_the_hand_computed_protobuf() -> None:
    assert example_prefix(3) + b"abc" == ABC_EXAMPLE
    assert find_image(memoryview(ABC_EXAMPLE), 0, len(ABC_EXAMPLE)) == (32, 35)
    assert parse_image(memoryview(ABC_EXAMPLE), 0, len(ABC_EXAMPLE)) == (32, 35)


@pytest.mark.parametrize("size", [1, 127, 128, 300, 16384, 2**21 + 5])
def test_example_round_trip_across_varint_widths(size: int) -> None:
    image = bytes(range(256)) * (size // 256) + bytes(size % 256)
    proto = memoryview(example_prefix(size) + image)
    start, stop = find_image(proto, 0, len(proto))
    assert bytes(proto[start:stop]) == image
    assert parse_image(proto, 0, len(proto)) == (start, stop)  # the general parser agrees
    assert varint(size)[-1] < 0x80 and all(b >= 0x80 for b in varint(size)[:-1])


def test_written_file_is_exact_tfrecord_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    FMT.write(path, np.frombuffer(b"abc", dtype=np.uint8).reshape(1, 3))
    assert path.read_bytes() == record(ABC_EXAMPLE)
    assert index_path(path).read_text() == f"0 {len(ABC_EXAMPLE) + 16}\n"
    assert bytes(decode_whole(path)) == b"abc"


def test_foreign_but_valid_example_is_read() -> None:
    """Field order, unpacked int64s and extra features as other writers may produce."""
    def field(number: int, body: bytes) -> bytes:
        return varint(number << 3 | 2) + varint(len(body)) + body

    def entry(key: bytes, feature: bytes) -> bytes:
        return field(1, field(1, key) + field(2, feature))

    image = entry(b"image", field(1, field(1, b"xyz") + field(1, b"second")))
    size = entry(b"size", field(3, varint(1 << 3) + varint(3)))  # unpacked int64
    label = entry(b"label", field(3, field(1, varint(7))))
    proto = field(1, image + label + size)
    start, stop = find_image(memoryview(proto), 0, len(proto))
    assert proto[start:stop] == b"xyz"


def test_index_matches_dalis_tfrecord2idx(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    write(path, 7, 1000)
    tool = shutil.which("tfrecord2idx") or str(Path(sys.executable).parent / "tfrecord2idx")
    if not Path(tool).exists():
        pytest.skip("DALI's tfrecord2idx tool is not installed")
    # the tool's own fallback when TensorFlow is absent (open() for tf.io.gfile, the same
    # loop): importing TensorFlow in the subprocess took 7 of this test's 7.5 s
    hide_tf = ("import runpy, sys; sys.modules['tensorflow'] = None; sys.argv = sys.argv[1:]; "
               "runpy.run_path(sys.argv[0], run_name='__main__')")
    subprocess.run([sys.executable, "-c", hide_tf, tool, str(path), str(tmp_path / "ref.idx")],
                   check=True)
    assert index_path(path).read_text() == (tmp_path / "ref.idx").read_text()


def test_index_lists_every_framed_record(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    write(path, 5, 777)
    raw = path.read_bytes()
    expected, offset = [], 0
    while offset < len(raw):
        (length,) = struct.unpack_from("<Q", raw, offset)
        expected.append(f"{offset} {length + 16}")
        offset += length + 16
    assert index_path(path).read_text().splitlines() == expected
    ranges = FMT.layout(stored(path), memoryview(b""), len(raw), 5)
    assert [f"{r.offset} {r.length}" for r in ranges] == expected


@pytest.mark.parametrize("odirect", [False, True])
def test_multi_sample_reads_are_zero_copy_views(tmp_path: Path, odirect: bool) -> None:
    path = tmp_path / "a.tfrecord"
    data = write(path, 4, 5000)
    reader = SampleReader.for_paths(FMT, [path], [path.stat().st_size], 4, odirect=odirect)
    for k in (3, 0, 2, 1):
        sample, nbytes = reader.read(k)
        assert np.array_equal(sample, data[k])
        assert nbytes >= 5000
    view, _ = storage.read_range(path, 0, path.stat().st_size)
    start = FMT.layout(stored(path), view, len(view), 4)[1].offset
    sample = FMT.decode(stored(path), view[start:], whole_file=False)
    assert np.shares_memory(sample, np.frombuffer(view, dtype=np.uint8))


@pytest.mark.parametrize("where", [3, 2000, -1], ids=["length", "data", "data-crc"])
def test_damaged_record_names_file_and_record_offset(tmp_path: Path, where: int) -> None:
    path = tmp_path / "a.tfrecord"
    write(path, 1, 4096)
    raw = bytearray(path.read_bytes())
    raw[where] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptSampleError, match="CRC mismatch") as info:
        decode_whole(path)
    assert info.value.path == str(path) and info.value.offset == 0


def test_damaged_record_in_a_multi_sample_file(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    write(path, 3, 4096)
    second = FMT.layout(stored(path), memoryview(b""), path.stat().st_size, 3)[1]
    raw = bytearray(path.read_bytes())
    raw[second.offset + 100] ^= 0x01
    path.write_bytes(bytes(raw))
    reader = SampleReader.for_paths(FMT, [path], [len(raw)], 3)
    reader.read(0)
    with pytest.raises(CorruptSampleError, match="CRC mismatch") as info:
        reader.read(1)
    assert info.value.offset == second.offset  # the damaged record's place in the file


def test_truncated_record_says_truncated(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    write(path, 1, 4096)
    raw = path.read_bytes()
    for cut in (5, 100, len(raw) - 2):
        path.write_bytes(raw[:cut])
        with pytest.raises(CorruptSampleError, match="truncated"):
            decode_whole(path)


def test_malformed_example_with_valid_crcs_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    for proto in (b"\x0a\x7f\x00", b"\x0b\x00", ABC_EXAMPLE.replace(b"image", b"imagf"),
                  ABC_EXAMPLE.replace(b"\x0a\x01\x03", b"\x0a\x01\x04")):
        path.write_bytes(record(proto))
        with pytest.raises(CorruptSampleError, match=r"malformed tf\.train\.Example"):
            decode_whole(path)


def test_bytes_after_a_one_record_file_are_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    path.write_bytes(record(ABC_EXAMPLE) * 2)
    with pytest.raises(CorruptSampleError, match="exactly one record"):
        decode_whole(path)


def test_layout_rejects_a_missing_or_mismatched_index(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    write(path, 3, 100)
    size = path.stat().st_size
    with pytest.raises(DatasetError, match="lists 3 records"):
        FMT.layout(stored(path), memoryview(b""), size, 4)
    with pytest.raises(CorruptSampleError, match="truncated"):
        FMT.layout(stored(path), memoryview(b""), size - 1, 3)
    with pytest.raises(DatasetError, match="does not list"):
        FMT.layout(stored(path), memoryview(b""), size + 1, 3)
    index_path(path).write_text("0 10\n10 x\n")
    with pytest.raises(DatasetError, match="not a TFRecord index"):
        FMT.layout(stored(path), memoryview(b""), size, 2)
    index_path(path).unlink()
    with pytest.raises(DatasetError, match="missing"):
        FMT.layout(stored(path), memoryview(b""), size, 3)


def test_the_generator_commits_the_index_with_the_file(tmp_path: Path) -> None:
    from dliobench.config.load import load
    from dliobench.dataset.file_writer import Fill, write_file
    from dliobench.dataset.layout import DataFile
    from dliobench.storage.posix import PosixBackend

    cfg, _ = load(None, ["dataset.format=tfrecord"])
    written = write_file(FMT, PosixBackend(str(tmp_path)), "a.tfrecord",
                         DataFile(0, "a.tfrecord", 2, 64), Fill.for_dataset(cfg.dataset))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tfrecord", "a.tfrecord.idx"]
    index = (tmp_path / "a.tfrecord.idx").read_bytes()
    assert written.size == (tmp_path / "a.tfrecord").stat().st_size
    assert written.sides == ((len(index), crc32c.crc32c(index)),)


def test_dali_reads_the_files(tmp_path: Path) -> None:
    """NVIDIA DALI's own TFRecord reader parses our records and index (CPU only)."""
    dali = pytest.importorskip("nvidia.dali")
    tfrec = pytest.importorskip("nvidia.dali.tfrecord")
    paths = [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"]
    data = np.concatenate([write(paths[0], 3, 70000, seed=1), write(paths[1], 3, 70000, seed=2)])

    @dali.pipeline_def(batch_size=6, num_threads=1, device_id=None)
    def pipeline() -> tuple[object, object]:
        out = dali.fn.readers.tfrecord(
            path=[str(p) for p in paths], index_path=[str(index_path(p)) for p in paths],
            features={"image": tfrec.FixedLenFeature((), tfrec.string, ""),
                      "size": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
        return out["image"], out["size"]

    pipe = pipeline()
    pipe.build()
    images, sizes = pipe.run()
    for k in range(6):
        assert np.array_equal(np.asarray(images.at(k)), data[k])
        assert int(np.asarray(sizes.at(k))[0]) == 70000
