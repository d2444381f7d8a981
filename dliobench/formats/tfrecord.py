"""TFRecord: the framing TensorFlow writes, read and written without TensorFlow.

Each record is ``uint64 length (LE) | uint32 masked CRC-32C of those 8 bytes | data |
uint32 masked CRC-32C of data``, where data is a serialized ``tf.train.Example`` holding the
sample as the "image" bytes feature (see ``tfexample``). One record per sample, records back
to back. Next to each data file lies ``<file>.idx`` in the text format NVIDIA DALI's
``fn.readers.tfrecord`` takes (what DALI's ``tools/tfrecord2idx`` writes): one line per
record, ``<offset> <size>``, size counting the 16 framing bytes. Reading a sample checks both
CRCs, as TensorFlow's reader does, so damaged bytes never pass as a sample.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

import crc32c
import numpy as np

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats._tfexample import ProtoError, example_prefix, find_image
from dliobench.formats.base import AssembledFormat, ByteRange, Fill, Format, Stored

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEAD = 12    # length + its CRC
_FRAMING = 16  # head + the data's CRC
_MASK_DELTA = 0xA282EAD8
INDEX_SUFFIX = ".idx"


def masked_crc(data: bytes | memoryview, crc: int = 0) -> int:
    """TFRecord's masked CRC-32C of ``data`` (continuing the unmasked ``crc``)."""
    value = crc32c.crc32c(data, crc)
    return (((value >> 15) | (value << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _record_head(sample_bytes: int) -> bytes:
    """What precedes the sample in its record: length, the length's CRC, the Example prefix."""
    length = _LEN.pack(len(example_prefix(sample_bytes)) + sample_bytes)
    return length + _CRC.pack(masked_crc(length)) + example_prefix(sample_bytes)


def _record_size(sample_bytes: int) -> int:
    """Bytes of one framed record holding a sample of ``sample_bytes``."""
    return _FRAMING + len(example_prefix(sample_bytes)) + sample_bytes


def index_path(path: Path) -> Path:
    """The DALI index file of the data file ``path``."""
    return path.with_name(path.name + INDEX_SUFFIX)


def _check_record(buf: memoryview, lenient: bool = False) -> tuple[int, int]:
    """Start and stop of the image in the record at the start of ``buf`` (``lenient``: of
    the whole serialized Example when it holds no "image" feature, and whatever its "size"
    feature says).

    Raises ProtoError with the reason when the record is truncated or damaged.
    """
    if len(buf) < _HEAD:
        raise ProtoError("record is truncated inside its header")
    (length,) = _LEN.unpack_from(buf, 0)
    if _CRC.unpack_from(buf, 8)[0] != masked_crc(buf[:8]):
        raise ProtoError("CRC mismatch in the record's length")
    end = _HEAD + length
    if len(buf) < end + 4:
        raise ProtoError(f"record is truncated: it needs {end + 4} bytes, {len(buf)} are there")
    if _CRC.unpack_from(buf, end)[0] != masked_crc(buf[_HEAD:end]):
        raise ProtoError("CRC mismatch in the record's data")
    try:
        return find_image(buf, _HEAD, end, check_size=not lenient)
    except ProtoError as exc:
        if lenient:
            return _HEAD, end
        raise ProtoError(f"malformed tf.train.Example ({exc})") from None


def parse_record(path: object, buf: memoryview, offset: int = 0,
                 lenient: bool = False) -> tuple[int, int]:
    """Check the record at the start of ``buf``, found at ``offset``; image start, stop.

    Raises CorruptSampleError naming the file and the record's offset (for a sample's byte
    range the offset is relative to it; SampleReader turns it into a file offset).
    """
    try:
        return _check_record(buf, lenient)
    except ProtoError as exc:
        raise CorruptSampleError(str(path), offset, str(exc)) from None


def walk_records(src: Stored, file_size: int, limit: int | None = None) -> list[ByteRange]:
    """The framed records of a file without an index, found by reading each record's length
    (12 bytes, counted, CRC-checked), as TensorFlow's reader does: at most ``limit``."""
    out: list[ByteRange] = []
    offset = 0
    while offset < file_size and (limit is None or len(out) < limit):
        head, got = src.backend.read_range(src.key, offset, _HEAD)
        src.nbytes += got
        if got < _HEAD:
            raise CorruptSampleError(str(src), offset, "record is truncated inside its header")
        if _CRC.unpack_from(head, 8)[0] != masked_crc(head[:8]):
            raise CorruptSampleError(str(src), offset, "CRC mismatch in the record's length "
                                     "(not a TFRecord file, or damaged)")
        size = _FRAMING + _LEN.unpack_from(head, 0)[0]
        if offset + size > file_size:
            raise CorruptSampleError(str(src), file_size, "file is truncated inside a record")
        out.append(ByteRange(offset, size))
        offset += size
    if limit is not None and len(out) < limit:
        raise DatasetError(f"{src} holds {len(out)} records, the manifest says {limit}; "
                           "index the dataset again")
    return out


def read_index(src: Stored, file_size: int, num_samples: int) -> np.ndarray:
    """(num_samples, 2) int64 offsets and sizes from the file's index, checked against it."""
    idx = src.backend.describe(src.side(INDEX_SUFFIX))
    try:
        text = bytes(src.read_side(INDEX_SUFFIX))
    except FileNotFoundError:
        raise DatasetError(f"{idx} is missing; regenerate the dataset with "
                           "`dliobench generate`") from None
    try:
        table = np.array(text.split(), dtype=np.int64).reshape(-1, 2)
    except ValueError:
        raise DatasetError(f"{idx} is not a TFRecord index (lines of 'offset size')") from None
    if len(table) < num_samples:  # more: an existing dataset's file, its first ones are read
        raise DatasetError(f"{idx} lists {len(table)} records, the manifest says "
                           f"{num_samples} samples per file; regenerate the dataset")
    offsets, sizes = table[:, 0], table[:, 1]
    ends = offsets + sizes
    if offsets[0] != 0 or (sizes < _FRAMING).any() or (offsets[1:] != ends[:-1]).any():
        raise DatasetError(f"{idx} does not describe back-to-back records; regenerate it")
    if ends[-1] > file_size:
        raise CorruptSampleError(str(src), file_size, f"file is truncated: the index needs "
                                 f"{int(ends[-1])} bytes")
    if ends[-1] < file_size:
        raise DatasetError(f"{src} holds {file_size - int(ends[-1])} bytes its index does "
                           "not list; regenerate the dataset")
    return table[:num_samples]


class TFRecordFormat(AssembledFormat):
    """Samples as tf.train.Example records in a TFRecord file, with a DALI index file."""

    name = "tfrecord"
    extension = "tfrecord"
    checksummed = True  # each record's masked CRC-32C
    head_bytes = 0  # the layout comes from the index side file
    side_suffixes: tuple[str, ...] = (INDEX_SUFFIX,)

    def configured(self, dataset: DatasetConfig) -> Format:
        """This format; for an existing dataset's files, ``ExistingTFRecords``."""
        super().configured(dataset)
        return EXISTING if dataset.source == "existing" else self

    def assembled_size(self, num_samples: int, sample_bytes: int) -> int | None:
        """Records of one size, back to back."""
        return num_samples * _record_size(sample_bytes)

    def assemble(self, out: memoryview, num_samples: int, sample_bytes: int,
                 fill: Fill) -> int:
        """The records in place: one shared head (length, its CRC, the Example's prefix)
        broadcast to every record, the samples filled between, each data CRC after."""
        stride = _record_size(sample_bytes)
        records = np.frombuffer(out, np.uint8, num_samples * stride).reshape(num_samples, stride)
        head = _record_head(sample_bytes)
        records[:, :len(head)] = np.frombuffer(head, np.uint8)
        samples = records[:, len(head):len(head) + sample_bytes]
        fill(samples)
        prefix_crc = crc32c.crc32c(example_prefix(sample_bytes))
        crcs = np.fromiter((masked_crc(row, prefix_crc) for row in samples), dtype="<u4",
                           count=num_samples)
        records[:, len(head) + sample_bytes:] = crcs.view(np.uint8).reshape(num_samples, 4)
        return num_samples * stride

    def side_file_bytes(self, num_samples: int, sample_bytes: int) -> dict[str, bytes]:
        """``.idx``: one ``offset size`` line per record."""
        stride = _record_size(sample_bytes)
        text = "".join(f"{k * stride} {stride}\n" for k in range(num_samples))
        return {INDEX_SUFFIX: text.encode("ascii")}

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Each whole framed record, from the index file (so its CRCs can be checked)."""
        table = read_index(src, file_size, num_samples)
        return [ByteRange(offset, size) for offset, size in table.tolist()]

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """A zero-copy view of the sample's bytes after checking the record's CRCs.

        ``data`` is a whole one-record file or one record's byte range.
        """
        start, stop = parse_record(src, data)
        if whole_file and stop + 4 != len(data):
            raise CorruptSampleError(str(src), stop + 4, "bytes after the only record; "
                                     "a one-sample file holds exactly one record")
        return np.frombuffer(data[start:stop], dtype=np.uint8)


class ExistingTFRecords(TFRecordFormat):
    """TFRecord files found on storage (the user's own, or DLIO's): a file's DALI index is
    used when it lies beside the file, else its records are walked; a sample is the Example's
    "image" bytes when it has them (DLIO's "size" feature is not checked: DLIO writes the
    image's side length there), else the whole serialized Example. Both CRCs are checked."""

    side_suffixes = ()

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Each framed record, from the index beside the file or by walking the records."""
        if src.backend.size(src.side(INDEX_SUFFIX)) is None:
            return walk_records(src, file_size, num_samples)
        return super().layout(src, head, file_size, num_samples)

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """The sample's bytes after checking the record's CRCs."""
        start, stop = parse_record(src, data, lenient=True)
        return np.frombuffer(data[start:stop], dtype=np.uint8)


FORMAT = TFRecordFormat()
EXISTING = ExistingTFRecords()
