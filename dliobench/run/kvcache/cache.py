"""The tier waterfall: a new entry goes to the fastest tier whose budget can hold it, the
least recently used entries of a full tier moving down to the next one (GPU to CPU to
storage; the storage tier is unbounded), as upstream's ``allocate_cache`` does
(mlcommons/storage ``kv_cache_benchmark/kv_cache/cache.py``@23aa82ed).

Thread-safe: the bookkeeping is under one lock, the I/O outside it. An entry is registered
by the dispatcher before its request is queued (``expect``), so a later request reading it
waits for its write (``ready``) instead of missing it by a race: hits and misses are a
function of the schedule, not of timing.

Entries in flight are reserved (issue 54: a run whose storage capacity came from the free
space ended in ENOSPC): an entry being written or read (``busy``) is neither demoted nor
dropped, so its bytes stay counted; a dropped entry's bytes count until its file is deleted
(``freeing``); and a write to a full storage tier whose other entries are all in flight waits
for one to finish (``_wait_for_room``) rather than overfill the file system.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from dliobench.base.errors import DlioBenchError
from dliobench.base.units import size_text
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
    busy: int = 0  # reads and writes in flight: never demoted or dropped meanwhile


class Waterfall:
    """Entries over the tiers, with per-tier budgets in bytes and LRU order."""

    def __init__(self, budgets: dict[str, int], gpu: GpuTier, cpu: CpuTier,
                 storage: StorageTier, stats: KVStats) -> None:
        self.budgets = budgets
        self.gpu, self.cpu, self.storage, self.stats = gpu, cpu, storage, stats
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)  # an I/O ended or a dropped file went
        self.freeing = 0  # bytes of dropped entries whose files are not deleted yet
        self.pending = 0  # storage I/O in flight or placed to start: what can free room
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

    def _fits(self, tier: str, size: int) -> None:
        """Refuse an entry larger than the storage tier's capacity: no eviction makes room
        for it, and written it would fill the file system."""
        capacity = self.budgets.get("storage")
        if tier == "storage" and capacity is not None and size > capacity:
            raise DlioBenchError(
                f"a KV entry of {size_text(size)} is larger than the capacity of the storage "
                f"tier {self.storage.backend.describe()} ({size_text(capacity)}: "
                "kvcache.storage_capacity_gb, else 90 % of its free space); give a larger "
                "capacity or kvcache.cache_dir, or a smaller kvcache.entry_scale")

    def _idle(self, tier: str) -> Entry | None:
        """Under the lock: ``tier``'s least recently used entry with no I/O in flight."""
        return next((e for e in self.lru[tier].values() if not e.busy), None)

    def _room(self, tier: str, size: int, moves: list[tuple[Entry, str]],
              wait: bool = False) -> bool:
        """Under the lock: demote ``tier``'s idle LRU entries until ``size`` more bytes fit
        (the storage tier's, when it has a capacity, are deleted: "drop"); a GPU or CPU
        budget whose entries are all in flight is exceeded until they land. A victim the
        storage tier has no room for now (the rest in flight) is forgotten, as a dropped
        one; only a write's own entry waits for room (``wait``), holding nothing then."""
        if tier == "storage":
            return self._drop_room(size, moves, wait)
        while self.used[tier] + size > self.budgets[tier] and \
                (victim := self._idle(tier)) is not None:
            del self.lru[tier][victim.name]
            self.used[tier] -= victim.size
            below = ORDER[ORDER.index(tier) + 1]
            dest = below if below == "storage" or self.budgets[below] >= victim.size \
                else "storage"
            if not self._room(dest, victim.size, moves):
                self.entries.pop(victim.name, None)  # no room below: its readers miss
                victim.data = None
                continue
            self._place(victim, dest)
            victim.ready.clear()
            moves.append((victim, dest))
        return True

    def _drop_room(self, size: int, moves: list[tuple[Entry, str]], wait: bool) -> bool:
        """Under the lock: drop the storage tier's idle LRU entries until ``size`` more
        bytes fit its capacity, counting the files still being deleted; when the rest is
        in flight, wait for it (``wait``: ``_wait_for_room``) or say there is no room."""
        capacity = self.budgets.get("storage")
        if capacity is None:
            return True
        if size > capacity:  # a demoted entry no room can hold (a write's own is refused)
            return False
        mine = sum(v.size for v, dest in moves if dest == "drop")
        while self.used["storage"] + self.freeing - mine + size > capacity:
            victim = self._idle("storage")
            if victim is None:
                if not wait:
                    return False
                if not self._wait_for_room(moves):
                    return True  # nothing in flight: an overfull tier, its error the write's
                mine = 0
                continue
            del self.lru["storage"][victim.name]
            self.used["storage"] -= victim.size
            self.freeing += victim.size
            mine += victim.size
            self.entries.pop(victim.name, None)  # its readers miss from now on
            moves.append((victim, "drop"))
        return True

    def _wait_for_room(self, moves: list[tuple[Entry, str]]) -> bool:
        """Under the lock: delete the files this write dropped, then wait for an I/O in
        flight on the storage tier to end or another write's dropped file to go; False when
        nothing is in flight or the window has ended (the write then stops at its first
        chunk)."""
        for i, (victim, dest) in enumerate(moves):
            if dest == "drop":
                moves[i] = (victim, "gone")
                try:
                    self._drop(victim)
                finally:
                    self.freeing -= victim.size
        if (self.pending <= 0 and self.freeing <= 0) or time.perf_counter() > self.window.end:
            return False
        self.done.wait(timeout=0.05)  # a slice: the window's end is checked between
        return True

    def _place(self, entry: Entry, tier: str) -> None:
        entry.tier = tier
        entry.busy += 1  # its write is in flight from now on
        self.pending += tier == "storage"
        self.used[tier] += entry.size
        self.lru[tier][entry.name] = entry

    def _ended(self, entry: Entry, tier: str) -> None:
        """An I/O of ``entry`` on ``tier`` ended: it may be demoted or dropped again."""
        with self.lock:
            entry.busy -= 1
            self.pending -= tier == "storage"
            self.done.notify_all()

    def write(self, name: str, size: int) -> float:
        """Write the entry (made room for first); seconds of I/O it took, moves included."""
        moves: list[tuple[Entry, str]] = []
        with self.lock:
            entry = self.entries.setdefault(name, Entry(name))
            entry.size = size
            tier = self._target(size)
            self._fits(tier, size)
            self._room(tier, size, moves, wait=True)
            self._place(entry, tier)
        try:  # the dropped files go first: the room they free is this write's
            for victim, dest in moves:
                if dest == "drop":
                    self._drop(victim)
            seconds = sum(self._put(victim, dest) for victim, dest in moves
                          if dest not in ("drop", "gone"))
            return seconds + self._put(entry, tier)
        finally:  # a failed write releases its readers too (they fail, not hang)
            with self.lock:
                for victim, dest in [*moves, (entry, tier)]:
                    if dest == "drop":
                        self.freeing -= victim.size  # deleted (or failed: counted no more)
                    elif dest != "gone":
                        victim.busy -= 1
                        self.pending -= dest == "storage"
                self.done.notify_all()
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
                if name in self.lru[tier]:  # (not while a write demotes it)
                    self.lru[tier].move_to_end(name)
                entry.busy += 1  # read in flight: not demoted or dropped meanwhile
                self.pending += tier == "storage"
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
        finally:
            self._ended(entry, tier)
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
