"""The contract every data format implements: write a file of samples, locate and decode sample k.

Formats never touch storage when reading: the loader reads the bytes (buffered or O_DIRECT,
whole file or a sample's range), counts them at the read call, and hands them to ``decode``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np


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

    def write(self, path: Path, samples: np.ndarray) -> None:
        """Write the (num_samples, sample_bytes) uint8 array as one file at ``path``."""

    def layout(self, path: Path, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """Byte range of every sample of a multi-sample file, from its first bytes."""

    def decode(self, path: Path, data: memoryview, whole_file: bool) -> np.ndarray:
        """Decode one sample from a whole one-sample file or from the sample's byte range.

        Raises CorruptSampleError when the bytes are truncated or damaged.
        """
