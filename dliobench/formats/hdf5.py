"""HDF5 through h5py: one (num_samples, sample_bytes) uint8 dataset ``records`` per file.

The layout of DLIO's HDF5 generator (argonne-lcf/dlio_benchmark, DLIO 2.0
``data_generator/hdf5_generator.py``; its reader reads ``file['records'][index]``): dataset
``records`` holding the samples along the first axis, and ``labels``, ``num_samples`` int64
zeros. DLIO stores a sample as a (dim, dim) square; here it is one row of bytes. Optional
chunking and compression (gzip with a level, lzf) follow DLIO's dataset keys (see
``Hdf5Format.from_options``); chunked files also get HDF5's fletcher32 checksum filter by
default, so damaged chunks raise instead of passing as samples.

Reading goes through h5py, as a training job's would, with the bytes counted at the read
call: h5py reads through a file object (``storage.CountingFile``) and each ``read_sample``
returns what its ``records[index]`` made HDF5 read. Opening an HDF5 file costs 0.2-0.6 ms of
CPU (more than reading a 64 KiB sample), so open files are kept per process, as training
jobs keep them: a file's metadata is read (and counted) once, then each sample costs its own
bytes (its chunks, when chunked). Kept files are checked against the path's inode, size and
mtime on every read, so a regenerated file is reopened. HDF5's chunk cache is turned off: on
files kept open it would serve later epochs from memory, which must never pass as storage
speed; so a sample in a chunk of several samples costs the whole chunk each time.

O_DIRECT: HDF5's reads are small and unaligned, so each is served by an O_DIRECT read of the
aligned blocks around it (``storage.read_range``); those whole blocks are what is counted.
Within one sample's read, the last small span is kept, so the many tiny metadata reads that
fall in one block cost one block. (Reading the whole file for every sample, the simpler
alternative, would read a multi-sample file once per sample.)
"""

from __future__ import annotations

import atexit
import io
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import h5py
import numpy as np

from dliobench.base.errors import ConfigError, CorruptSampleError, DatasetError
from dliobench.formats.base import ByteRange, EncodedFormat, Stored
from dliobench.storage.backend import CountingReader

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig

DATASET = "records"
LABELS = "labels"
COMPRESSIONS = (None, "gzip", "lzf")
_MAX_CHUNK = 2**32 - 1  # HDF5's limit on one chunk's bytes
_NO_CHUNK_CACHE = 0  # rdcc_nbytes: no chunks kept in memory between reads


@dataclass
class _Handle:
    """One open HDF5 file of this process: its counted file object and dataset."""

    stamp: tuple[int, ...]  # the object's version when opened (POSIX: inode, size, mtime)
    raw: CountingReader
    file: h5py.File
    dset: h5py.Dataset
    counted: int = 0  # raw.nbytes already returned to callers
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        """Close the HDF5 file and its file object."""
        self.closed = True
        self.file.close()
        self.raw.close()


