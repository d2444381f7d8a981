"""Metric functions on hand-built timelines with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from dliobench.results.metrics import combine_ranks, epoch_metrics, window


def timeline(waits: list[float], computes: list[float], samples: int = 4,
             nbytes: int = 1000) -> dict[str, np.ndarray]:
    """Back-to-back steps starting at t=0."""
    n = len(waits)
    spans = np.array(waits) + np.array(computes)
    starts = np.concatenate([[0.0], np.cumsum(spans)[:-1]])
    return {"step": np.arange(n, dtype=float), "t_start_s": starts, "wait_s": np.array(waits),
            "compute_s": np.array(computes), "comm_s": np.zeros(n), "ckpt_s": np.zeros(n),
            "samples": np.full(n, samples, dtype=float), "bytes": np.full(n, nbytes, dtype=float)}


def test_window() -> None:
    assert window(10, 1, 0) == slice(1, 10)
    assert window(10, 2, 3) == slice(2, 7)
    assert window(1, 1, 0) == slice(1, 1)
    assert window(3, 2, 5) == slice(2, 2)


def test_au_and_throughput_exclude_the_first_step() -> None:
    cols = timeline([5.0, 0.1, 0.1, 0.1], [0.3, 0.3, 0.3, 0.3])
    m = epoch_metrics(cols, exclude_start=1, exclude_end=0)
    assert m["steps"] == 3
    assert m["au"] == pytest.approx(0.9 / 1.2)
    assert m["samples_per_s"] == pytest.approx(12 / 1.2)
    assert m["bytes_per_s"] == pytest.approx(3000 / 1.2)
    assert m["first_step_s"] == pytest.approx(5.3)
    assert m["first_wait_s"] == pytest.approx(5.0)
    assert m["wait_p50_s"] == pytest.approx(0.1)
    assert m["wait_max_s"] == pytest.approx(0.1)


def test_gaps_between_steps_count_as_wall_time() -> None:
    cols = timeline([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    cols["t_start_s"] = np.array([0.0, 1.5, 3.0])  # 0.5 s of overhead after each step
    m = epoch_metrics(cols, exclude_start=0, exclude_end=0)
    assert m["au"] == pytest.approx(3.0 / 4.0)


def test_zero_compute_gives_zero_au_and_finite_throughput() -> None:
    m = epoch_metrics(timeline([0.01] * 5, [0.0] * 5), 1, 0)
    assert m["au"] == 0.0
    assert m["samples_per_s"] == pytest.approx(16 / 0.04)


def test_no_counted_steps_gives_none_not_a_number() -> None:
    m = epoch_metrics(timeline([0.5], [0.5]), 1, 0)
    assert m["steps"] == 0
    assert m["au"] is None and m["samples_per_s"] is None and m["wait_p50_s"] is None
    assert m["first_step_s"] == pytest.approx(1.0)


def test_wait_percentiles() -> None:
    waits = [float(i) for i in range(101)]
    m = epoch_metrics(timeline(waits, [0.0] * 101), 0, 0)
    assert m["wait_p50_s"] == pytest.approx(50)
    assert m["wait_p90_s"] == pytest.approx(90)
    assert m["wait_p99_s"] == pytest.approx(99)
    assert m["wait_max_s"] == pytest.approx(100)


def test_combine_ranks_means_au_and_sums_rates() -> None:
    fast = epoch_metrics(timeline([0.0] * 3, [1.0] * 3), 0, 0)   # AU 1.0, 4 samples/s
    slow = epoch_metrics(timeline([1.0] * 3, [1.0] * 3), 0, 0)   # AU 0.5, 2 samples/s
    run = combine_ranks([[fast], [slow]], np.array([0.0, 1.0]))
    assert run["au"] == pytest.approx(0.75)
    assert run["au_min"] == pytest.approx(0.5)
    assert run["samples_per_s"] == pytest.approx(6.0)
    assert run["samples"] == 24


def test_stragglers_are_the_slow_ranks() -> None:
    from dliobench.results.metrics import stragglers

    ranks = [{"rank": 0, "samples_per_s": 100.0}, {"rank": 1, "samples_per_s": 98.0},
             {"rank": 2, "samples_per_s": 60.0}, {"rank": 3, "samples_per_s": None}]
    assert stragglers(ranks) == [2]
    assert stragglers(ranks[:1]) == []
