"""DALI's CPU JPEG decoder one sample at a time (``reader.decoder: dali``): a pipeline of one
``fn.external_source`` and ``fn.decoders.image(device="cpu")``, batch 1, one thread, built
per reader thread; one pipeline for grayscale and one for colour, picked by the frame
header's component count, so grayscale comes back rows x columns as Pillow gives it.
(DALI 2.4's ``output_type=ANY_DATA`` would keep the channels, but it corrupted the heap here
now and then.) Costs one ``run()`` of the pipeline per sample on top of the decode (the
``dali`` row of ``benchmarks/loaders/jpeg_decoders.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# Start-of-frame markers (0xC0-0xCF less DHT 0xC4, JPG 0xC8, DAC 0xCC)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def components(data: bytes | memoryview) -> int:
    """Colour components of a JPEG from its frame header (1: grayscale; 0: none found),
    walking the segments from the start marker (a few steps past our COM padding)."""
    view = memoryview(data)
    pos = 2
    while pos + 4 <= len(view):
        if view[pos] != 0xFF:
            return 0
        marker = view[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _SOF:
            return view[pos + 9] if pos + 9 < len(view) else 0
        pos += 2 + int.from_bytes(view[pos + 2:pos + 4], "big")
    return 0


def _pipeline(gray: bool) -> Any:
    import nvidia.dali.fn as fn
    from nvidia.dali import pipeline_def as typed_pipeline_def
    from nvidia.dali.types import DALIImageType

    pipeline_def: Any = typed_pipeline_def  # DALI's stubs reject device_id=None (CPU only)

    kind = DALIImageType.GRAY if gray else DALIImageType.RGB

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def decode_one() -> Any:
        encoded = fn.external_source(name="encoded", no_copy=False)
        return fn.decoders.image(encoded, device="cpu", output_type=kind)

    pipe = decode_one()
    pipe.build()
    return pipe


def one_sample_decoder() -> Callable[[bytes | memoryview], np.ndarray]:
    """A decoder running a one-sample DALI pipeline on the CPU (ImportError without DALI)."""
    import nvidia.dali  # noqa: F401 - fail here, before any pipeline, without DALI

    pipes: dict[bool, Any] = {}

    def decode(data: bytes | memoryview) -> np.ndarray:
        gray = components(data) == 1
        pipe = pipes.get(gray)
        if pipe is None:
            pipe = pipes[gray] = _pipeline(gray)
        pipe.feed_input("encoded", [np.frombuffer(data, dtype=np.uint8)])
        (out,) = pipe.run()
        pixels = np.array(out.at(0))
        return pixels[:, :, 0] if gray else pixels
    return decode
