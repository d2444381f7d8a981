"""The contract every data format implements: write a file of samples, locate and decode sample k.

Formats normally never touch storage when reading: the loader reads the bytes (buffered or
O_DIRECT, whole file or a sample's byte range), counts them at the read call, and hands them
to ``decode``. A format whose library must do its own I/O (HDF5 through h5py) sets
``reads_itself`` and implements ``read_sample`` instead, counting its bytes itself through
``storage.CountingFile``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from dliobench.errors import ConfigError

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig


@dataclass(frozen=True)
class ByteRange:
    """Where in a file one sample's bytes lie."""

    offset: int
    length: int


class Format(Protocol):
    """A file format: how samples are laid out on disk and decoded."""

    name: str
    extension: str
    head_bytes: int  # bytes from the start of a file that ``layout`` needs
    max_samples_per_file: int | None  # None: any number
    lossy: bool  # a decoded sample is not the written bytes (JPEG)
    checksummed: bool  # a flipped payload byte is detected when the sample is decoded
    reads_itself: bool  # the format's library does its own I/O: use ``read_sample``

    def configured(self, dataset: DatasetConfig) -> Format:
        """This format with the options the dataset's configuration sets for it.

        Raises ConfigError for options the format does not have.
        """

    def write(self, path: Path, samples: np.ndarray) -> None:
        """Write the (num_samples, sample_bytes) uint8 array as one file at ``path``.

        Side files (an index) go next to ``path`` with ``path``'s name plus a suffix.
        """

    def commit(self, tmp: str | Path, final: str | Path) -> None:
        """Move a file written at ``tmp`` (and its side files) to ``final``.

        The data file is renamed last: its presence means the whole set is complete.
        Durability is the generator's job: it syncs the file system before it records files
        in the manifest, once per batch of files rather than one fsync per file.
        """

    def side_files(self, path: Path) -> list[Path]:
        """Files that belong to the data file ``path`` (e.g. its index), possibly none."""

    def layout(self, path: Path, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Byte range of every sample of a multi-sample file, from its first bytes."""

    def decode(self, path: Path, data: memoryview, whole_file: bool) -> np.ndarray:
        """Decode one sample from a whole one-sample file or from the sample's byte range.

        Raises CorruptSampleError when the bytes are truncated or damaged.
        """

    def read_sample(self, path: Path, file_size: int, num_samples: int, index: int,
                    odirect: bool) -> tuple[np.ndarray, int]:
        """Sample ``index`` of the file and the bytes read for it (``reads_itself`` only)."""


class FileFormat:
    """Shared behaviour of formats: commit of a data file and its side files, and the
    defaults of the descriptive members (one sample or many, lossless, no checksum)."""

    name: str
    side_suffixes: tuple[str, ...] = ()
    max_samples_per_file: int | None = None
    lossy = False
    checksummed = False
    reads_itself = False

    def configured(self, dataset: DatasetConfig) -> Format:
        """This format: it takes no options (HDF5's chunking and compression are refused)."""
        if dataset.enable_chunking or dataset.compression != "none":
            raise ConfigError("dataset.enable_chunking and dataset.compression apply to the "
                              f"hdf5 format only, not {dataset.format}")
        return self  # type: ignore[return-value]  # every subclass is a Format

    def read_sample(self, path: Path, file_size: int, num_samples: int, index: int,
                    odirect: bool) -> tuple[np.ndarray, int]:
        """Formats whose bytes the loader reads do not read samples themselves."""
        raise NotImplementedError(f"{self.name} samples are read by the loader")

    def side_files(self, path: Path) -> list[Path]:
        """``path`` plus each suffix in ``side_suffixes``."""
        return [path.with_name(path.name + s) for s in self.side_suffixes]

    def commit(self, tmp: str | Path, final: str | Path) -> None:
        """Rename side files, then the data file (plain string paths: this runs per file)."""
        for suffix in self.side_suffixes:
            os.replace(f"{tmp}{suffix}", f"{final}{suffix}")
        os.replace(tmp, final)


Fill = Callable[[np.ndarray], None]  # writes the sample bytes into a (num_samples, bytes) array


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

    def write_side_files(self, path: Path, num_samples: int, sample_bytes: int) -> None:
        """Write the data file's side files, if the format has any."""

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
