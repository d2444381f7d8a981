"""The bytes ``numpy.savez`` puts around an array, without its slow path.

``np.savez`` streams through ``zipfile`` and computes the member's CRC-32 with zlib (~3 GB/s),
and stamps the current time into the zip headers, so two generations of the same data differ.
These functions give the same structure (one stored ``x.npy`` member, zip64 sizes, numpy's
own ``.npy`` header) with ISA-L's CRC and a fixed timestamp (byte-identical files for a
seed), as a head and a tail to write around the array's bytes: the generator fills the array
in place between them. ``np.load`` reads the result like any npz.
"""

from __future__ import annotations

import functools
import io
import struct

import numpy as np
from isal.isal_zlib import crc32

_NAME = b"x.npy"
_DOS_TIME, _DOS_DATE = 0, (1980 - 1980) << 9 | 1 << 5 | 1  # 1980-01-01 00:00
_VERSION = 45  # zip64
_FULL = 0xFFFFFFFF
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_ZIP64 = struct.Struct("<HHQQ")


@functools.lru_cache(maxsize=256)  # ~13 us each: a fifth of a small file's Python work
def array_header(shape: tuple[int, ...]) -> bytes:
    """numpy's own .npy header (what ``np.save`` writes) for a C-ordered uint8 array."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)),
              "fortran_order": False, "shape": shape})
    return out.getvalue()


def head_size(shape: tuple[int, ...]) -> int:
    """Bytes of the zip local header plus the .npy header before the array's data."""
    return _LOCAL.size + len(_NAME) + _ZIP64.size + len(array_header(shape))


def envelope(array: np.ndarray) -> tuple[bytes, bytes]:
    """The bytes before and after the C-ordered uint8 ``array`` that make it an npz."""
    header = array_header(array.shape)
    size = len(header) + array.nbytes
    crc = crc32(array.data, crc32(header)) if array.nbytes else crc32(header)
    zip64 = _ZIP64.pack(1, 16, size, size)
    local = _LOCAL.pack(0x04034B50, _VERSION, 0, 0, _DOS_TIME, _DOS_DATE, crc, _FULL, _FULL,
                        len(_NAME), len(zip64)) + _NAME + zip64
    central_offset = len(local) + size
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, _VERSION, _VERSION, 0, 0,
                          _DOS_TIME, _DOS_DATE, crc, _FULL, _FULL, len(_NAME), len(zip64),
                          0, 0, 0, 0, 0) + _NAME + zip64
    return local + header, central + _end_records(central_offset, len(central))


def _end_records(central_offset: int, central_size: int) -> bytes:
    """End of central directory (preceded by the zip64 records when offsets need them)."""
    if central_offset < _FULL:
        return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, central_size, central_offset, 0)
    zip64_offset = central_offset + central_size
    record = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, _VERSION, _VERSION, 0, 0, 1, 1,
                         central_size, central_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, zip64_offset, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, central_size, _FULL, 0)
    return record + locator + end
