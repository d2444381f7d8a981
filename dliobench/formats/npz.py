"""NumPy ``.npz``: one stored array ``x`` of shape (samples, bytes), as ``numpy.savez`` writes;
an existing dataset's files are read as its ``Split`` says (DLIO's: ``x[..., i]``).

Reading skips ``np.load``'s zipfile machinery (about 70 us per small file): the zip local
header and the ``.npy`` header are parsed from the bytes already in memory, the array is a
zero-copy view, and the member's CRC-32 is checked when the whole member was read, as
``np.load`` would. A whole file whose bytes before the member's data are those of a file
already parsed (``whole_template``) is not parsed again: the C extension compares them and
checks the CRC-32 (``SampleReader.read_many``).
"""

from __future__ import annotations

import copy
import math
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from isal.isal_zlib import crc32  # zlib's CRC-32 at ~25 GB/s, not ~3: decides large-sample speed

import dliobench.formats._npyheader as npyheader
import dliobench.formats._npzwrite as npzwrite
from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats.base import ByteRange, ContiguousFormat, Format, Stored

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig

_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_TIME_AT, _CRC_AT = 10, 14  # a local header's time and date (np.savez: the time written;
# neither np.load nor this reader looks at them), then its CRC-32
_ZIP64_ID = 0x0001
_FULL = 0xFFFFFFFF  # a size kept in the zip64 extra field (np.savez forces zip64)
_END = (b"PK\x01\x02", b"PK\x05\x06")  # the central directory: no more members
CHUNK = 4096
ENOUGH = 1024  # bytes past an offset that hold its zip or .npy header (numpy's: ~128)
MEMBER, AXIS = "x", -1  # DLIO's split: x[..., i] (see ``Split``)

Read = Callable[[int, int], memoryview]  # (offset, length) -> the file's bytes there


@dataclass(frozen=True)
class Split:
    """How an existing npz file is cut into samples: ``member``'s samples along ``axis``,
    or the member whole as one sample (``axis`` None).

    The default is DLIO's: its generator writes ``x`` of shape (dim1, dim2, samples) and
    ``y`` the labels, and its reader takes ``x[..., i]`` and never reads ``y``
    (argonne-lcf/dlio_benchmark dlio_benchmark/data_generator/npz_generator.py and
    reader/npz_reader.py @03bded3; the same in the reader @85183dd, the generator @486406f).
    """

    member: str = MEMBER
    axis: int | None = AXIS

    def to_json(self) -> dict[str, object]:
        """As the index records it."""
        return {"member": self.member, "axis": self.axis}


@dataclass(frozen=True)
class Located:
    """Where a member's array lies in the file, and what it is."""

    start: int  # the zip member's data (the .npy header) in the file
    header: int  # the zip member's local header in the file (its CRC-32 at +14)
    crc: int  # the zip entry's CRC-32 of the member's data
    data_offset: int  # the array's bytes in the file
    nbytes: int
    shape: tuple[int, ...]
    fortran_order: bool


def _member_at(path: object, buf: memoryview, at: int) -> tuple[str, int, int, int] | None:
    """(name, data offset, stored size, CRC-32) of the zip member whose local header starts
    at ``at`` of ``buf``; None where the central directory starts (no more members)."""
    if len(buf) < at + 4:
        raise CorruptSampleError(str(path), len(buf), "file is truncated inside the zip header")
    if bytes(buf[at:at + 4]) in _END:
        return None
    if len(buf) < at + _LOCAL.size:
        raise CorruptSampleError(str(path), len(buf), "file is truncated inside the zip header")
    sig, _, flags, method, _, _, crc, size, _, name_len, extra_len = _LOCAL.unpack_from(buf, at)
    if sig != b"PK\x03\x04":
        raise CorruptSampleError(str(path), at, "not an npz file (zip signature missing)")
    if method != 0:
        raise DatasetError(f"{path} is a compressed npz; dliobench reads stored (np.savez) npz")
    if flags & 0x8:
        raise DatasetError(f"{path} uses zip data descriptors; write it with np.savez to a file")
    name_at = at + _LOCAL.size
    data = name_at + name_len + extra_len
    if len(buf) < data:
        raise CorruptSampleError(str(path), len(buf), "file is truncated inside the zip header")
    if size == _FULL:
        size = _zip64_size(path, buf[name_at + name_len:data], at)
    name = bytes(buf[name_at:name_at + name_len]).decode("utf-8", "replace")
    return name.removesuffix(".npy"), data, size, crc


def _zip64_size(path: object, extra: memoryview, at: int) -> int:
    """The stored size in a local header's zip64 extra field (uncompressed size first)."""
    k = 0
    while k + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, k)
        if kind == _ZIP64_ID and length >= 16:
            return int(struct.unpack_from("<Q", extra, k + 12)[0])
        k += 4 + length
    raise CorruptSampleError(str(path), at, "zip64 member without its sizes")


def members(path: object, read: Read) -> Iterator[tuple[str, int, int, int, int]]:
    """The file's zip members in order: (name, data offset, stored size, CRC-32, local
    header offset)."""
    at = 0
    while True:
        found = _member_at(path, read(at, CHUNK), 0)
        if found is None:
            return
        name, data, size, crc = found
        yield name, at + data, size, crc, at
        at += data + size


