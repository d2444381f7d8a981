"""A KV-cache run's window and what outlives it: a run ends at its duration however slow its
tier (the requests in flight stopped at their next chunk of I/O, not counted; their bytes
within the window counted), and a rank killed with SIGKILL leaves journals from which
``dliobench recover`` builds a partial ``kvcache`` result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.config.kvcache_keys import KVCacheConfig
from dliobench.results.kv_stats import KVStats
from dliobench.run.kvcache.cache import Waterfall
from dliobench.run.kvcache.engine import serve_schedule
from dliobench.run.kvcache.models import PRESETS
from dliobench.run.kvcache.schedule import schedule
from dliobench.run.kvcache.tiers import CpuTier, GpuTier, StorageTier, make_fill
from dliobench.storage.posix import PosixBackend
from tests.conftest import last_result

SLOW_GPU = 1e6  # bytes/s: a tiny-1b entry (up to 100 MB for a chatbot) takes up to 100 s
KV = KVCacheConfig(model="tiny-1b", num_users=8, duration=0.5, gpu_mem_gb=64, cpu_mem_gb=0,
                   generation_mode="none", disable_prefix_caching=True)
BOUND_S = 0.5  # the end past the duration: a transfer stops at once, a chunk's read or write
#                (16 MiB) on storage at its rate; here the threads' return and the clean-up


def test_a_run_ends_at_its_duration_on_a_slow_tier(tmp_path: Path) -> None:
    """Eight users on a GPU tier moving 1 MB/s: the four requests arriving in the 0.5 s
    are in flight at its end, and main's engine waited for them (minutes). Now the run
    ends within the bound, its requests unfinished and uncounted, the bytes moved in the
    window counted."""
    fill = make_fill(KV.seed)
    stats = KVStats()
    cache = Waterfall({"gpu": 64 << 30, "cpu": 0}, GpuTier(SLOW_GPU), CpuTier(fill),
                      StorageTier(PosixBackend(str(tmp_path)), "run", True, fill), stats)
    requests = schedule(KV, 0)
    per_token = PRESETS[KV.model].kv_bytes_per_token
    runner = threading.Thread(target=serve_schedule, daemon=True,
                              args=(KV, requests, cache, stats, per_token))
    began = time.perf_counter()
    runner.start()
    runner.join(timeout=30)  # a hang guard: main's engine is still serving then
    took = time.perf_counter() - began
    assert not runner.is_alive(), "the run went on past its duration"
    assert took <= KV.duration + BOUND_S, took
    assert stats.elapsed_s == KV.duration and stats.requests == 0
    assert stats.unfinished == 4 and stats.unfinished + stats.cancelled == len(requests)
    moved = stats.writes["gpu"].bytes
    assert 0 < moved <= SLOW_GPU * KV.duration * 4  # four transfers at 1 MB/s, in the window
    assert stats.writes["gpu"].count == 0  # none whole: no operation, no latency counted


def test_a_killed_run_is_recovered_from_its_journal(workdir: Path,
                                                    run_cli: Callable[..., int],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A single rank SIGKILLed once it has journaled its figures: ``recover`` builds a
    partial result whose ``kvcache`` section holds what the rank moved (main: no journal,
    nothing to recover)."""
    argv = [sys.executable, "-m", "dliobench", "kvcache", "--model", "tiny-1b",
            "--num-users", "2", "--duration", "60", "--gpu-mem-gb", "64", "--cpu-mem-gb", "0",
            "--gpu-bandwidth-gbps", "0.05", "--generation-mode", "none",
            f"output.folder={workdir / 'reports'}"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        journal = _wait_for_record(workdir / "reports", proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_dir = journal.parents[1]
    capsys.readouterr()
    assert run_cli("recover", str(run_dir)) == 0
    said = capsys.readouterr().out  # a KV-cache rank serves requests (main: "0 steps")
    assert "rank 0: " in said and " requests, no end record" in said and "steps" not in said
    result = last_result(workdir / "reports")
    kv = result["kvcache"]
    assert result["status"] == "partial" and kv["model"] == "tiny-1b"
    assert kv["cache_stats"]["tier_gpu_kv_bytes_written_gb"] > 0
    assert 0 < kv["elapsed_time"] < 60
    assert result["run_id"] == run_dir.name


def _wait_for_record(reports: Path, proc: subprocess.Popen[bytes]) -> Path:
    """The rank's journal once it holds a figures record (a hang guard of 30 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        for path in reports.glob("*/journal/rank-00000.jsonl"):
            if b'"k":"kvcache"' in path.read_bytes():
                return path
        time.sleep(0.1)
    raise AssertionError(f"no figures journaled (exit code {proc.poll()})")
