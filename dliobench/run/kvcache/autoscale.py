"""``--enable-autoscaling``: the number of active users of a rank, changed at a fixed interval
from what the interval measured, as upstream's ``WorkloadAutoscaler`` does (mlcommons/storage
``kv_cache_benchmark/kv-cache.py``@17335a71 and ``kv_cache/monitoring.py``, driven by
``kv_cache/benchmark.py``@23aa82ed ``monitor_stats``).

Upstream's rules kept: a decision every ``scale_interval`` (10 s); ``qos`` mode scales users
x1.2 (``int``, at most ``max_users``) while the saturation is under 0.9 x the target 0.8,
x0.8 (at least 1) after 2 samples in a row over 1.1 x 0.8, then holds 3 intervals (its
cooldown), and takes no decision on its first sample (no metrics yet); ``capacity`` mode
adds max(int(users x 0.4), 5) users (at most 100) on its first sample, then
max(int(users x 0.2), 5) while the throughput (tokens so far over the time so far) beats its
peak by 1 %, and stops the run at the second sample that does not. Users are capped at 500
(``monitor_stats``'s ``min(target_users, 500)``). Its history holds an entry per change
(``scaling_history``) and its summary the initial, final (and in ``capacity`` mode peak)
users.

Ours: the users are a prefix of the schedule's users, drawn up front for the most users the
autoscaler may reach, so a run with the same measurements activates the same requests; and
``qos`` mode's saturation is the interval's storage I/O P95 over upstream's read-latency
threshold (100 ms, ``saturation_detection.read_latency_p95_threshold_ms``), capped at 1:
upstream's latency factor, without its plateau factor (0.5 unless the last 10 samples'
throughput is flat and their latency rising) and its 10-sample warm-up (0 before), which
together keep upstream's saturation under the scale-down threshold almost always.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dliobench.config.kvcache_keys import KVCacheConfig
from dliobench.results.kv_stats import KVStats

TARGET_SATURATION = 0.8  # benchmark.py@23aa82ed IntegratedBenchmark target_saturation
READ_P95_THRESHOLD_MS = 100.0  # monitoring.py saturation_detection default
USER_CAP = 500  # monitor_stats: min(target_users, 500)
COOLDOWN = 3  # WorkloadAutoscaler.cooldown_period
CAPACITY_STEP = (5, 100)  # capacity_min_step, capacity_max_step


@dataclass
class Autoscaler:
    """One rank's active-user count and its decisions (upstream's ``WorkloadAutoscaler``)."""

    mode: str
    users: int
    max_users: int
    cooldown: int = 0
    trend: int = 0  # upstream's downward_trend_count
    samples: int = 0
    peak_throughput: float = 0.0
    peak_users: int = 0
    stopped: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)  # the changes (upstream's)
    timeline: list[dict[str, Any]] = field(default_factory=list)  # every sample (ours)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def active(self, user: int) -> bool:
        """Whether ``user``'s requests are offered now (the first ``users`` are)."""
        return user < self.users

    def tick(self, at_s: float, p95_ms: float | None, throughput: float) -> str:
        """One sample at ``at_s`` seconds: the action (``scale_up``, ``scale_down``,
        ``hold``, ``stop``) taken from the interval's storage I/O P95 and the throughput."""
        with self.lock:
            self.samples += 1
            before = self.users
            action = (self._capacity(throughput) if self.mode == "capacity"
                      else self._qos(p95_ms))
            entry = {"timestamp": round(at_s, 3), "mode": self.mode, "action": action,
                     "users": self.users, "saturation_level": _saturation(p95_ms),
                     "read_latency_p95_ms": p95_ms, "throughput_tokens_per_sec": throughput}
            self.timeline.append(entry)
            if action != "hold" and (self.users != before or action == "stop"):
                self.history.append(entry)
            return action

    def _qos(self, p95_ms: float | None) -> str:
        if self.samples == 1:  # upstream: no metrics on its first collection
            return "hold"
        if self.cooldown > 0:
            self.cooldown -= 1
            return "hold"
        saturation = _saturation(p95_ms)
        if saturation > TARGET_SATURATION * 1.1:
            self.trend += 1
            target = max(int(self.users * 0.8), 1)
            if self.trend >= 2 and target < self.users:
                self.users, self.cooldown = target, COOLDOWN
                return "scale_down"
        elif saturation < TARGET_SATURATION * 0.9:
            self.trend = 0
            target = min(int(self.users * 1.2), self.max_users)
            if target > self.users:
                self.users = target
                return "scale_up"
        else:
            self.trend = 0
        return "hold"

    def _capacity(self, throughput: float) -> str:
        if self.samples == 1 or throughput > self.peak_throughput * 1.01:
            fraction = 0.4 if self.samples == 1 else 0.2
            self.peak_throughput, self.peak_users, self.trend = throughput, self.users, 0
            step = min(max(int(self.users * fraction), CAPACITY_STEP[0]), CAPACITY_STEP[1])
            target = min(self.users + step, self.max_users)
            if target > self.users:
                self.users = target
                return "scale_up"
            return "hold"
        self.trend += 1
        if self.trend >= 2:
            self.stopped = (f"throughput peaked at {self.peak_throughput:,.1f} tokens/s with "
                            f"{self.peak_users} users")
            return "stop"
        return "hold"

    def record(self, initial: int, interval_s: float) -> dict[str, Any]:
        """The rank's figures: upstream's ``autoscaling_stats`` (its history) and
        ``autoscaling_summary``, with the interval and why it stopped."""
        summary: dict[str, Any] = {"initial_users": initial, "final_users": self.users,
                                   "total_scale_events": len(self.history)}
        if self.mode == "capacity":
            summary.update({"peak_user_count": self.peak_users,
                            "peak_throughput_tokens_per_sec": self.peak_throughput})
        return {"mode": self.mode, "interval_s": interval_s, "max_users": self.max_users,
                "samples": self.samples, "stopped": self.stopped,
                "most_users": max([initial] + [e["users"] for e in self.timeline]),
                "timeline": [{"t_s": e["timestamp"], "users": e["users"], "action": e["action"],
                              "p95_ms": e["read_latency_p95_ms"],
                              "tokens_per_sec": e["throughput_tokens_per_sec"]}
                             for e in self.timeline],
                "autoscaling_stats": list(self.history), "autoscaling_summary": summary}


