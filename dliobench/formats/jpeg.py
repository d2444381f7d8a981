"""JPEG: one 8-bit grayscale image per file, as DLIO's JPEG generator writes (Pillow, quality 75),
padded to the requested size on disk.

Random pixels at quality 75 encode to about 0.56 bytes per pixel, so a record of L bytes
(L pixels) makes a file of about 0.56 L. Storage sees the file, not the pixels: the encoded
image is followed, right after the start marker, by comment (COM) segments filled with the
sample's own bytes until the file is exactly L bytes (within 3 bytes; a COM segment needs at
least 4). Every JPEG decoder skips COM segments, so Pillow and DALI decode the same pixels.

Decoded by Pillow (as DLIO's reader) unless ``reader.decoder`` names another libjpeg-turbo
decoder (``_decoders.py``); all of them give the same pixels.

Lossy: the decoded pixels differ from the sample's bytes (mean absolute error about 7.5 on
random pixels). Not checksummed: JPEG has no checksum, and a flipped byte in the entropy-coded
data decodes silently to different pixels; truncation is detected (missing end marker).
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image, ImageFile, JpegImagePlugin

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.formats._decoders import decoder_for
from dliobench.formats._image import ImageFormat, to_pixels
from dliobench.formats.base import Stored

SOI = b"\xff\xd8"
COM = b"\xff\xfe"
COM_MAX_PAYLOAD = 0xFFFF - 2  # the 2-byte length counts itself


def comment_padding(nbytes: int, fill: np.ndarray) -> bytes:
    """COM segments of ``nbytes`` bytes in all (less up to 3 when ``nbytes`` cannot be
    split into segments of at least 4), their payload cycled from ``fill``."""
    out = bytearray()
    left = nbytes
    source = fill.reshape(-1).view(np.uint8) if fill.size else np.zeros(1, np.uint8)
    pos = 0
    while left >= 4:
        payload = min(left - 4, COM_MAX_PAYLOAD)
        if 0 < left - 4 - payload < 4:  # keep the remainder big enough for one more segment
            payload -= 4
        chunk = np.resize(np.roll(source, -pos), payload).tobytes()
        pos = (pos + payload) % source.size
        out += COM + (payload + 2).to_bytes(2, "big") + chunk
        left -= payload + 4
    return bytes(out)


def padded_jpeg(pixels: np.ndarray, target: int, options: dict[str, Any]) -> bytes:
    """The JPEG of ``pixels``, padded with COM segments after SOI up to ``target`` bytes
    (unchanged when the encoding is already as large)."""
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", **options)
    encoded = buf.getvalue()
    if not encoded.startswith(SOI):
        raise DatasetError("Pillow wrote a JPEG without a start marker")
    pad = comment_padding(target - len(encoded), pixels)
    return SOI + pad + encoded[len(SOI):]


class JpegFormat(ImageFormat):
    """Baseline JPEG at Pillow's default quality 75, the setting DLIO's generator uses, padded
    to the record's size on disk."""

    name = "jpeg"
    extension = "jpg"
    lossy = True
    checksummed = False
    pil_format = "JPEG"
    save_options: ClassVar[dict[str, Any]] = {"quality": 75}
    trailer = b"\xff\xd9"  # EOI marker
    max_side = 65500  # libjpeg's limit
    decoder = "pil"  # reader.decoder (with_decoder)

    def plugin(self) -> type[ImageFile.ImageFile]:
        """Pillow's JPEG reader."""
        return JpegImagePlugin.JpegImageFile

    def write(self, path: Path, samples: np.ndarray) -> None:
        """Encode the single sample's bytes as pixels, padded to the sample's size."""
        pixels = to_pixels(samples, self.name)
        if max(pixels.shape) > self.max_side:
            raise DatasetError(f"{self.name} images are at most {self.max_side} pixels a side; "
                               f"a {samples.shape[1]}-byte record needs {max(pixels.shape)}")
        path.write_bytes(padded_jpeg(pixels, int(samples.shape[1]), self.save_options))

    def with_decoder(self, name: str) -> JpegFormat:
        """This format decoding with ``name`` (``reader.decoder``); its library is loaded
        now, so a missing one is said before the run (MissingExtraError or
        MissingDecoderError, one sentence)."""
        if name == self.decoder:
            return self
        decoder_for(name)
        configured = copy.copy(self)
        configured.decoder = name
        return configured

    def decode(self, src: Stored, data: memoryview, whole_file: bool) -> np.ndarray:
        """The pixels, as ``np.asarray(Image.open(f))`` gives them, from ``reader.decoder``."""
        if self.decoder == "pil":
            return super().decode(src, data, whole_file)
        if bytes(data[-len(self.trailer):]) != self.trailer:
            raise CorruptSampleError(str(src), len(data), "file is truncated: no jpeg end marker")
        try:
            return decoder_for(self.decoder)(data)
        except (ValueError, OSError, RuntimeError) as exc:  # each library's word for damage
            raise CorruptSampleError(str(src), len(data), f"jpeg data is damaged "
                                     f"({self.decoder}: {exc})") from None


FORMAT = JpegFormat()
