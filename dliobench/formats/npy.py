"""NumPy ``.npy``: the (num_samples, sample_bytes) uint8 array written by ``numpy.save``.

Any numpy user can ``np.load`` the files. Sample k is row k, contiguous on disk right after
the header, so a sample is one range read and a zero-copy view. (DLIO's npy generator stores
its samples along the *last* axis, (dim1, dim2, num_samples), so a DLIO sample is strided on
disk and can only be read with the whole file; rows keep a sample's bytes together.) The
format has no checksum: damaged bytes are not detected, truncation is.
"""

from __future__ import annotations

import numpy as np

import dliobench.formats._npyheader as npyheader
from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats._npzwrite import array_header
from dliobench.formats.base import ByteRange, ContiguousFormat, Stored


class NpyFormat(ContiguousFormat):
    """Samples as rows of one C-ordered uint8 array in a ``.npy`` file."""

    name = "npy"
    extension = "npy"
    head_bytes = 4096  # numpy pads its header to 64 bytes; 128 is usual
    lossy = False
    checksummed = False
    max_samples_per_file: int | None = None
    envelope_from_shape = True

    def head_size(self, num_samples: int, sample_bytes: int) -> int:
        """numpy's header."""
        return len(array_header((num_samples, sample_bytes)))

    def envelope(self, samples: np.ndarray) -> tuple[bytes, bytes]:
        """The header ``np.save`` writes (C order, no pickle), so ``np.load`` reads the file."""
        return array_header(samples.shape), b""

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Rows of the array as byte ranges, from the header in ``head``."""
        header = _header(src, head)
        rows = header.shape[0] if header.shape else 1
        if rows < num_samples:  # more: an existing dataset's file, its first ones are read
            raise DatasetError(f"{src} holds {rows} samples, the manifest says "
                               f"{num_samples}; regenerate the dataset")
        end = header.data_offset + header.nbytes
        if end > file_size:
            raise CorruptSampleError(str(src), file_size,
                                     f"file is truncated: the array needs {end} bytes")
        row = header.nbytes // rows
        start = header.data_offset
        return [ByteRange(start + k * row, row) for k in range(num_samples)]

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """A zero-copy view of the sample's bytes (a whole file: all of its array)."""
        if not whole_file:
            return np.frombuffer(data, dtype=np.uint8)
        header = _header(src, data)
        end = header.data_offset + header.nbytes
        if end > len(data):
            raise CorruptSampleError(str(src), len(data),
                                     f"file is truncated: the array needs {end} bytes")
        return np.frombuffer(data[header.data_offset:end], dtype=np.uint8)

    def whole_template(self, src: Stored, data: memoryview) -> npyheader.Template | None:
        """The template (``npyheader.Template``) of a whole file ``decode`` has read: its
        header, which every file of a generated dataset of its size repeats, so the others
        are read with no parsing (``SampleReader.read_many``); None for a header too long."""
        header = _header(src, data)
        return npyheader.template(data, header.data_offset, header.data_offset + header.nbytes)


def _header(path: object, buf: memoryview) -> npyheader.NpyHeader:
    """The file's header, refusing arrays whose rows are not contiguous samples."""
    header = npyheader.parse(path, buf)
    if header.fortran_order and len(header.shape) > 1:
        raise DatasetError(f"{path} is a Fortran-ordered array; dliobench reads C-ordered "
                           "(num_samples, sample_bytes) arrays; regenerate the dataset")
    return header


FORMAT = NpyFormat()
