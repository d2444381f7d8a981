"""Accelerator emulation: hold the step for the configured compute time per batch.

``time.sleep`` alone overshoots by tens of microseconds; the emulator sleeps until shortly
before the deadline and spins the rest, so measured compute matches the configured value.
"""

from __future__ import annotations

import time

import numpy as np

SPIN_S = 0.0002


class Accelerator:
    """One emulated accelerator: per-batch compute time ~ normal(mean, stdev), never negative."""

    def __init__(self, mean_s: float, stdev_s: float = 0.0, seed: int = 0) -> None:
        self.mean_s = mean_s
        self.stdev_s = stdev_s
        self._rng = np.random.default_rng([seed, 0xACC])

    def next_duration(self) -> float:
        """The compute time of the next batch."""
        if self.stdev_s <= 0:
            return self.mean_s
        return abs(float(self._rng.normal(self.mean_s, self.stdev_s)))

    def compute(self) -> float:
        """Emulate one batch's compute; return the time actually spent (seconds)."""
        return busy_wait(self.next_duration())


def busy_wait(seconds: float) -> float:
    """Block for ``seconds`` (sleep, then spin the last fraction); return the time spent."""
    start = time.perf_counter()
    if seconds <= 0:
        return 0.0
    deadline = start + seconds
    if seconds > SPIN_S:
        time.sleep(seconds - SPIN_S)
    now = time.perf_counter()
    while now < deadline:
        now = time.perf_counter()
    return now - start
