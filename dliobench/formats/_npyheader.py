"""The ``.npy`` header, parsed from bytes already in memory (no file object, no np.lib.format).

Shared by the formats that hold ``.npy`` data (``npy``; ``npz`` members are ``.npy`` too).
The header numpy writes is a fixed-form dict literal, so a regular expression reads it in a
microsecond or two and identical headers (all files of a dataset) are parsed once; anything
else numpy may write falls back to ``ast.literal_eval``. Layout (numpy's format spec): magic
``\\x93NUMPY``, major, minor, header length (uint16 LE for 1.0, uint32 LE for 2.0 and 3.0), the
dict text padded with spaces and ``\\n``, then the array's bytes.
"""

from __future__ import annotations

import ast
import functools
import re
import struct
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dliobench.base.errors import CorruptSampleError

MAGIC = b"\x93NUMPY"
_PREFIX = struct.Struct("<6sBB")
_LEN16 = struct.Struct("<H")
_LEN32 = struct.Struct("<I")
TEMPLATE_MAX = 4096  # bytes before the data a template holds at most (numpy's headers: ~200)
_DICT = re.compile(rb"\{'descr': '([^']+)', 'fortran_order': (True|False), "
                   rb"'shape': \(((?:\d+, ?)*\d*)\), \}\s*")


@dataclass(frozen=True)
class NpyHeader:
    """What a ``.npy`` header says: where the array's bytes start, their shape and type."""

    data_offset: int  # in the coordinates of the buffer that was parsed
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool

    @property
    def nbytes(self) -> int:
        """Bytes of array data that follow the header."""
        count = 1
        for n in self.shape:
            count *= n
        return count * self.dtype.itemsize


class Template(NamedTuple):
    """A whole file's bytes before its data, as every file of its size in a dataset of
    ``npy`` or ``npz`` holds them when one program wrote them all (numpy writes the same
    headers for the same shape), but for a span the format ignores or checks otherwise (an
    npz entry's time and CRC-32), with where its checksum and data lie:
    ``storage.checked_reads.read_checked`` takes the data of a file that matches it without
    parsing it (the format checked that layout once, on the file it was made from)."""

    head: bytes  # the file's bytes [0:data_start]
    skip_at: int  # head's bytes [skip_at:skip_at + skip_len] may differ from file to file
    skip_len: int
    crc_at: int  # where the file holds its data's CRC-32 (little-endian; -1: no checksum)
    crc_start: int  # the checksummed bytes are [crc_start:data_end]
    data_start: int
    data_end: int


def template(data: memoryview, data_start: int, data_end: int, skip_at: int = 0,
             skip_len: int = 0, crc_at: int = -1, crc_start: int = 0) -> Template | None:
    """The ``Template`` of a whole file ``data`` whose array is ``[data_start:data_end]``;
    None where the file is shorter than that or its headers are longer than ``TEMPLATE_MAX``
    (such files are parsed each time)."""
    if data_end > len(data) or data_start > TEMPLATE_MAX:
        return None
    return Template(bytes(data[:data_start]), skip_at, skip_len, crc_at, crc_start,
                    data_start, data_end)

def parse(path: object, buf: memoryview, start: int = 0) -> NpyHeader:
    """Parse the ``.npy`` header at ``start`` of ``buf`` (the bytes of ``path``).

    Raises CorruptSampleError (naming ``path`` and the offset) when the header is truncated,
    missing or unreadable.
    """
    fixed = start + _PREFIX.size
    if len(buf) < fixed + _LEN16.size:
        raise CorruptSampleError(str(path), len(buf), "file is truncated inside the .npy header")
    magic, major, _ = _PREFIX.unpack_from(buf, start)
    if magic != MAGIC:
        raise CorruptSampleError(str(path), start, "not a .npy file (magic string missing)")
    if major == 1:
        (text_len,) = _LEN16.unpack_from(buf, fixed)
        text_start = fixed + _LEN16.size
    elif major in (2, 3):
        if len(buf) < fixed + _LEN32.size:
            raise CorruptSampleError(str(path), len(buf),
                                     "file is truncated inside the .npy header")
        (text_len,) = _LEN32.unpack_from(buf, fixed)
        text_start = fixed + _LEN32.size
    else:
        raise CorruptSampleError(str(path), start + 6, f"unknown .npy format version {major}")
    end = text_start + text_len
    if len(buf) < end:
        raise CorruptSampleError(str(path), len(buf), "file is truncated inside the .npy header")
    try:
        return _header(bytes(buf[text_start:end]), end)
    except (ValueError, SyntaxError, KeyError, TypeError) as exc:
        raise CorruptSampleError(str(path), text_start,
                                 f"unreadable .npy header ({exc})") from None


@functools.lru_cache(maxsize=256)
def _header(text: bytes, data_offset: int) -> NpyHeader:
    """The header of dict ``text`` whose data start at ``data_offset`` (frozen, so one
    instance serves every file with the same header)."""
    return NpyHeader(data_offset, *_parse_dict(text))


@functools.lru_cache(maxsize=256)
def _parse_dict(text: bytes) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, dtype, fortran_order) from the header's dict text."""
    match = _DICT.fullmatch(text)
    if match is not None:
        descr, fortran, dims = match.groups()
        shape = tuple(int(d) for d in dims.split(b",") if d.strip())
        return shape, np.dtype(descr.decode("latin1")), fortran == b"True"
    meta = ast.literal_eval(text.decode("latin1"))
    if not isinstance(meta, dict):
        raise ValueError("the header is not a dict")
    shape = tuple(int(n) for n in meta["shape"])
    return shape, np.dtype(meta["descr"]), bool(meta["fortran_order"])
