"""DLIO's ``indexed_binary``: raw sample bytes back to back, with two index side files.

The on-disk layout of DLIO's ``IndexedBinaryGenerator`` (argonne-lcf/dlio_benchmark,
``data_generator/indexed_binary_generator.py``; read by ``reader/indexed_binary_reader.py``):

- ``<file>``: the samples' bytes, concatenated, nothing else;
- ``<file>.off.idx``: each sample's byte offset in ``<file>``, one 8-byte unsigned integer per
  sample (DLIO packs native ``Q``; written here explicitly little-endian, which is the same
  bytes on the x86 and ARM machines DLIO runs on);
- ``<file>.sz.idx``: each sample's size in bytes, in the same encoding.

Sizes may differ between the samples of a file; dliobench writes one size per file. The
layout comes from the side files, so ``head_bytes`` is 0. No checksum: damaged bytes are not
detected, truncation is.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dliobench.errors import CorruptSampleError, DatasetError
from dliobench.formats.base import ByteRange, ContiguousFormat
from dliobench.storage import posix as storage

OFFSETS_SUFFIX = ".off.idx"
SIZES_SUFFIX = ".sz.idx"
_U64 = np.dtype("<u8")


def read_index(side: Path, count: int) -> np.ndarray:
    """The ``count`` uint64 entries of the index side file ``side``, checked for length."""
    want = count * _U64.itemsize
    try:  # one entry more than needed, to notice an index longer than the manifest says
        data, got = storage.read_range(side, 0, want + _U64.itemsize)
    except FileNotFoundError:
        raise DatasetError(f"{side} is missing; regenerate the dataset with "
                           "`dliobench generate`") from None
    if got < want:
        raise CorruptSampleError(str(side), got, f"index is truncated: {count} entries "
                                 f"need {want} bytes")
    if got > want:
        raise DatasetError(f"{side} lists more samples than the manifest's {count} per file; "
                           "regenerate the dataset")
    return np.frombuffer(data, dtype=_U64)


class IndexedBinaryFormat(ContiguousFormat):
    """Raw samples in one file; offsets and sizes as uint64 arrays in two side files."""

    name = "indexed_binary"
    extension = "indexed_binary"
    head_bytes = 0  # the layout comes from the index side files
    side_suffixes = (OFFSETS_SUFFIX, SIZES_SUFFIX)
    lossy = False
    checksummed = False
    max_samples_per_file: int | None = None

    def write_side_files(self, path: Path, num_samples: int, sample_bytes: int) -> None:
        """Write ``<path>.off.idx`` and ``<path>.sz.idx`` (the data file is the bare samples)."""
        count, size = num_samples, sample_bytes
        offsets_path, sizes_path = self.side_files(path)
        (np.arange(count, dtype=_U64) * size).tofile(offsets_path)
        np.full(count, size, dtype=_U64).tofile(sizes_path)

    def layout(self, path: Path, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Each sample's range, from the offsets and sizes side files."""
        offsets_path, sizes_path = self.side_files(path)
        offsets = read_index(offsets_path, num_samples)
        sizes = read_index(sizes_path, num_samples)
        ends = offsets + sizes
        beyond = np.flatnonzero(ends > file_size)
        if beyond.size:
            k = int(beyond[0])
            raise CorruptSampleError(str(path), file_size, f"file is truncated: sample {k} "
                                     f"ends at byte {int(ends[k])}")
        return [ByteRange(o, s) for o, s in zip(offsets.tolist(), sizes.tolist(), strict=True)]

    def decode(self, path: Path, data: memoryview, whole_file: bool) -> np.ndarray:
        """A zero-copy view of the sample's bytes.

        A whole one-sample file is checked against its size index (an 8-byte read of
        ``<path>.sz.idx``, not counted as sample bytes): raw bytes cannot show truncation.
        """
        if not whole_file:
            return np.frombuffer(data, dtype=np.uint8)
        size = int(read_index(self.side_files(path)[1], 1)[0])
        if len(data) < size:
            raise CorruptSampleError(str(path), len(data),
                                     f"file is truncated: the sample needs {size} bytes")
        return np.frombuffer(data[:size], dtype=np.uint8)


FORMAT = IndexedBinaryFormat()
