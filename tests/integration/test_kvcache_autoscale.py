"""``--enable-autoscaling`` (upstream's ``WorkloadAutoscaler``): in ``qos`` mode a rank's
active users shrink when the interval's storage I/O P95 is over upstream's threshold (an
emulated slow GPU tier) and grow when under (a fast one); in ``capacity`` mode they grow
until the throughput stops rising, then the run stops; the timeline is in ``result.json``,
upstream's ``autoscaling_stats``/``autoscaling_summary`` in ``summary.json``, and a line in
the console. On main the options were recorded only: the users never changed."""

from __future__ import annotations

import dataclasses
import json
import threading
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

KV = KVCacheConfig(model="tiny-1b", num_users=5, duration=1.0, gpu_mem_gb=64, cpu_mem_gb=0,
                   generation_mode="none", disable_multi_turn=True, entry_scale=0.01,
                   enable_autoscaling=True, autoscaler_interval=0.1, autoscaler_max_users=40)
SLOW_GPU, FAST_GPU = 2e7, 25e9  # bytes/s: a request's I/O ~150 ms (over 88 ms), or ~0.1 ms


def _serve(tmp: Path, rate: float, out: dict[str, KVStats], kv: KVCacheConfig = KV) -> None:
    tmp.mkdir()
    stats = KVStats()
    fill = make_fill(KV.seed)
    cache = Waterfall({"gpu": 64 << 30, "cpu": 0}, GpuTier(rate), CpuTier(fill),
                      StorageTier(PosixBackend(str(tmp)), "run", True, fill), stats)
    per_token = PRESETS[KV.model].kv_bytes_per_token * KV.entry_scale
    serve_schedule(kv, schedule(kv, 0), cache, stats, per_token)
    out[str(rate) if kv is KV else "max_requests"] = stats


def test_qos_mode_shrinks_users_over_the_p95_threshold_and_grows_them_under(
        tmp_path: Path) -> None:
    """The same seeded users on a slow and a fast GPU tier, side by side: the slow one
    scales down (each scale-down after samples over 88 ms), the fast one only up; only the
    active users' requests are offered, and ``max_requests`` counts those."""
    out: dict[str, KVStats] = {}
    runs = [threading.Thread(target=_serve, args=(tmp_path / str(r), r, out), daemon=True)
            for r in (SLOW_GPU, FAST_GPU)]
    capped = dataclasses.replace(KV, max_requests=6)  # main's schedule: the first 6 of 40
    runs.append(threading.Thread(target=_serve, daemon=True,  # users, 5 active: 0 served
                                 args=(tmp_path / "capped", FAST_GPU, out, capped)))
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=30)  # a hang guard (the runs take 1 s)
    slow, fast = out[str(SLOW_GPU)].autoscaling, out[str(FAST_GPU)].autoscaling
    assert slow is not None and fast is not None
    downs = [e for e in slow["autoscaling_stats"] if e["action"] == "scale_down"]
    assert downs and all(e["read_latency_p95_ms"] > 88 for e in downs), slow["timeline"]
    assert slow["autoscaling_summary"]["final_users"] < slow["most_users"], slow["timeline"]
    ups = [e for e in fast["autoscaling_stats"] if e["action"] == "scale_up"]
    assert len(ups) >= 3 and fast["autoscaling_summary"]["final_users"] > KV.num_users
    assert all(e["action"] != "scale_down" for e in fast["timeline"])
    assert len(schedule(dataclasses.replace(KV, enable_autoscaling=False), 0)) \
        < len(schedule(KV, 0))  # drawn for 40 users, offered for the active ones
    assert out[str(FAST_GPU)].scheduled < len(schedule(KV, 0))
    assert out["max_requests"].requests == out["max_requests"].scheduled == 6


def test_capacity_mode_stops_when_throughput_stops_rising(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    """Fifty users capped at 10 requests/s: users grow while the throughput beats its peak
    by 1 %, then two samples that do not stop the run before its duration; the timeline is
    in result.json, upstream's names in summary.json, the changes on the console."""
    code = run_cli("kvcache", "--model", "tiny-1b", "--num-users", "50", "--duration", "3",
                   "--generation-mode", "none", "--enable-autoscaling", "--autoscaler-mode",
                   "capacity", "--request-rate", "10", "--entry-scale", "0.01",
                   "--cpu-mem-gb", "0", "--disable-multi-turn",
                   "kvcache.autoscaler_interval=0.15", f"output.folder={workdir / 'reports'}")
    assert code == 0
    result = last_result(workdir / "reports")
    scaled = result["kvcache"]["autoscaling"]
    assert scaled["mode"] == "capacity" and scaled["stopped"].startswith("throughput peaked")
    actions = [e["action"] for e in scaled["timeline"]]
    assert actions[0] == "scale_up" and actions[-1] == "stop"
    assert scaled["final_users"] > 50 and result["kvcache"]["elapsed_time"] < 3
    summary = json.loads((workdir / "reports" / result["run_id"] / "summary.json").read_text())
    upstream = summary["summary"]
    assert upstream["autoscaling_summary"]["initial_users"] == 50
    assert upstream["autoscaling_summary"]["peak_user_count"] >= 50
    assert upstream["autoscaling_stats"][-1]["action"] == "stop"
    assert "capacity every 0.15 s: 50 users ->" in " ".join(capsys.readouterr().out.split())
