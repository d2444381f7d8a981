"""MLPerf Storage's checkpoint figures (guidelines 2.2.3) and ours, from ranks' operations."""

from __future__ import annotations

import pytest

from dliobench.results import ckpt_summary
from dliobench.results.measured import CheckpointOp, RankTrace
from dliobench.results.timeline import Timeline


def trace(rank: int, *ops: CheckpointOp) -> RankTrace:
    t = RankTrace(rank, "host", Timeline(rank))
    t.checkpoint_ops.extend(ops)
    return t


def test_duration_is_the_slowest_rank_and_throughput_the_slowest_rate() -> None:
    traces = [trace(0, CheckpointOp("write", 0, 100, 1.0, 2),
                    CheckpointOp("write", 1, 100, 2.0, 2)),
              trace(1, CheckpointOp("write", 0, 300, 2.0, 2),
                    CheckpointOp("write", 1, 300, 1.0, 2))]
    s = ckpt_summary.op_summary(traces, "write")
    assert s is not None and ckpt_summary.op_summary(traces, "read") is None
    first = s["checkpoints"][0]
    assert first["duration_s"] == 2.0 and first["bytes"] == 400 and first["files"] == 4
    assert first["throughput_bytes_per_s"] == 100.0  # rank 0: 100 B in 1 s; rank 1: 150 B/s
    assert first["aggregate_bytes_per_s"] == 200.0
    second = s["checkpoints"][1]
    assert second["throughput_bytes_per_s"] == 50.0
    assert s["aggregate_bytes_per_s"] == pytest.approx(800 / 4.0)
    assert s["throughput_bytes_per_s_mean"] == pytest.approx(75.0)
    assert s["rank_s_p50"] == pytest.approx(1.5)


def test_reads_are_honest_by_eviction_or_by_volume() -> None:
    gib = 2**30
    assert ckpt_summary.read_honesty(True, gib, 16 * gib, 1, 10)["made_honest_by"] == "evicted"
    big = ckpt_summary.read_honesty(False, 100 * gib, 16 * gib, 2, 10)
    assert big["reads_honest"] and big["made_honest_by"].startswith("written >= 3x")
    small = ckpt_summary.read_honesty(False, 40 * gib, 16 * gib, 1, 10)
    assert not small["reads_honest"]
    assert "evict_before_read" in (ckpt_summary.warning(small) or "")
    assert ckpt_summary.read_honesty(False, gib, 16 * gib, 1, 0)["reads_honest"]  # no reads
