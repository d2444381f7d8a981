"""What JPEG and PNG share: one grayscale image per file, written and decoded with Pillow.

A record of L bytes becomes an 8-bit grayscale image ``isqrt(L)`` pixels wide and
``L // width`` rows high, whose pixels are the sample's own bytes (the < width bytes that do
not fill a row are dropped). DLIO's generators draw a square ``int(sqrt(L))``-sided grayscale
image; this keeps the same shape within a row and the pixel count within one row of L.

Decoding runs Pillow on the bytes the loader already read, as training's ``Image.open`` plus
``np.asarray`` would, so the decode cost is part of what is measured. The format's own plugin
class opens the file (no format sniffing, no decompression-bomb limit on our own large
records), and a file that does not end with the format's trailer is reported as truncated
even if ``ImageFile.LOAD_TRUNCATED_IMAGES`` was switched on elsewhere in the process.
"""

from __future__ import annotations

import io
import math
import struct
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image, ImageFile

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats.base import ByteRange, FileFormat, Stored

# Errors Pillow raises on damaged or truncated data (UnidentifiedImageError is an OSError).
_PIL_ERRORS = (OSError, SyntaxError, ValueError, EOFError, struct.error)


def image_shape(nbytes: int) -> tuple[int, int]:
    """(rows, columns) of the grayscale image that holds a record of ``nbytes`` bytes."""
    if nbytes < 1:
        raise DatasetError("image formats need dataset.record_length_bytes of at least 1")
    width = math.isqrt(nbytes)
    return nbytes // width, width


def to_pixels(samples: np.ndarray, fmt_name: str) -> np.ndarray:
    """The one sample of ``samples`` as a (rows, columns) uint8 array (a view, no copy)."""
    if samples.ndim != 2 or samples.shape[0] != 1:
        raise DatasetError(
            f"{fmt_name} files hold one image (one sample) per file, got "
            f"{samples.shape[0] if samples.ndim else 0}; set dataset.num_samples_per_file: 1")
    rows, cols = image_shape(samples.shape[1])
    return np.ascontiguousarray(samples[0, : rows * cols], dtype=np.uint8).reshape(rows, cols)


class ImageFormat(FileFormat):
    """One 8-bit grayscale image per file; subclasses name the Pillow format and its options."""

    name: str
    extension: str
    head_bytes = 0  # one sample per file: no layout to learn
    max_samples_per_file = 1
    compressed_image = True
    lossy: bool
    checksummed: bool
    pil_format: ClassVar[str]
    save_options: ClassVar[dict[str, Any]]
    trailer: ClassVar[bytes]  # the bytes every complete file of this format ends with
    max_side: ClassVar[int] = 2**31 - 1

    def plugin(self) -> type[ImageFile.ImageFile]:
        """The Pillow class that reads this format."""
        raise NotImplementedError

    def write(self, path: Path, samples: np.ndarray) -> None:
        """Encode the single sample's bytes as pixels of one image at ``path``."""
        pixels = to_pixels(samples, self.name)
        if max(pixels.shape) > self.max_side:
            raise DatasetError(f"{self.name} images are at most {self.max_side} pixels a side; "
                               f"a {samples.shape[1]}-byte record needs {max(pixels.shape)}")
        Image.fromarray(pixels).save(path, format=self.pil_format, **self.save_options)

    def stored_bytes(self, sample: np.ndarray) -> np.ndarray:
        """The pixels: the sample's first rows x columns bytes."""
        return to_pixels(sample.reshape(1, -1), self.name).reshape(-1)

    def layout(self, src: Stored, head: memoryview, file_size: int,
               num_samples: int) -> list[ByteRange]:
        """The whole file is the one sample."""
        if num_samples != 1:
            raise DatasetError(f"{src}: {self.name} files hold one sample each, the manifest "
                               f"says {num_samples}; set dataset.num_samples_per_file: 1")
        return [ByteRange(0, file_size)]

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """The decoded (rows, columns) uint8 pixels, read-only, as ``np.asarray`` gives them."""
        if bytes(data[-len(self.trailer):]) != self.trailer:
            raise CorruptSampleError(str(src), len(data),
                                     f"file is truncated: no {self.name} end marker")
        try:
            with self.plugin()(io.BytesIO(data)) as image:
                image.load()
                return np.asarray(image)
        except _PIL_ERRORS as exc:
            raise CorruptSampleError(str(src), len(data),
                                     f"{self.name} data is damaged ({exc})") from None
