"""Images one core decodes per second with each JPEG decoder (``reader.decoder``), and so the
client cores an accelerator's demand needs: what ``dliobench ceiling`` shows for a JPEG
workload (on files made as the generator makes them, ``sample_files``) and
``benchmarks/jpeg_decoders.py`` records (on generated files).

A rate is images per CPU-second of this process (``time.process_time``: DALI decodes in its
own threads) over repeated decodes of files already in memory: reading is the ceiling's other
half and is measured there. CPU time rather than wall time because a loaded host takes wall
time from the measurement but not CPU time; both are kept, with the host's load average, so a
reader can judge.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dliobench.base.errors import DlioBenchError
from dliobench.config.names import DECODER_NAMES
from dliobench.formats._decoders import decoder_for
from dliobench.formats._image import to_pixels
from dliobench.formats.jpeg import FORMAT, padded_jpeg

REPS = 3
SECONDS = 0.5  # per repetition and decoder: a few hundred decodes of a 323 KB file


@dataclass(frozen=True)
class DecodeRate:
    """One decoder's measurement: images per CPU-second and per wall second (medians of
    ``reps``), or why it could not run here (``missing``)."""

    decoder: str
    per_cpu_s: float = 0.0
    per_wall_s: float = 0.0
    reps: int = 0
    missing: str = ""

    def cores_for(self, demand: float) -> float | None:
        """Cores this decoder needs to decode ``demand`` images/s (None: not measured)."""
        return demand / self.per_cpu_s if self.per_cpu_s > 0 else None


def measure(name: str, blobs: Sequence[bytes], seconds: float = SECONDS,
            reps: int = REPS) -> DecodeRate:
    """Decode ``blobs`` round-robin with decoder ``name`` for ``seconds``, ``reps`` times;
    the medians of images per CPU-second and per wall second."""
    try:
        decode = decoder_for(name)
        decode(blobs[0])  # warm: the library's first call builds its tables (DALI: a pipeline)
    except DlioBenchError as exc:
        return DecodeRate(name, missing=str(exc))
    cpu_rates, wall_rates = [], []
    for _ in range(reps):
        done = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while True:
            decode(blobs[done % len(blobs)])
            done += 1
            wall = time.perf_counter() - wall0
            if wall >= seconds:
                break
        cpu = time.process_time() - cpu0
        cpu_rates.append(done / cpu if cpu > 0 else 0.0)
        wall_rates.append(done / wall)
    return DecodeRate(name, statistics.median(cpu_rates), statistics.median(wall_rates), reps)


def measure_all(blobs: Sequence[bytes], names: Sequence[str] = DECODER_NAMES,
                seconds: float = SECONDS, reps: int = REPS) -> list[DecodeRate]:
    """``measure`` of each decoder in ``names`` on the same files."""
    return [measure(name, blobs, seconds, reps) for name in names]


def sample_files(record_bytes: int, count: int = 8, seed: int = 0) -> list[bytes]:
    """``count`` JPEG files of a ``record_bytes`` record as the generator writes them
    (random pixels, quality 75, padded to the record's size)."""
    rng = np.random.default_rng(seed)
    return [padded_jpeg(to_pixels(rng.integers(0, 256, (1, record_bytes), dtype=np.uint8),
                                  "jpeg"), record_bytes, FORMAT.save_options)
            for _ in range(count)]


def load_average() -> float | None:
    """The host's one-minute load average (None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None
