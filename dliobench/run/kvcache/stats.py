"""What one rank of a KV-cache run measured: per tier and direction the bytes, operations
and latencies (``storage.latency`` bins, mergeable over ranks), the entries' sizes, the
requests' end-to-end, storage and generation times, hits and misses, tokens per second of
the run, and the client's CPU. Picklable: rank 0 gathers them."""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field

from dliobench.storage.latency import LatencyLog

TIERS = ("gpu", "cpu", "storage")


@dataclass
class TierOps:
    """One tier's reads or writes."""

    count: int = 0
    bytes: int = 0
    latency: LatencyLog = field(default_factory=LatencyLog)
    sizes: Counter[int] = field(default_factory=Counter)  # log2 of the size: how many

    def add(self, nbytes: int, seconds: float) -> None:
        """One operation of ``nbytes`` taking ``seconds``."""
        self.count += 1
        self.bytes += nbytes
        self.latency.record(seconds, seconds)
        self.sizes[max(0, math.ceil(math.log2(max(1, nbytes))))] += 1

    def merge(self, other: TierOps) -> None:
        """Add another rank's operations."""
        self.count += other.count
        self.bytes += other.bytes
        self.latency.merge(other.latency)
        self.sizes.update(other.sizes)


def _ops() -> dict[str, TierOps]:
    return {t: TierOps() for t in TIERS}


@dataclass
class KVStats:
    """One rank's measurements (``lock`` guards them while the pool's threads add)."""

    rank: int = 0
    reads: dict[str, TierOps] = field(default_factory=_ops)
    writes: dict[str, TierOps] = field(default_factory=_ops)
    decode_bytes_read: int = 0
    requests: int = 0
    scheduled: int = 0
    cancelled: int = 0
    tokens: int = 0
    prefill_tokens: int = 0
    hits: int = 0
    misses: int = 0
    multi_turn_hits: int = 0
    multi_turn_misses: int = 0
    e2e: LatencyLog = field(default_factory=LatencyLog)
    storage_io: LatencyLog = field(default_factory=LatencyLog)
    generation: LatencyLog = field(default_factory=LatencyLog)
    queue_wait: LatencyLog = field(default_factory=LatencyLog)
    storage_io_s: float = 0.0  # the sums of the requests' times, for the means
    e2e_s: float = 0.0
    generation_s: float = 0.0
    tokens_per_second: Counter[int] = field(default_factory=Counter)  # second: tokens done
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    user_s: float = 0.0  # user-mode CPU (the interpreter's: one core at most, the GIL)
    cpu_cores: float = 1.0
    direct_io: bool = False
    qos: dict[str, LatencyLog] = field(default_factory=dict)
    lock: threading.Lock | None = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["lock"] = None
        return state

    def merge(self, other: KVStats) -> None:
        """Add another rank's figures (for the run's totals)."""
        for mine, theirs in ((self.reads, other.reads), (self.writes, other.writes)):
            for tier in TIERS:
                mine[tier].merge(theirs[tier])
        for name in ("decode_bytes_read", "requests", "scheduled", "cancelled", "tokens",
                     "prefill_tokens", "hits", "misses", "multi_turn_hits",
                     "multi_turn_misses", "storage_io_s", "e2e_s", "generation_s", "cpu_s",
                     "user_s", "cpu_cores"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for log in ("e2e", "storage_io", "generation", "queue_wait"):
            getattr(self, log).merge(getattr(other, log))
        for level, lat in other.qos.items():
            self.qos.setdefault(level, LatencyLog()).merge(lat)
        self.tokens_per_second.update(other.tokens_per_second)
        self.elapsed_s = max(self.elapsed_s, other.elapsed_s)
        self.direct_io = self.direct_io or other.direct_io
