"""The KV-cache run's pieces on real inputs: the seeded schedule (a pure function of the seed
and rank), the model presets' entry sizes, ShareGPT replay of a real file, and the tier
waterfall writing and reading real files."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from dliobench.base.errors import InputError
from dliobench.config.kvcache_keys import KVCacheConfig
from dliobench.results.kv_stats import KVStats
from dliobench.run.kvcache import sharegpt
from dliobench.run.kvcache.cache import Waterfall
from dliobench.run.kvcache.models import PRESETS
from dliobench.run.kvcache.schedule import schedule
from dliobench.run.kvcache.tiers import CpuTier, GpuTier, StorageTier, make_fill
from dliobench.storage.posix import PosixBackend

SHAREGPT = Path(__file__).resolve().parents[1] / "data" / "sharegpt_small.json"
KV = KVCacheConfig(num_users=8, duration=5.0)


def test_schedule_is_a_function_of_seed_and_rank() -> None:
    first, again = schedule(KV, 0), schedule(KV, 0)
    assert first == again and len(first) > 8
    assert schedule(replace(KV, seed=43), 0) != first
    assert schedule(KV, 1) != first  # each rank its own users
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(first))
    assert all(r.arrival_s < KV.duration for r in first)
    assert {r.qos for r in schedule(replace(KV, num_users=64), 0)} == {
        "interactive", "responsive", "batch"}


def test_schedule_bounds_turns_and_requests() -> None:
    assert len(schedule(replace(KV, max_requests=7), 0)) == 7
    single = schedule(replace(KV, disable_multi_turn=True, disable_prefix_caching=True), 0)
    assert {r.turn for r in single} == {1} and {r.prefix for r in single} == {-1}
    multi = schedule(KV, 0)
    assert max(r.turn for r in multi) > 1
    later = next(r for r in multi if r.turn == 2)
    assert later.previous_keys == [f"u{later.user}/c{later.conversation}/t1"]
    paced = schedule(replace(KV, request_rate=2.0, max_requests=6), 0)
    assert all(b.arrival_s - a.arrival_s >= 0.5 - 1e-9 for a, b in itertools.pairwise(paced))


def test_presets_kv_bytes_per_token() -> None:
    """2 x layers x KV heads x head size x 2 bytes (models.py@64f05b37's shapes)."""
    assert PRESETS["llama3.1-8b"].kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131072
    assert PRESETS["llama3.1-70b-instruct"].kv_bytes_per_token == 2 * 80 * 8 * 128 * 2
    assert PRESETS["llama2-7b"].kv_bytes_per_token == 2 * 32 * 32 * 128 * 2
    assert PRESETS["mistral-7b"].kv_bytes_per_token == 131072
    assert PRESETS["tiny-1b"].kv_bytes_per_token == 2 * 12 * 4 * 128 * 2


def test_sharegpt_replay_reads_conversation_lengths(tmp_path: Path) -> None:
    conversations = sharegpt.load(str(SHAREGPT), 500, 5)
    assert len(conversations) == 5 and all(conversations)
    replayed = schedule(replace(KV, max_requests=10), 0, conversations)
    assert {(r.context_tokens, r.generate_tokens) for r in replayed} <= {
        t for c in conversations for t in c}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="is not JSON"):
        sharegpt.load(str(bad), 10, 2)


def test_waterfall_demotes_least_recent_entries_to_storage(tmp_path: Path) -> None:
    backend = PosixBackend(str(tmp_path))
    backend.make_room("run")
    fill = make_fill(1)
    stats = KVStats()
    cache = Waterfall({"gpu": 0, "cpu": 250_000}, GpuTier(1e12), CpuTier(fill),
                      StorageTier(backend, "run", True, fill), stats)
    for name in ("a/1", "b/1", "c/1"):
        cache.write(name, 100_000)
    assert cache.read("a/1")[0] == "storage" and cache.read("c/1")[0] == "cpu"
    assert (tmp_path / "run" / "a_1").stat().st_size == 100_000
    assert stats.writes["storage"].bytes == 100_000 and stats.writes["cpu"].count == 3
    assert cache.read("missing")[0] is None
    cache.clear_storage()
    assert not list((tmp_path / "run").iterdir())


