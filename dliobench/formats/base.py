"""The contract every data format implements: write a file of samples, locate and decode sample k.

Formats normally never touch storage when reading: the loader reads the bytes (buffered or
O_DIRECT, whole file or a sample's byte range), counts them at the read call, and hands them
to ``decode``. A format whose library must do its own I/O (HDF5 through h5py) sets
``reads_itself`` and implements ``read_sample`` instead, counting its bytes itself through
``storage.CountingFile``.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from dliobench.base.errors import ConfigError

Columns = tuple[np.ndarray, ...]
"""A batch of rows as its columns, an array per column with a row per sample (parquet): what
real pipelines of columnar data (DLRM's label, dense and sparse features) hand to compute."""

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig
    from dliobench.storage.backend import Backend


@dataclass(frozen=True)
class ByteRange:
    """Where in a file one sample's bytes lie."""

    offset: int
    length: int


@dataclass
class Stored:
    """One stored data file as a format reads it: its backend and key.

    Side files (an index) are read through ``read_side``, which counts their bytes in
    ``nbytes``: the reader adds them to the bytes of the sample. ``str()`` is its location,
    for messages.
    """

    backend: Backend
    key: str
    nbytes: int = 0

    def __str__(self) -> str:
        return self.backend.describe(self.key)

    def side(self, suffix: str) -> str:
        """The key of the side file with ``suffix``."""
        return self.key + suffix

    def read_side(self, suffix: str, length: int | None = None) -> memoryview:
        """The side file's first ``length`` bytes (all of it by default), counted.

        Raises FileNotFoundError when it is missing.
        """
        key = self.side(suffix)
        if length is None:
            length = self.backend.size(key)
            if length is None:
                raise FileNotFoundError(key)
        data, got = self.backend.read_range(key, 0, length)
        self.nbytes += got
        return data


def stored(path: str | Path) -> Stored:
    """A local file as a ``Stored`` (tests and tools that hold a path)."""
    from dliobench.storage.posix import PosixBackend

    return Stored(PosixBackend("/"), str(Path(path).absolute()))


class Format(Protocol):
    """A file format: how samples are laid out in a stored file and decoded.

    Reading goes through the run's storage backend: the reader reads the bytes ``layout`` and
    ``head_bytes`` say (counted at the read), formats read side files through ``Stored``,
    and a format whose library does its own I/O (``reads_itself``) reads through the
    backend's counted file objects.
    """

    name: str
    extension: str
    head_bytes: int  # bytes from the start of a file that ``layout`` needs
    side_suffixes: tuple[str, ...]  # side files (indexes): the data file's key plus a suffix
    max_samples_per_file: int | None  # None: any number
    lossy: bool  # a decoded sample is not the written bytes (JPEG)
    checksummed: bool  # a flipped payload byte is detected when the sample is decoded
    reads_itself: bool  # the format's library does its own I/O: use ``read_sample``
    compressed_image: bool  # decode expands an encoded image (jpeg, png): reader.decode
    reads_rows: bool  # ``read_rows`` reads many samples of a file at once (parquet)

    def configured(self, dataset: DatasetConfig) -> Format:
        """This format with the options the dataset's configuration sets for it.

        Raises ConfigError for options the format does not have.
        """

    def write(self, path: Path, samples: np.ndarray) -> None:
        """Write the (num_samples, sample_bytes) uint8 array as one local file at ``path``,
        its side files next to it (``path`` plus each suffix). The generator writes the same
        bytes through the storage backend."""

    def side_files(self, path: Path) -> list[Path]:
        """The local side files of the data file ``path`` (``path`` plus each suffix)."""

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Byte range of every sample of a multi-sample file, from its first bytes (and its
        side files, read through ``src``)."""

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """Decode one sample from a whole one-sample file or from the sample's byte range.

        Raises CorruptSampleError when the bytes are truncated or damaged.
        """

    def read_sample(self, src: Stored, file_size: int, num_samples: int, index: int,
                    odirect: bool) -> tuple[np.ndarray, int]:
        """Sample ``index`` of the file and the bytes read for it (``reads_itself`` only)."""

    def read_rows(self, src: Stored, file_size: int, num_samples: int, indices: np.ndarray,
                  odirect: bool) -> tuple[Columns, int]:
        """Samples ``indices`` of the file as columns (one array per column read, a row per
        sample, in that order), and the bytes read for them (``reads_rows`` only)."""

    def stored_bytes(self, sample: np.ndarray) -> np.ndarray:
        """The bytes of a generated sample that a lossless read decodes back (the whole
        sample, or what the format keeps of it): what a per-sample checksum covers."""


class FileFormat:
    """Shared behaviour of formats: local side-file paths, and the
    defaults of the descriptive members (one sample or many, lossless, no checksum)."""

    name: str
    side_suffixes: tuple[str, ...] = ()
    max_samples_per_file: int | None = None
    lossy = False
    checksummed = False
    reads_itself = False
    compressed_image = False
    reads_rows = False

    def configured(self, dataset: DatasetConfig) -> Format:
        """This format: it takes no options (HDF5's chunking and compression are refused)."""
        if dataset.enable_chunking or dataset.compression != "none":
            raise ConfigError("dataset.enable_chunking and dataset.compression apply to the "
                              f"hdf5 and parquet formats only, not {dataset.format}")
        return self  # type: ignore[return-value]  # every subclass is a Format

    def read_sample(self, src: Stored, file_size: int, num_samples: int, index: int,
                    odirect: bool) -> tuple[np.ndarray, int]:
        """Formats whose bytes the loader reads do not read samples themselves."""
        raise NotImplementedError(f"{self.name} samples are read by the loader")

    def read_rows(self, src: Stored, file_size: int, num_samples: int, indices: np.ndarray,
                  odirect: bool) -> tuple[Columns, int]:
        """Formats read sample by sample unless they say ``reads_rows``."""
        raise NotImplementedError(f"{self.name} samples are read one at a time")

    def stored_bytes(self, sample: np.ndarray) -> np.ndarray:
        """The whole sample."""
        return sample

    def side_files(self, path: Path) -> list[Path]:
        """``path`` plus each suffix in ``side_suffixes``."""
        return [path.with_name(path.name + s) for s in self.side_suffixes]



class EncodedFormat(FileFormat):
    """A format whose library builds a whole file in memory (HDF5 through h5py): the
    generator writes those bytes through the storage backend and checksums them in memory,
    with no spool file to read back."""

    def encode(self, samples: np.ndarray) -> memoryview:
        """The whole file holding the (num_samples, sample_bytes) uint8 ``samples``."""
        raise NotImplementedError

    def write(self, path: Path, samples: np.ndarray) -> None:
        """The encoded file, written to the local ``path``."""
        image = self.encode(samples)
        with open(path, "wb") as target:
            target.write(image)


Fill = Callable[[np.ndarray], None]  # writes the sample bytes into a (num_samples, bytes) array
RowFill = Callable[[np.ndarray, int], None]  # fills (rows, bytes) from the given first row on


class Sink(Protocol):
    """Where a streamed file goes (a storage writer, or memory): bytes appended in order."""

    def write(self, data: memoryview | bytes) -> Any:
        ...


class StreamedFormat(EncodedFormat):
    """An encoded format whose library writes a file piece by piece (parquet through pyarrow's
    ParquetWriter): the generator fills and hands over a slice of rows at a time, so a writer
    holds a slice, not the file, several times over (a 671 MB DLRM file took 2.3 GB per
    writer thread built whole)."""

    def stream(self, sink: Sink, num_samples: int, sample_bytes: int, fill: RowFill,
               fill_unit: int) -> None:
        """Write the file of ``num_samples`` rows of ``sample_bytes`` to ``sink``; ``fill``
        fills a slice of rows from a first row whose byte offset is a multiple of
        ``fill_unit``."""
        raise NotImplementedError

    def encode(self, samples: np.ndarray) -> memoryview:
        """The whole file holding ``samples``, streamed into memory."""
        rows = samples.reshape(len(samples), -1)

        def copy(out: np.ndarray, first: int) -> None:
            out[...] = rows[first:first + len(out)]

        encoded = io.BytesIO()
        self.stream(encoded, len(rows), rows.shape[1], copy, 1)
        return encoded.getbuffer()


class AssembledFormat(FileFormat):
    """A format that lays a whole data file out in a caller's buffer.

    The generator assembles such a file in one reused page-aligned buffer (the samples filled
    in place) and writes it with one O_DIRECT call; ``write`` gives the same bytes through
    ordinary I/O.
    """

    def assembled_size(self, num_samples: int, sample_bytes: int) -> int | None:
        """Bytes ``assemble`` may use for such a file, or None if it cannot assemble it."""
        return None

    def assemble(self, out: memoryview, num_samples: int, sample_bytes: int,
                 fill: Fill) -> int:
        """Lay the file out at the start of ``out``; ``fill`` writes the sample bytes into
        the (num_samples, sample_bytes) array it is given. Returns the file's size."""
        raise NotImplementedError

    def side_file_bytes(self, num_samples: int, sample_bytes: int) -> dict[str, bytes]:
        """The side files of such a data file, by suffix (none by default)."""
        return {}

    def write_side_files(self, path: Path, num_samples: int, sample_bytes: int) -> None:
        """Write the data file's side files next to the local file ``path``."""
        for suffix, data in self.side_file_bytes(num_samples, sample_bytes).items():
            Path(f"{path}{suffix}").write_bytes(data)

    def write(self, path: Path, samples: np.ndarray) -> None:
        """The same file as the generator's, assembled in ordinary memory and written."""
        rows = np.ascontiguousarray(samples, dtype=np.uint8).reshape(len(samples), -1)
        bound = self.assembled_size(*rows.shape)
        if bound is None:
            raise NotImplementedError(f"{self.name} cannot assemble a file of {rows.shape}")
        buf = memoryview(bytearray(bound))

        def put(out: np.ndarray) -> None:
            out[...] = rows

        end = self.assemble(buf, *rows.shape, put)
        with open(path, "wb") as handle:
            handle.write(buf[:end])
        self.write_side_files(path, *rows.shape)


TAIL_ROOM = 4096  # room after the samples for a contiguous format's tail (npz: ~170 bytes)


class ContiguousFormat(AssembledFormat):
    """A format whose data file is head bytes, the samples' bytes back to back, tail bytes."""

    envelope_from_shape = False  # whether head and tail depend on the samples' shape only

    def head_size(self, num_samples: int, sample_bytes: int) -> int:
        """Bytes before the first sample (they may depend on the shape, not on the data)."""
        return 0

    def envelope(self, samples: np.ndarray) -> tuple[bytes, bytes]:
        """The head (``head_size`` bytes) and tail around the (num_samples, bytes) array."""
        return b"", b""

    def assembled_size(self, num_samples: int, sample_bytes: int) -> int | None:
        """Head, samples and room for the tail."""
        return self.head_size(num_samples, sample_bytes) + num_samples * sample_bytes \
            + TAIL_ROOM

    def assemble(self, out: memoryview, num_samples: int, sample_bytes: int,
                 fill: Fill) -> int:
        """Fill the samples in place after the head, then write head and tail around them."""
        head = self.head_size(num_samples, sample_bytes)
        nbytes = num_samples * sample_bytes
        samples = np.frombuffer(out, np.uint8, nbytes, head).reshape(num_samples, sample_bytes)
        fill(samples)
        head_bytes, tail = self.envelope(samples)
        if len(head_bytes) != head or len(tail) > TAIL_ROOM:
            raise AssertionError(f"{self.name}: envelope does not match head_size/TAIL_ROOM")
        end = head + nbytes + len(tail)
        out[:head] = head_bytes
        out[head + nbytes:end] = tail
        return end


def consecutive(ids: np.ndarray) -> bool:
    """Whether ``ids`` count up by one."""
    return bool(ids.size) and int(ids[-1]) - int(ids[0]) == ids.size - 1 and \
        bool(ids.size < 2 or (ids[1:] - ids[:-1] == 1).all())
