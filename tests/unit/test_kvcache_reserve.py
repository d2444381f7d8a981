"""The waterfall keeps entries in flight where they are (issue 54): an entry being written is
not demoted under its writer (main demoted it, and a reader then found its file missing or
the tier over its capacity), and an entry larger than the storage tier's capacity is one
sentence instead of a file system filled."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from dliobench.base.errors import DlioBenchError
from dliobench.results.kv_stats import KVStats
from dliobench.run.kvcache.cache import Waterfall
from dliobench.run.kvcache.tiers import CpuTier, GpuTier, StorageTier, make_fill
from dliobench.storage.posix import PosixBackend

GUARD_S = 10.0  # a hang guard: each transfer below takes 0.2 s


def _cache(tmp_path: Path, budgets: dict[str, int], gpu_rate: float = 1e12) -> Waterfall:
    backend = PosixBackend(str(tmp_path))
    backend.make_room("run")
    fill = make_fill(6)
    return Waterfall(budgets, GpuTier(gpu_rate), CpuTier(fill),
                     StorageTier(backend, "run", False, fill), KVStats())


def test_an_entry_in_flight_is_not_demoted(tmp_path: Path) -> None:
    """a/1 moves into a 250 kB GPU tier at 1 MB/s (0.2 s); b/1 needs the room meanwhile: the
    tier holds both until a/1 lands (main demoted a/1 to storage mid-transfer)."""
    cache = _cache(tmp_path, {"gpu": 250_000, "cpu": 0}, gpu_rate=1e6)
    writer = threading.Thread(target=cache.write, args=("a/1", 200_000), daemon=True)
    writer.start()
    deadline = time.monotonic() + GUARD_S
    while not ("a/1" in cache.entries and cache.entries["a/1"].busy):
        assert time.monotonic() < deadline and writer.is_alive()
        time.sleep(0.001)
    cache.write("b/1", 200_000)
    writer.join(GUARD_S)
    assert [cache.entries[n].tier for n in ("a/1", "b/1")] == ["gpu", "gpu"]
    assert not list((tmp_path / "run").iterdir())
    cache.write("c/1", 200_000)  # both idle now: the least recent goes down as before
    assert cache.entries["a/1"].tier == "storage" and (tmp_path / "run" / "a_1").exists()


def test_an_entry_larger_than_the_capacity_is_one_sentence(tmp_path: Path) -> None:
    cache = _cache(tmp_path, {"gpu": 0, "cpu": 0, "storage": 250_000})
    with pytest.raises(DlioBenchError, match=r"a KV entry of 300.0 kB is larger than the "
                       rf"capacity of the storage tier {tmp_path} \(250.0 kB"):
        cache.write("a/1", 300_000)
    assert not list((tmp_path / "run").iterdir())
