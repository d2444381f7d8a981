"""The tier waterfall: a new entry goes to the fastest tier whose budget can hold it, the
least recently used entries of a full tier moving down to the next one (GPU to CPU to
storage; the storage tier is unbounded), as upstream's ``allocate_cache`` does
(mlcommons/storage ``kv_cache_benchmark/kv_cache/cache.py``@23aa82ed).

Thread-safe: the bookkeeping is under one lock, the I/O outside it. An entry is registered
by the dispatcher before its request is queued (``expect``), so a later request reading it
waits for its write (``ready``) instead of missing it by a race: hits and misses are a
function of the schedule, not of timing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from dliobench.results.kv_stats import KVStats
from dliobench.run.kvcache.tiers import Cancelled, CpuTier, GpuTier, StorageTier, Window

ORDER = ("gpu", "cpu", "storage")


@dataclass
class Entry:
    """One KV entry: its size, where it is, its bytes when in host memory."""

    name: str
    size: int = 0
    tier: str = ""
    data: bytearray | None = None
    ready: threading.Event = field(default_factory=threading.Event)


class Waterfall:
    """Entries over the tiers, with per-tier budgets in bytes and LRU order."""

    def __init__(self, budgets: dict[str, int], gpu: GpuTier, cpu: CpuTier,
                 storage: StorageTier, stats: KVStats) -> None:
        self.budgets = budgets
        self.gpu, self.cpu, self.storage, self.stats = gpu, cpu, storage, stats
        self.lock = threading.Lock()
        self.entries: dict[str, Entry] = {}
        self.lru: dict[str, OrderedDict[str, Entry]] = {t: OrderedDict() for t in ORDER}
        self.used = dict.fromkeys(ORDER, 0)
        self.window = Window()  # the run's end, shared by the tiers (``set_end``)
        gpu.window = cpu.window = storage.window = self.window

    def set_end(self, end: float) -> None:
        """End the measured window at ``end`` (``perf_counter`` seconds): operations in
        flight then stop (``Cancelled``), what they moved before it counted."""
        self.window.end = end

    def expect(self, name: str) -> bool:
        """Register an entry a queued request will write; False when it already exists."""
        with self.lock:
            if name in self.entries:
                return False
            self.entries[name] = Entry(name)
            return True

    def abandon(self, name: str) -> None:
        """Forget an expected entry whose request was never served (readers then miss)."""
        with self.lock:
            entry = self.entries.pop(name, None)
        if entry is not None:
            entry.ready.set()

    def _target(self, size: int) -> str:
        return next(t for t in ORDER if t == "storage" or self.budgets[t] >= size)

    def _room(self, tier: str, size: int, moves: list[tuple[Entry, str]]) -> None:
        """Under the lock: demote ``tier``'s LRU entries until ``size`` more bytes fit (the
        storage tier's, when it has a capacity, are deleted: "drop")."""
        if tier == "storage":
            self._drop_room(size, moves)
            return
        while self.used[tier] + size > self.budgets[tier] and self.lru[tier]:
            _, victim = self.lru[tier].popitem(last=False)
            self.used[tier] -= victim.size
            below = ORDER[ORDER.index(tier) + 1]
            dest = below if below == "storage" or self.budgets[below] >= victim.size \
                else "storage"
            self._room(dest, victim.size, moves)
            self._place(victim, dest)
            victim.ready.clear()
            moves.append((victim, dest))

    def _drop_room(self, size: int, moves: list[tuple[Entry, str]]) -> None:
        capacity = self.budgets.get("storage")
        while capacity is not None and self.used["storage"] + size > capacity \
                and self.lru["storage"]:
            _, victim = self.lru["storage"].popitem(last=False)
            self.used["storage"] -= victim.size
            self.entries.pop(victim.name, None)  # its readers miss from now on
            moves.append((victim, "drop"))

    def _place(self, entry: Entry, tier: str) -> None:
        entry.tier = tier
        self.used[tier] += entry.size
        self.lru[tier][entry.name] = entry

    def write(self, name: str, size: int) -> float:
        """Write the entry (made room for first); seconds of I/O it took, moves included."""
        moves: list[tuple[Entry, str]] = []
        with self.lock:
            entry = self.entries.setdefault(name, Entry(name))
            entry.size = size
            tier = self._target(size)
            self._room(tier, size, moves)
            self._place(entry, tier)
        try:
            seconds = sum(self._drop(victim) if dest == "drop" else self._put(victim, dest)
                          for victim, dest in moves)
            return seconds + self._put(entry, tier)
        finally:  # a failed write releases its readers too (they fail, not hang)
            for victim, _ in moves:
                victim.ready.set()
            entry.ready.set()

    def _put(self, entry: Entry, tier: str) -> float:
        """Store ``entry``'s bytes in ``tier`` (counted as a write there), then release it."""
        try:
            if tier == "gpu":
                seconds = self.gpu.transfer(entry.size)
                entry.data = None
            elif tier == "cpu":
                entry.data, seconds = self.cpu.store(entry.size)
            else:
                seconds = self.storage.write(entry.name, entry.size)
                entry.data = None
                if self.entries.get(entry.name) is not entry:  # dropped while written
                    self.storage.delete(entry.name)
        except Cancelled as exc:  # the bytes it wrote within the window count
            with self._stats_lock():
                self.stats.writes[tier].partial(exc.moved)
            raise
        else:
            with self._stats_lock():
                self.stats.writes[tier].add(entry.size, seconds)
            return seconds
        finally:
            entry.ready.set()

    def _drop(self, entry: Entry) -> float:
        """Delete a dropped entry's object (a full storage tier's LRU entry)."""
        try:
            self.storage.delete(entry.name)
            return 0.0
        finally:
            entry.ready.set()

    def _stats_lock(self) -> threading.Lock:
        assert self.stats.lock is not None
        return self.stats.lock

    def read(self, name: str) -> tuple[str | None, int, float]:
        """Read the entry whole: (its tier, or None on a miss; bytes moved; seconds)."""
        while True:
            entry = self.entries.get(name)
            if entry is None:
                return None, 0, 0.0
            entry.ready.wait()
            with self.lock:
                if not entry.ready.is_set() or self.entries.get(name) is not entry:
                    continue
                tier, data = entry.tier, entry.data
                self.lru[tier].move_to_end(name)
            break
        try:
            moved, seconds = self._load(entry, tier, data)
        except FileNotFoundError:
            if self.entries.get(name) is entry:
                raise
            return None, 0, 0.0  # dropped while being read: a miss
        except Cancelled as exc:  # the bytes it read within the window count
            with self._stats_lock():
                self.stats.reads[tier].partial(exc.moved)
            raise
        with self._stats_lock():
            self.stats.reads[tier].add(moved, seconds)
        return tier, moved, seconds

    def _load(self, entry: Entry, tier: str, data: bytearray | None) -> tuple[int, float]:
        """Read ``entry``'s bytes from ``tier``: (bytes moved, seconds)."""
        if data is not None:
            return len(data), self.cpu.load(data)
        if tier == "gpu":
            return entry.size, self.gpu.transfer(entry.size)
        return self.storage.read(entry.name, entry.size)

    def clear_storage(self) -> None:
        """Delete every entry's object from the storage tier (the run's files)."""
        for name in list(self.lru["storage"]):
            self.storage.delete(name)