def _saturation(p95_ms: float | None) -> float:
    """Upstream's latency factor: the storage P95 over its 100 ms threshold, capped at 1."""
    return 0.0 if p95_ms is None else min(p95_ms / READ_P95_THRESHOLD_MS, 1.0)


def max_users(num_users: int, cap: int) -> int:
    """The most users a rank's autoscaler may reach: ``cap`` (at most upstream's 500), never
    fewer than the users it starts with."""
    return max(num_users, min(cap, USER_CAP))


def drawn_users(kv: KVCacheConfig) -> int:
    """Users whose requests are drawn up front: the most the autoscaler may reach."""
    if not kv.enable_autoscaling:
        return kv.num_users
    return max_users(kv.num_users, kv.autoscaler_max_users)


@dataclass
class Monitor:
    """Samples a rank every ``interval_s`` (upstream's ``monitor_stats``): the P95 of the
    storage I/O times of the requests served since the last sample (``Server`` appends
    them; none served: the run's P95 so far) and the tokens so far over the time so far,
    into the autoscaler; ``stop`` is called when it asks to stop the run."""

    scaler: Autoscaler
    interval_s: float
    samples: list[float] = field(default_factory=list)  # under the stats' lock
    stopped_at: float | None = None

    def watch(self, stats: KVStats, start: float, end: float | None,
              quit_: threading.Event, stop: Callable[[float], None]) -> None:
        """Sleep an interval, sample, decide, until ``end`` (or ``quit_``), as upstream's
        loop does; a ``stop`` action ends the run at once."""
        while not quit_.wait(self.interval_s):
            now = time.perf_counter()
            if end is not None and now >= end:
                return
            assert stats.lock is not None
            with stats.lock:
                tokens, taken = stats.tokens, list(self.samples)
                self.samples.clear()
                so_far = stats.storage_io.total_percentile(95)
            p95 = float(np.percentile(taken, 95)) if taken else so_far
            p95_ms = None if p95 is None else p95 * 1e3
            if self.scaler.tick(now - start, p95_ms, tokens / (now - start)) == "stop":
                self.stopped_at = now
                stop(now)
                return


def monitor_for(kv: KVCacheConfig) -> Monitor | None:
    """The rank's monitor when autoscaling, starting with ``num_users`` active."""
    if not kv.enable_autoscaling:
        return None
    scaler = Autoscaler(kv.autoscaler_mode, kv.num_users, drawn_users(kv))
    return Monitor(scaler, kv.autoscaler_interval)
