"""JPEG: one 8-bit grayscale image per file, as DLIO's JPEG generator writes (Pillow, quality 75).

Lossy: the decoded pixels differ from the sample's bytes (mean absolute error about 7.5 on
random pixels). Not checksummed: JPEG has no checksum, and a flipped byte in the entropy-coded
data decodes silently to different pixels; truncation is detected (missing end marker).
"""

from __future__ import annotations

from typing import Any, ClassVar

from PIL import ImageFile, JpegImagePlugin

from dliobench.formats._image import ImageFormat


class JpegFormat(ImageFormat):
    """Baseline JPEG at Pillow's default quality 75, the setting DLIO's generator uses."""

    name = "jpeg"
    extension = "jpg"
    lossy = True
    checksummed = False
    pil_format = "JPEG"
    save_options: ClassVar[dict[str, Any]] = {"quality": 75}
    trailer = b"\xff\xd9"  # EOI marker
    max_side = 65500  # libjpeg's limit

    def plugin(self) -> type[ImageFile.ImageFile]:
        """Pillow's JPEG reader."""
        return JpegImagePlugin.JpegImageFile


FORMAT = JpegFormat()