def test_storage_reads_an_entry_in_bounded_chunks(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dliobench.run.kvcache import tiers

    backend = PosixBackend(str(tmp_path))
    backend.make_room("r")
    storage = StorageTier(backend, "r", True, make_fill(2))
    storage.write("e/1", 10_000)
    calls: list[int] = []
    real = PosixBackend.read_range
    monkeypatch.setattr(tiers, "CHUNK", 4096)
    monkeypatch.setattr(PosixBackend, "read_range",
                        lambda self, *a, **k: calls.append(a[2]) or real(self, *a, **k))
    moved, seconds = storage.read("e/1", 10_000)
    assert moved == 10_000 and seconds > 0 and calls == [4096, 4096, 1808]


def test_a_failed_demotion_releases_its_readers(tmp_path: Path) -> None:
    """The storage folder is gone: making room for c/1 must demote a/1 and b/1, the first
    demotion fails, and reads of b/1 and c/1 return instead of waiting for ever."""
    fill = make_fill(3)
    storage = StorageTier(PosixBackend(str(tmp_path / "gone")), "run", True, fill)
    cache = Waterfall({"gpu": 0, "cpu": 250_000}, GpuTier(1e12), CpuTier(fill), storage,
                      KVStats())
    cache.write("a/1", 100_000)
    cache.write("b/1", 100_000)
    with pytest.raises(FileNotFoundError):
        cache.write("c/1", 200_000)
    outcome: list[object] = []
    reader = threading.Thread(target=lambda: outcome.extend(
        _read_or_error(cache, name) for name in ("b/1", "c/1")), daemon=True)
    reader.start()
    reader.join(timeout=10)  # a hang guard: the reads take milliseconds
    assert not reader.is_alive() and len(outcome) == 2


def _read_or_error(cache: Waterfall, name: str) -> object:
    try:
        return cache.read(name)
    except OSError as exc:
        return exc


def test_a_failed_request_gives_up_its_entry(tmp_path: Path) -> None:
    """Turn 1 fails before its prefill (its shared prefix's file is gone): turn 2, waiting to
    reload turn 1, misses it instead of waiting for ever."""
    from contextlib import nullcontext

    from dliobench.run.kvcache.engine import Server
    from dliobench.run.kvcache.schedule import Request

    backend = PosixBackend(str(tmp_path))
    backend.make_room("run")
    fill, stats = make_fill(4), KVStats()
    cache = Waterfall({"gpu": 0, "cpu": 0}, GpuTier(1e12), CpuTier(fill),
                      StorageTier(backend, "run", False, fill), stats)
    cache.write("prefix/p0", 1000)
    (tmp_path / "run" / "prefix_p0").unlink()
    first, second = (Request(0.0, 0, 1, t, 2000, 10, "batch", 0 if t == 1 else -1)
                     for t in (1, 2))
    for r in (first, second):
        cache.expect(r.key)
    server = Server(KV, cache, stats, 1.0, 0.0, nullcontext())
    with pytest.raises(FileNotFoundError):
        server.serve(first, False)
    reader = threading.Thread(target=server.serve, args=(second, False), daemon=True)
    reader.start()
    reader.join(timeout=10)  # a hang guard: it takes milliseconds
    assert not reader.is_alive() and stats.multi_turn_misses == 1 and stats.requests == 1


def test_a_full_storage_tier_drops_its_least_recent_entries(tmp_path: Path) -> None:
    """--storage-capacity-gb: beyond it the least recently used files are deleted, their
    reads miss."""
    backend = PosixBackend(str(tmp_path))
    backend.make_room("run")
    fill = make_fill(5)
    cache = Waterfall({"gpu": 0, "cpu": 0, "storage": 250_000}, GpuTier(1e12), CpuTier(fill),
                      StorageTier(backend, "run", True, fill), KVStats())
    for name in ("a/1", "b/1"):
        cache.write(name, 100_000)
    cache.read("a/1")  # a/1 is now the more recent
    cache.write("c/1", 100_000)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["a_1", "c_1"]
    assert cache.read("b/1")[0] is None and cache.read("a/1")[0] == "storage"


def test_the_verdict_names_what_limited_the_run() -> None:
    """Queued requests (median wait 0.5 s): the client when one rank's interpreter held a
    core (user CPU 95 % of the time, the GIL's bound), else the tier with the I/O time."""
    from dliobench.results.kv_section import verdict

    def rank(user_s: float) -> KVStats:
        s = KVStats(elapsed_s=10.0, cpu_s=user_s + 0.5, user_s=user_s, cpu_cores=16.0)
        for _ in range(10):
            s.queue_wait.record(0.5, 0.5)
            s.reads["storage"].add(1 << 20, 0.2)
            s.reads["cpu"].add(1 << 20, 0.001)
        return s

    assert verdict(rank(9.5), [rank(9.5)])["limiter"] == "client CPU"
    assert verdict(rank(1.0), [rank(1.0)])["limiter"] == "storage"
    calm = KVStats(elapsed_s=10.0)
    calm.queue_wait.record(0.001, 0.001)
    assert verdict(calm, [calm])["limiter"] == "none"
