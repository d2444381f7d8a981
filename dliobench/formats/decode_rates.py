"""Images one core decodes per second with each JPEG decoder (``reader.decoder``), and so the
client cores an accelerator's demand needs: what ``dliobench ceiling`` shows for a JPEG
workload (on files made as the generator makes them, ``sample_files``) and
``benchmarks/loaders/jpeg_decoders.py`` records (on generated files).

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
from dliobench.formats._decoders import Decode, decoder_for
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


def _one_rep(decode: Decode, blobs: Sequence[bytes], seconds: float) -> tuple[float, float]:
    """Images per CPU-second and per wall second of one repetition."""
    done = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while True:
        decode(blobs[done % len(blobs)])
        done += 1
        wall = time.perf_counter() - wall0
        if wall >= seconds:
            break
    cpu = time.process_time() - cpu0
    return (done / cpu if cpu > 0 else 0.0), done / wall


def measure_all(blobs: Sequence[bytes], names: Sequence[str] = DECODER_NAMES,
                seconds: float = SECONDS, reps: int = REPS) -> list[DecodeRate]:
    """Each decoder of ``names`` decoding ``blobs`` round-robin for ``seconds``, ``reps``
    times, the decoders taking turns within each repetition (so a change of the host's
    load falls on all of them); medians of images per CPU-second and per wall second."""
    decoders: dict[str, Decode] = {}
    missing: dict[str, str] = {}
    for name in names:
        try:
            decoders[name] = decoder_for(name)
            decoders[name](blobs[0])  # warm: first calls build tables (DALI: a pipeline)
        except DlioBenchError as exc:
            missing[name] = str(exc)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in decoders}
    for _ in range(reps):
        for name, decode in decoders.items():
            got[name].append(_one_rep(decode, blobs, seconds))
    return [DecodeRate(name, missing=missing[name]) if name in missing else
            DecodeRate(name, statistics.median(c for c, _ in got[name]),
                       statistics.median(w for _, w in got[name]), reps) for name in names]


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
