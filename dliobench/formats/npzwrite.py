"""Write an ``.npz`` exactly as ``numpy.savez`` lays it out, without its slow path.

``np.savez`` streams through ``zipfile`` and computes the member's CRC-32 with zlib (~3 GB/s),
and stamps the current time into the zip headers, so two generations of the same data differ.
This writer emits the same structure (one stored ``x.npy`` member, zip64 sizes, numpy's own
``.npy`` header) with ISA-L's CRC, a fixed timestamp (byte-identical files for a seed), and
the array written straight from memory. ``np.load`` reads the result like any npz.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
from isal.isal_zlib import crc32

_NAME = b"x.npy"
_DOS_TIME, _DOS_DATE = 0, (1980 - 1980) << 9 | 1 << 5 | 1  # 1980-01-01 00:00
_VERSION = 45  # zip64
_FULL = 0xFFFFFFFF


def _npy_header(array: np.ndarray) -> bytes:
    """numpy's own .npy header for ``array``."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, np.lib.format.header_data_from_array_1_0(array))
    return out.getvalue()


def write_npz(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as the member ``x`` of an uncompressed npz at ``path``."""
    array = np.ascontiguousarray(array)
    header = _npy_header(array)
    size = len(header) + array.nbytes
    crc = crc32(array.data, crc32(header)) if array.nbytes else crc32(header)
    zip64 = struct.pack("<HHQQ", 1, 16, size, size)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, _VERSION, 0, 0, _DOS_TIME, _DOS_DATE, crc,
                        _FULL, _FULL, len(_NAME), len(zip64)) + _NAME + zip64
    central_offset = len(local) + size
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, _VERSION, _VERSION, 0, 0,
                          _DOS_TIME, _DOS_DATE, crc, _FULL, _FULL, len(_NAME), len(zip64),
                          0, 0, 0, 0, 0) + _NAME + zip64
    with open(path, "wb") as handle:
        handle.write(local)
        handle.write(header)
        handle.write(array.data)
        handle.write(central)
        handle.write(_end_records(central_offset, len(central)))


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
