"""PNG: one 8-bit grayscale image per file, as DLIO's PNG generator writes (Pillow defaults).

Lossless: the decoded pixels are the sample's bytes (those that fill whole rows). Checksummed:
header chunks carry CRC-32s that Pillow checks, and the pixel stream's zlib Adler-32 is checked
on decode, so a flipped byte raises instead of returning a wrong sample.

Compression level 6 (zlib's and Pillow's default, what DLIO gets): random pixels do not
compress, and level 1 writes them only ~7% faster (about 5.5 ms per ResNet-50-sized image
either way), so there is no reason to depart from what real PNG datasets use. Level 0 would
write 1.8x faster but store the pixels deflate-free, halving the decode cost we measure.
"""

from __future__ import annotations

from typing import Any, ClassVar

from PIL import ImageFile, PngImagePlugin

from dliobench.formats._image import ImageFormat


class PngFormat(ImageFormat):
    """Grayscale PNG at the default compression level 6."""

    name = "png"
    extension = "png"
    lossy = False
    checksummed = True
    pil_format = "PNG"
    save_options: ClassVar[dict[str, Any]] = {"compress_level": 6}
    trailer = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the empty IEND chunk and its CRC

    def plugin(self) -> type[ImageFile.ImageFile]:
        """Pillow's PNG reader."""
        return PngImagePlugin.PngImageFile


FORMAT = PngFormat()
