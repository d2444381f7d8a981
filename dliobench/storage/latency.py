"""Per-request latency of object-store reads: time to the first byte and to the last, kept in
log-spaced bins so every rank's (and every loader worker's) requests merge into one set of
percentiles without keeping each request.

Bins are 1/100 of a decade wide (from 1 µs up; shorter and longer go to the end bins), so a
percentile is known to within 1.2 % of its value; the maxima are exact. A process keeps one
log (``RECORDER``) that the timed backend records into; a loader worker ``take``s its part
with each batch (PyTorch's) or sample (DALI's, as integers beside it) and the rank ``merge``s
it into its own.
"""

from __future__ import annotations

import math
import os
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

BINS_PER_DECADE = 100
LOW_S = 1e-6
TOP_BIN = 12 * BINS_PER_DECADE  # 1 µs .. 10^6 s
PERCENTILES = (50, 99)


def _bin(seconds: float) -> int:
    if seconds <= LOW_S:
        return 0
    return min(TOP_BIN, int(math.log10(seconds / LOW_S) * BINS_PER_DECADE) + 1)


def _value(index: int) -> float:
    """The geometric middle of bin ``index``."""
    if index == 0:
        return LOW_S
    return LOW_S * 10 ** ((index - 0.5) / BINS_PER_DECADE)


def _percentile(bins: Counter[int], count: int, q: float, top: float) -> float:
    """The ``q``-th percentile (nearest rank) of the values binned in ``bins``."""
    rank = max(1, math.ceil(q / 100 * count))
    seen = 0
    for index in sorted(bins):
        seen += bins[index]
        if seen >= rank:
            return min(_value(index), top)
    return top


@dataclass
class LatencyLog:
    """Requests' first-byte and total times, binned; picklable and small (only used bins)."""

    count: int = 0
    first_byte: Counter[int] = field(default_factory=Counter)
    total: Counter[int] = field(default_factory=Counter)
    first_byte_max_s: float = 0.0
    total_max_s: float = 0.0

    def record(self, first_byte_s: float, total_s: float) -> None:
        """One request: seconds to its first byte and to its last."""
        self.count += 1
        self.first_byte[_bin(first_byte_s)] += 1
        self.total[_bin(total_s)] += 1
        self.first_byte_max_s = max(self.first_byte_max_s, first_byte_s)
        self.total_max_s = max(self.total_max_s, total_s)

    def merge(self, other: LatencyLog) -> None:
        """Add ``other``'s requests to these."""
        self.count += other.count
        self.first_byte.update(other.first_byte)
        self.total.update(other.total)
        self.first_byte_max_s = max(self.first_byte_max_s, other.first_byte_max_s)
        self.total_max_s = max(self.total_max_s, other.total_max_s)

    def as_ints(self) -> list[int]:
        """The log as integers (maxima in ns), to travel beside a sample out of a loader
        worker whose only way back is arrays (DALI's): ``from_ints`` reads it."""
        out = [self.count, round(self.first_byte_max_s * 1e9), round(self.total_max_s * 1e9)]
        for bins in (self.first_byte, self.total):
            out.append(len(bins))
            for index, count in bins.items():
                out += [index, count]
        return out

    @classmethod
    def from_ints(cls, values: Sequence[int]) -> LatencyLog:
        """The log ``as_ints`` wrote."""
        it = iter(int(v) for v in values)
        log = cls(next(it), first_byte_max_s=next(it) / 1e9, total_max_s=next(it) / 1e9)
        for bins in (log.first_byte, log.total):
            for _ in range(next(it)):
                index = next(it)
                bins[index] = next(it)
        return log

    def total_percentile(self, q: float) -> float | None:
        """The ``q``-th percentile of the requests' total times (None without requests)."""
        return _percentile(self.total, self.count, q, self.total_max_s) if self.count else None

    def total_bins(self) -> list[tuple[float, int]]:
        """(seconds at the bin's middle, requests) of the total times, shortest first."""
        return [(_value(i), self.total[i]) for i in sorted(self.total)]

    def summary(self) -> dict[str, Any]:
        """``requests``, ``first_byte_p50_s`` .. ``total_max_s`` (None without requests)."""
        out: dict[str, Any] = {"requests": self.count}
        for name, bins, top in (("first_byte", self.first_byte, self.first_byte_max_s),
                                ("total", self.total, self.total_max_s)):
            for q in PERCENTILES:
                out[f"{name}_p{q}_s"] = (_percentile(bins, self.count, q, top)
                                         if self.count else None)
            out[f"{name}_max_s"] = top if self.count else None
        return out


class _Recorder:
    """This process's log, shared by its reading threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log = LatencyLog()

    def record(self, first_byte_s: float, total_s: float) -> None:
        with self._lock:
            self._log.record(first_byte_s, total_s)

    def merge(self, other: LatencyLog | None) -> None:
        """Add a worker's requests (``take`` there) to this process's."""
        if other is not None and other.count:
            with self._lock:
                self._log.merge(other)

    def take(self) -> LatencyLog | None:
        """The requests recorded since the last ``take`` (None if there were none)."""
        with self._lock:
            log, self._log = self._log, LatencyLog()
        return log if log.count else None


RECORDER = _Recorder()


def _after_fork() -> None:
    """A forked worker starts with an empty log (its parent's requests stay there)."""
    global RECORDER
    RECORDER = _Recorder()


os.register_at_fork(after_in_child=_after_fork)


def record(first_byte_s: float, total_s: float) -> None:
    """Record one request in this process's log."""
    RECORDER.record(first_byte_s, total_s)


def take() -> LatencyLog | None:
    """This process's requests since the last ``take``."""
    return RECORDER.take()


def merge(log: LatencyLog | None) -> None:
    """Add ``log`` (a worker's ``take``) to this process's requests."""
    RECORDER.merge(log)
