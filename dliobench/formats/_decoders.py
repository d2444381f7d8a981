"""JPEG decoders by name (``reader.decoder``): the encoded file in, the pixels out, as
``np.asarray(Image.open(f))`` gives them (rows x columns for grayscale, rows x columns x 3
for colour), so every decoder hands training the same array.

``pil`` is what DLIO's image reader and so MLPerf Storage's reference run
(argonne-lcf/dlio_benchmark dlio_benchmark/reader/image_reader.py@03b5ed3): the default.
The others decode with libjpeg-turbo too, called more directly: ``simplejpeg`` (a wheel
from PyPI, the ``jpeg`` extra), ``turbojpeg`` (PyTurboJPEG: a pure-Python wrapper that needs
the system's libturbojpeg; Debian's ``libturbojpeg0`` is 2.1, which PyTurboJPEG 1.x fits)
and ``dali`` (NVIDIA DALI's ``fn.decoders.image(device="cpu")`` in a one-sample pipeline per
thread, the ``dali`` extra). All use libjpeg-turbo's accurate integer IDCT: on baseline
JPEG they decode the same pixels as Pillow (``tests/unit/test_jpeg_decoders.py``).

Each decoder is built once per thread and process (``decoder_for``): the libraries' handles
are not shared between reader threads, and a forked loader worker builds its own (DALI's
pipeline threads do not survive a fork).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np

from dliobench.base.errors import DlioBenchError, MissingExtraError
from dliobench.config.names import DECODER_NAMES

Decode = Callable[[bytes | memoryview], np.ndarray]
_local = threading.local()
# What a decoder needs and how to install it: (package named in the error, extra)
NEEDS = {"simplejpeg": ("simplejpeg", "jpeg"), "dali": ("NVIDIA DALI", "dali")}
TURBOJPEG_INSTALL = ("reader.decoder: turbojpeg needs PyTurboJPEG and a libturbojpeg it can "
                     "load; install them with `apt-get install libturbojpeg0` and `pip install "
                     "'PyTurboJPEG<2'` (or libjpeg-turbo 3 and PyTurboJPEG 2)")


class MissingDecoderError(DlioBenchError):
    """The library of a decoder ``reader.decoder`` names is not installed (exits as a
    missing extra does)."""


def _pil() -> Decode:
    import io

    from PIL import JpegImagePlugin

    def decode(data: bytes | memoryview) -> np.ndarray:
        with JpegImagePlugin.JpegImageFile(io.BytesIO(data)) as image:
            image.load()
            return np.asarray(image)
    return decode


def _simplejpeg() -> Decode:
    try:
        import simplejpeg
    except ImportError:
        raise MissingExtraError(*NEEDS["simplejpeg"]) from None

    def decode(data: bytes | memoryview) -> np.ndarray:
        _, _, space, _ = simplejpeg.decode_jpeg_header(data)
        if space == "Gray":
            return simplejpeg.decode_jpeg(data, colorspace="GRAY")[:, :, 0]
        out: np.ndarray = simplejpeg.decode_jpeg(data, colorspace="RGB")
        return out
    return decode


def _turbojpeg() -> Decode:
    try:
        import turbojpeg
        codec = turbojpeg.TurboJPEG()
    except (ImportError, OSError, RuntimeError):  # no module, or no libturbojpeg found
        raise MissingDecoderError(TURBOJPEG_INSTALL) from None

    def decode(data: bytes | memoryview) -> np.ndarray:
        raw = bytes(data)
        gray = codec.decode_header(raw)[2] == turbojpeg.TJSAMP_GRAY
        pixels: np.ndarray = codec.decode(raw, pixel_format=turbojpeg.TJPF_GRAY if gray
                                          else turbojpeg.TJPF_RGB)
        return pixels[:, :, 0] if gray else pixels
    return decode


def _dali() -> Decode:
    from dliobench.formats._dali_decode import one_sample_decoder

    try:
        return one_sample_decoder()
    except ImportError:
        raise MissingExtraError(*NEEDS["dali"]) from None


_FACTORIES: dict[str, Callable[[], Decode]] = {
    "pil": _pil, "simplejpeg": _simplejpeg, "turbojpeg": _turbojpeg, "dali": _dali}
if tuple(_FACTORIES) != DECODER_NAMES:  # pragma: no cover - a developer's slip
    raise RuntimeError("dliobench.formats._decoders and config.names.DECODER_NAMES differ")


def decoder_for(name: str) -> Decode:
    """This thread's decoder ``name`` (built on first use); MissingExtraError or
    MissingDecoderError in one sentence when its library is not installed."""
    cache: dict[tuple[int, str], Decode] = _local.__dict__.setdefault("decoders", {})
    key = (os.getpid(), name)  # a forked worker inherits the thread's cache, not its threads
    if key not in cache:
        cache[key] = _FACTORIES[name]()
    return cache[key]


def available(name: str) -> str | None:
    """None when decoder ``name`` works here, else the sentence saying what to install."""
    try:
        decoder_for(name)
    except DlioBenchError as exc:
        return str(exc)
    return None

