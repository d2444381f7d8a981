"""NumPy ``.npz``: one stored array ``x`` of shape (samples, bytes), as ``numpy.savez`` writes.

Reading skips ``np.load``'s zipfile machinery (about 70 us per small file): the zip local
header and the ``.npy`` header are parsed from the bytes already in memory, the array is a
zero-copy view, and the member's CRC-32 is checked when the whole member was read, as
``np.load`` would.
"""

from __future__ import annotations

import struct

import numpy as np
from isal.isal_zlib import crc32  # zlib's CRC-32 at ~25 GB/s, not ~3: decides large-sample speed

from dliobench.errors import CorruptSampleError, DatasetError
from dliobench.formats import _npyheader as npyheader
from dliobench.formats import _npzwrite as npzwrite
from dliobench.formats.base import ByteRange, ContiguousFormat, Stored

_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_ZIP64_ID = 0x0001


def _member(path: object, buf: memoryview) -> tuple[int, int]:
    """Offset of the first zip member's data and its expected CRC-32."""
    if len(buf) < _LOCAL.size:
        raise CorruptSampleError(str(path), len(buf), "file is truncated inside the zip header")
    sig, _, flags, method, _, _, crc, _, _, name_len, extra_len = _LOCAL.unpack_from(buf, 0)
    if sig != b"PK\x03\x04":
        raise CorruptSampleError(str(path), 0, "not an npz file (zip signature missing)")
    if method != 0:
        raise DatasetError(f"{path} is a compressed npz; dliobench reads stored (np.savez) npz")
    if flags & 0x8:
        raise DatasetError(f"{path} uses zip data descriptors; write it with np.savez to a file")
    return _LOCAL.size + name_len + extra_len, crc


class NpzFormat(ContiguousFormat):
    """Samples as rows of one uint8 array ``x`` in an uncompressed npz."""

    name = "npz"
    extension = "npz"
    checksummed = True  # the zip entry's CRC-32
    head_bytes = 4096

    def head_size(self, num_samples: int, sample_bytes: int) -> int:
        """Zip local header and .npy header."""
        return npzwrite.head_size((num_samples, sample_bytes))

    def envelope(self, samples: np.ndarray) -> tuple[bytes, bytes]:
        """The layout np.savez writes (np.load reads it), with a fixed timestamp."""
        return npzwrite.envelope(samples)

    def _locate(self, path: object, buf: memoryview) -> tuple[int, int, int, tuple[int, ...], int]:
        member, crc = _member(path, buf)
        header = npyheader.parse(path, buf, member)
        return member, header.data_offset, header.nbytes, header.shape, crc

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Rows of ``x`` as byte ranges."""
        _, data, nbytes, shape, _ = self._locate(src, head)
        rows = shape[0] if shape and num_samples != 1 else 1  # one sample: any shape
        if rows < num_samples:  # more: an existing dataset's file, its first ones are read
            raise DatasetError(f"{src} holds {shape[0] if shape else 0} samples, the manifest "
                               f"says {num_samples}; regenerate the dataset")
        row = nbytes // rows
        if data + nbytes > file_size:
            raise CorruptSampleError(str(src), file_size, "file is truncated")
        return [ByteRange(data + k * row, row) for k in range(num_samples)]

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """A view of the sample's bytes; whole files are CRC-checked."""
        if not whole_file:
            return np.frombuffer(data, dtype=np.uint8)
        member, start, nbytes, _, crc = self._locate(src, data)
        end = start + nbytes
        if end > len(data):
            raise CorruptSampleError(str(src), len(data),
                                     f"file is truncated: the array needs {end} bytes")
        if crc32(data[member:end]) != crc:
            raise CorruptSampleError(str(src), member, "CRC-32 mismatch in the npz member")
        return np.frombuffer(data[start:end], dtype=np.uint8)


FORMAT = NpzFormat()