def locate(path: object, read: Read, name: str) -> Located:
    """The array of member ``name`` (``.npy`` suffix left out), from its headers.

    Raises DatasetError naming the members the file has when it has no such member.
    """
    seen = []
    for found, start, _, crc, at in members(path, read):
        if found == name:
            header = npyheader.parse(path, read(start, CHUNK), 0)
            return Located(start, at, crc, start + header.data_offset, header.nbytes,
                           header.shape, header.fortran_order)
        seen.append(found)
    raise DatasetError(f"{path} has no member {name!r} (it holds {', '.join(seen) or 'none'}); "
                       "set dataset.npz_member to the member holding the samples")


def samples_along(path: object, located: Located, axis: int) -> int:
    """Samples of the array along ``axis``, each of which must be one byte range.

    Raises DatasetError (one sentence) for an axis the array lacks, or samples interleaved
    in the file (DLIO's ``x[..., i]`` of several samples).
    """
    shape = located.shape or (1,)
    if not -len(shape) <= axis < len(shape):
        raise DatasetError(f"{path}: its member has shape {shape}, which has no axis {axis}; "
                           f"set dataset.npz_sample_axis between {-len(shape)} and "
                           f"{len(shape) - 1}")
    axis %= len(shape)
    count = shape[axis]
    outer = shape[axis + 1:] if located.fortran_order else shape[:axis]
    if count > 1 and math.prod(outer) > 1:
        whole = f"{located.nbytes:,}"
        raise DatasetError(
            f"{path} holds {count} samples along axis {axis - len(shape)} of its member of "
            f"shape {shape}, interleaved in the file, and dliobench reads a sample as one "
            f"byte range; set dataset.npz_sample_axis=0 ({shape[0]} samples of "
            f"{located.nbytes // max(1, shape[0]):,} B) or dataset.num_samples_per_file=1 "
            f"(the member whole, {whole} B)")
    return count


class NpzFormat(ContiguousFormat):
    """Samples as byte ranges of one array of an uncompressed npz: the rows of ``x`` as
    dliobench generates it, or an existing dataset's ``Split`` (``configured``)."""

    name = "npz"
    extension = "npz"
    checksummed = True  # the zip entry's CRC-32
    head_bytes = CHUNK
    member = MEMBER
    axis = 0  # dliobench writes a sample per row

    def configured(self, dataset: DatasetConfig) -> Format:
        """This format; for an existing dataset, reading its member along its axis (the npz
        keys do not apply to the files dliobench generates: ``existing.adopt`` refuses them)."""
        super().configured(dataset)
        asked = (dataset.npz_member, dataset.npz_sample_axis)
        if dataset.source != "existing" or asked == (self.member, self.axis):
            return self
        out = copy.copy(self)
        out.member, out.axis = asked
        return out

    def head_size(self, num_samples: int, sample_bytes: int) -> int:
        """Zip local header and .npy header."""
        return npzwrite.head_size((num_samples, sample_bytes))

    def envelope(self, samples: np.ndarray) -> tuple[bytes, bytes]:
        """The layout np.savez writes (np.load reads it), with a fixed timestamp."""
        return npzwrite.envelope(samples)

    def _locate(self, src: Stored, buf: memoryview, file_size: int) -> Located:
        """The member's array, from ``buf`` (the file's first bytes, or all of them) and, for
        a member further on, the file's bytes there (read through ``src``, counted)."""
        def read(offset: int, length: int) -> memoryview:
            if len(buf) - offset >= min(length, ENOUGH) or len(buf) >= file_size:
                return buf[offset:offset + length]
            data, got = src.backend.read_range(src.key, offset,
                                               max(0, min(length, file_size - offset)))
            src.nbytes += got
            return data

        return locate(src, read, self.member)

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """The samples of the member (along ``axis``) as byte ranges; one sample: all of it."""
        found = self._locate(src, head, file_size)
        rows = samples_along(src, found, self.axis) if num_samples != 1 else 1
        if rows < num_samples:  # more: an existing dataset's file, its first ones are read
            raise DatasetError(f"{src} holds {rows} samples, the manifest says {num_samples}; "
                               "regenerate the dataset or index it again")
        row = found.nbytes // rows
        if found.data_offset + found.nbytes > file_size:
            raise CorruptSampleError(str(src), file_size, "file is truncated")
        return [ByteRange(found.data_offset + k * row, row) for k in range(num_samples)]

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """A view of the sample's bytes; whole files are CRC-checked."""
        if not whole_file:
            return np.frombuffer(data, dtype=np.uint8)
        found = self._locate(src, data, len(data))
        end = found.data_offset + found.nbytes
        if end > len(data):
            raise CorruptSampleError(str(src), len(data),
                                     f"file is truncated: the array needs {end} bytes")
        if crc32(data[found.start:end]) != found.crc:
            raise CorruptSampleError(str(src), found.start, "CRC-32 mismatch in the npz member")
        return np.frombuffer(data[found.data_offset:end], dtype=np.uint8)

    def whole_template(self, src: Stored, data: memoryview) -> npyheader.Template | None:
        """The template (``npyheader.Template``) of a whole file ``decode`` has read: its
        bytes before the member's data (zip and .npy headers, and any member before it),
        which every file of a generated dataset of its size repeats but for the zip entry's
        time and CRC-32, so the others are read with no parsing, their CRC-32 checked in C
        (``SampleReader.read_many``); None for a member further on than a header's length."""
        found = self._locate(src, data, len(data))
        return npyheader.template(data, found.data_offset, found.data_offset + found.nbytes,
                                  skip_at=found.header + _TIME_AT, skip_len=8,
                                  crc_at=found.header + _CRC_AT, crc_start=found.start)


FORMAT = NpzFormat()
