"""What one rank of a KV-cache run measured: per tier and direction the bytes, operations
and latencies (``storage.latency`` bins, mergeable over ranks), the entries' sizes, the
requests' end-to-end, storage and generation times, hits and misses, tokens per second of
the run, and the client's CPU. Picklable: rank 0 gathers them; ``to_record`` and
``from_record`` carry them through a rank's journal (``dliobench recover``)."""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

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

    def partial(self, nbytes: int) -> None:
        """Bytes of an operation cut at the end of the window (no operation, no latency)."""
        self.bytes += nbytes

    def merge(self, other: TierOps) -> None:
        """Add another rank's operations."""
        self.count += other.count
        self.bytes += other.bytes
        self.latency.merge(other.latency)
        self.sizes.update(other.sizes)


    def to_record(self) -> dict[str, Any]:
        """Plain data for a journal record."""
        return {"count": self.count, "bytes": self.bytes, "latency": self.latency.as_ints(),
                "sizes": {str(k): v for k, v in self.sizes.items()}}

    @classmethod
    def from_record(cls, doc: dict[str, Any]) -> TierOps:
        """The operations ``to_record`` wrote."""
        return cls(doc["count"], doc["bytes"], LatencyLog.from_ints(doc["latency"]),
                   Counter({int(k): v for k, v in doc["sizes"].items()}))


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
    cancelled: int = 0  # not started by the end of the duration
    unfinished: int = 0  # started, in flight at its end: stopped and not counted
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
    started_at: float = 0.0  # perf_counter when serving began (a journal's time so far)
    window_s: float = 0.0  # the duration, 0: none (a journal's time stays within it)
    cpu_s: float = 0.0
    user_s: float = 0.0  # user-mode CPU (the interpreter's: one core at most, the GIL)
    cpu_cores: float = 1.0
    direct_io: bool = False
    qos: dict[str, LatencyLog] = field(default_factory=dict)
    autoscaling: dict[str, Any] | None = None  # the autoscaler's record (run/kvcache/autoscale)
    lock: threading.Lock | None = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["lock"] = None
        return state

    def to_record(self) -> dict[str, Any]:
        """The figures so far as plain data (a journal record); take ``lock`` around it."""
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if name in ("reads", "writes"):
                value = {t: ops.to_record() for t, ops in value.items()}
            elif isinstance(value, LatencyLog):
                value = value.as_ints()
            elif name == "qos":
                value = {level: log.as_ints() for level, log in value.items()}
            elif name == "tokens_per_second":
                value = {str(k): v for k, v in value.items()}
            elif name == "lock":
                continue
            out[name] = value
        return out

    @classmethod
    def from_record(cls, doc: dict[str, Any]) -> KVStats:
        """The figures ``to_record`` wrote (fields it lacks keep their defaults)."""
        out = cls()
        for name, value in doc.items():
            if name in ("reads", "writes"):
                value = {t: TierOps.from_record(ops) for t, ops in value.items()}
            elif isinstance(getattr(out, name, None), LatencyLog):
                value = LatencyLog.from_ints(value)
            elif name == "qos":
                value = {level: LatencyLog.from_ints(v) for level, v in value.items()}
            elif name == "tokens_per_second":
                value = Counter({int(k): v for k, v in value.items()})
            elif not hasattr(out, name):
                continue
            setattr(out, name, value)
        return out

    def merge(self, other: KVStats) -> None:
        """Add another rank's figures (for the run's totals)."""
        for mine, theirs in ((self.reads, other.reads), (self.writes, other.writes)):
            for tier in TIERS:
                mine[tier].merge(theirs[tier])
        for name in ("decode_bytes_read", "requests", "scheduled", "cancelled", "unfinished",
                     "tokens", "prefill_tokens", "hits", "misses", "multi_turn_hits",
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
