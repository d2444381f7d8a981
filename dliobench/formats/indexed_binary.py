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

import numpy as np

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats.base import ByteRange, ContiguousFormat, Stored

OFFSETS_SUFFIX = ".off.idx"
SIZES_SUFFIX = ".sz.idx"
_U64 = np.dtype("<u8")


def read_index(src: Stored, suffix: str, count: int) -> np.ndarray:
    """The ``count`` uint64 entries of the data file's index side file ``suffix``, checked for
    length (its bytes counted in ``src``)."""
    want = count * _U64.itemsize
    side = src.backend.describe(src.side(suffix))
    try:  # one entry more than needed, to notice an index longer than the manifest says
        data = src.read_side(suffix, want + _U64.itemsize)
        got = len(data)
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

    def side_file_bytes(self, num_samples: int, sample_bytes: int) -> dict[str, bytes]:
        """``.off.idx`` and ``.sz.idx`` (the data file is the bare samples)."""
        count, size = num_samples, sample_bytes
        return {OFFSETS_SUFFIX: (np.arange(count, dtype=_U64) * size).tobytes(),
                SIZES_SUFFIX: np.full(count, size, dtype=_U64).tobytes()}

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Each sample's range, from the offsets and sizes side files."""
        offsets = read_index(src, OFFSETS_SUFFIX, num_samples)
        sizes = read_index(src, SIZES_SUFFIX, num_samples)
        ends = offsets + sizes
        beyond = np.flatnonzero(ends > file_size)
        if beyond.size:
            k = int(beyond[0])
            raise CorruptSampleError(str(src), file_size, f"file is truncated: sample {k} "
                                     f"ends at byte {int(ends[k])}")
        return [ByteRange(o, s) for o, s in zip(offsets.tolist(), sizes.tolist(), strict=True)]

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """A zero-copy view of the sample's bytes.

        A whole one-sample file is checked against its size index (an 8-byte read of
        ``.sz.idx``, counted with the sample): raw bytes cannot show truncation.
        """
        if not whole_file:
            return np.frombuffer(data, dtype=np.uint8)
        size = int(read_index(src, SIZES_SUFFIX, 1)[0])
        if len(data) < size:
            raise CorruptSampleError(str(src), len(data),
                                     f"file is truncated: the sample needs {size} bytes")
        return np.frombuffer(data[:size], dtype=np.uint8)


FORMAT = IndexedBinaryFormat()