class Hdf5Format(EncodedFormat):
    """Samples as rows of a uint8 HDF5 dataset; contiguous and uncompressed by default."""

    name = "hdf5"
    extension = "hdf5"
    head_bytes = 0  # h5py reads the file itself (read_sample)
    reads_itself = True

    def __init__(self, chunk_samples: int = 0, chunk_bytes: int = 0,
                 compression: str | None = None, compression_level: int = 4,
                 fletcher32: bool | None = None, dataset: str = DATASET,
                 max_open_files: int = 64) -> None:
        """Storage options of the files written.

        chunk_samples: samples per chunk (0: not chunked by samples); chunk_bytes: chunks of
        one sample's first bytes (DLIO's chunk_size); both 0 and no compression: contiguous.
        compression: None, "gzip" (with compression_level 0-9) or "lzf"; it needs chunks,
        one sample per chunk unless told. fletcher32: checksum every chunk (default: when
        chunked). max_open_files: files kept open per process for reading.
        """
        if compression not in COMPRESSIONS:
            raise ConfigError(f"hdf5 compression '{compression}' is not supported; "
                              "use none, gzip or lzf")
        if chunk_samples < 0 or chunk_bytes < 0 or (chunk_samples and chunk_bytes):
            raise ConfigError("hdf5 chunks: give chunk_samples or chunk_bytes (>= 0), not both")
        if compression == "gzip" and not 0 <= compression_level <= 9:
            raise ConfigError(f"gzip compression_level {compression_level} is not in 0-9")
        self.chunk_samples = chunk_samples
        self.chunk_bytes = chunk_bytes
        self.compression = compression
        self.compression_level = compression_level
        self.chunked = bool(chunk_samples or chunk_bytes or compression or fletcher32)
        self.fletcher32 = self.chunked if fletcher32 is None else fletcher32
        self.checksummed = self.fletcher32
        self.dataset = dataset
        self.max_open_files = max(1, max_open_files)
        self._handles: OrderedDict[tuple[str, bool], _Handle] = OrderedDict()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        _INSTANCES.add(self)

    @classmethod
    def from_options(cls, enable_chunking: bool = False, chunk_size: int = 0,
                     compression: str | None = "none", compression_level: int = 4,
                     chunk_samples: int = 0) -> Hdf5Format:
        """The format for DLIO's dataset keys (DLIO 2.0 semantics).

        ``enable_chunking`` with ``chunk_size`` (elements, i.e. bytes of uint8, per chunk,
        within one sample: DLIO chunks (1, d, d) with d*d ~ chunk_size); ``compression``
        none/gzip/lzf (DLIO's bz2, zip, xz have no HDF5 filter in h5py); ``chunk_samples``
        is ours: whole samples per chunk, instead of ``chunk_size``.
        """
        codec = None if compression in (None, "none", "") else str(compression).lower()
        if enable_chunking and not (chunk_size or chunk_samples):
            raise ConfigError("dataset.chunk_size must be > 0 when dataset.enable_chunking "
                              "is true")
        chunk_bytes = chunk_size if enable_chunking and not chunk_samples else 0
        return cls(chunk_samples=chunk_samples, chunk_bytes=chunk_bytes, compression=codec,
                   compression_level=compression_level)

    def configured(self, dataset: DatasetConfig) -> Hdf5Format:
        """The format for the dataset's chunking and compression keys (self when unset)."""
        if not (dataset.enable_chunking or dataset.compression != "none"):
            return self
        compressed = dataset.compression != "none"
        return Hdf5Format.from_options(
            enable_chunking=dataset.enable_chunking, chunk_size=dataset.chunk_size,
            compression=dataset.compression, compression_level=dataset.compression_level,
            chunk_samples=1 if compressed and not dataset.enable_chunking else 0)

    def chunk_shape(self, num_samples: int, sample_bytes: int) -> tuple[int, int] | None:
        """The chunk shape of a file of this many samples (None: contiguous)."""
        if not self.chunked:
            return None
        size = max(sample_bytes, 1)
        if self.chunk_bytes:
            return 1, min(self.chunk_bytes, size, _MAX_CHUNK)
        if size > _MAX_CHUNK:
            raise ConfigError(f"hdf5 cannot chunk {sample_bytes}-byte samples whole "
                              "(4 GiB per chunk at most); set dataset.chunk_size")
        rows = min(self.chunk_samples or 1, max(num_samples, 1), _MAX_CHUNK // size)
        return rows, size

    def encode(self, samples: np.ndarray) -> memoryview:
        """The file holding ``records`` and DLIO's ``labels``, built by h5py in memory
        (byte-identical for equal input). Built in memory, it is written by Python: HDF5
        failing to write to a full disk would print its errors from finalizers (and once
        crashed), where a Python write raises one OSError."""
        rows = np.ascontiguousarray(samples, dtype=np.uint8).reshape(len(samples), -1)
        level = self.compression_level if self.compression == "gzip" else None
        image = io.BytesIO()
        with h5py.File(image, "w") as out:
            out.create_dataset(self.dataset, data=rows, chunks=self.chunk_shape(*rows.shape),
                               compression=self.compression, compression_opts=level,
                               fletcher32=self.fletcher32, track_times=False)
            out.create_dataset(LABELS, data=np.zeros(len(rows), dtype=np.int64),
                               track_times=False)
        return image.getbuffer()

    def read_sample(self, src: Stored, file_size: int, num_samples: int, index: int,
                    odirect: bool) -> tuple[np.ndarray, int]:
        """Sample ``index`` read by h5py, and the bytes h5py read from storage to get it."""
        while True:
            handle = self._handle(src, file_size, num_samples, odirect)
            with handle.lock:
                if handle.closed:  # closed by another thread to make room; open it again
                    continue
                handle.raw.forget()
                try:
                    sample = handle.dset[index]
                except (OSError, RuntimeError, ValueError) as exc:
                    raise CorruptSampleError(str(src), _sample_offset(handle.dset, index),
                                             f"h5py cannot read sample {index} ({exc})") \
                        from None
                nbytes = handle.raw.nbytes - handle.counted
                handle.counted = handle.raw.nbytes
            return sample.reshape(-1).view(np.uint8), nbytes

    def _handle(self, src: Stored, file_size: int, num_samples: int, odirect: bool) -> _Handle:
        """The process's open handle of ``src``, opened (or reopened if changed) as needed."""
        st = src.backend.stat(src.key)
        if st is None:
            raise FileNotFoundError(str(src))
        if st.size < file_size:
            raise CorruptSampleError(str(src), st.size, f"file is truncated: "
                                     f"{st.size} of {file_size} bytes are there")
        stamp = st.version
        key = (str(src), odirect)
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's handles are not ours
                self._handles, self._pid = OrderedDict(), os.getpid()
            handle = self._handles.get(key)
            if handle is not None and handle.stamp == stamp:
                self._handles.move_to_end(key)
                return handle
            if handle is not None:
                self._drop(key)
            handle = self._open(src, stamp, num_samples, odirect)
            self._handles[key] = handle
            while len(self._handles) > self.max_open_files:
                self._drop(next(iter(self._handles)))
            return handle

    def _open(self, src: Stored, stamp: tuple[int, ...], num_samples: int,
              odirect: bool) -> _Handle:
        path = str(src)
        raw = src.backend.open_read(src.key, odirect)
        h5 = None
        try:
            h5 = h5py.File(raw, "r", rdcc_nbytes=_NO_CHUNK_CACHE)
            dset = h5.get(self.dataset)
            shape = dset.shape if isinstance(dset, h5py.Dataset) else None
        except (OSError, RuntimeError, ValueError, KeyError) as exc:
            _close(h5, raw)
            raise CorruptSampleError(path, 0, f"h5py cannot open the file ({exc})") \
                from None
        if not shape or shape[0] != num_samples:
            _close(h5, raw)
            found = f"shape {shape}" if shape is not None else "no such dataset"
            raise DatasetError(f"{path}: '{self.dataset}' has {found}, the manifest says "
                               f"{num_samples} samples; regenerate the dataset")
        return _Handle(stamp, raw, h5, dset)

    def _drop(self, key: tuple[str, bool]) -> None:
        """Close and forget one handle (caller holds ``self._lock``)."""
        handle = self._handles.pop(key)
        with handle.lock:
            handle.close()

    def close(self) -> None:
        """Close every file this process keeps open (reading opens them again)."""
        with self._lock:
            for key in list(self._handles):
                self._drop(key)

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Not used: h5py does the reading (``read_sample``)."""
        raise DatasetError(f"{src}: hdf5 samples are read through h5py (read_sample)")

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """The first sample of a whole file held in memory (a copy is made for h5py)."""
        if not whole_file:
            raise DatasetError(f"{src}: hdf5 samples are read through h5py (read_sample)")
        try:
            with h5py.File(io.BytesIO(data), "r") as h5:
                sample = np.asarray(h5[self.dataset][0])
        except (OSError, RuntimeError, ValueError, KeyError) as exc:
            raise CorruptSampleError(str(src), 0, f"h5py cannot read the file ({exc})") \
                from None
        return sample.reshape(-1).view(np.uint8)


_INSTANCES: weakref.WeakSet[Hdf5Format] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Close kept files while Python still runs: HDF5 closes leftovers later, from C, calling
    into the file objects of a finalized interpreter (a segfault at exit)."""
    for fmt in list(_INSTANCES):
        fmt.close()


def _close(h5: h5py.File | None, raw: CountingReader) -> None:
    """Close a half-opened file quietly."""
    if h5 is not None:
        h5.close()
    raw.close()


def _sample_offset(dset: h5py.Dataset, index: int) -> int:
    """Best-known file offset of sample ``index`` (its chunk's, if chunked), else 0."""
    try:
        if dset.chunks is None:
            row = int(np.prod(dset.shape[1:], dtype=np.int64)) * dset.dtype.itemsize
            return int(dset.id.get_offset() or 0) + index * row
        first = index - index % dset.chunks[0]
        return int(dset.id.get_chunk_info_by_coord((first,) + (0,) * (dset.ndim - 1))
                   .byte_offset)
    except (OSError, RuntimeError, ValueError, TypeError, AttributeError):
        return 0


FORMAT = Hdf5Format()
