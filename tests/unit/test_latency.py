"""Request latency percentiles kept in log-spaced bins (``storage.latency``)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from dliobench.storage import latency
from dliobench.storage.latency import LatencyLog


def _nearest_rank(values: np.ndarray, q: float) -> float:
    ordered = np.sort(values)
    return float(ordered[max(1, math.ceil(q / 100 * values.size)) - 1])


def test_percentiles_are_within_the_bins_resolution_and_maxima_exact() -> None:
    rng = np.random.default_rng(7)
    first = rng.lognormal(math.log(2e-3), 0.8, 5000)  # around 2 ms, a long tail
    total = first + rng.lognormal(math.log(8e-3), 0.5, 5000)
    log = LatencyLog()
    for f, t in zip(first, total, strict=True):
        log.record(float(f), float(t))
    s = log.summary()
    assert s["requests"] == 5000
    for name, values in (("first_byte", first), ("total", total)):
        for q in (50, 99):
            assert s[f"{name}_p{q}_s"] == pytest.approx(_nearest_rank(values, q), rel=0.012)
        assert s[f"{name}_max_s"] == float(values.max())


def test_logs_merge_as_if_one_and_an_empty_one_says_none() -> None:
    rng = np.random.default_rng(3)
    values = rng.uniform(1e-4, 1e-1, (2, 300))
    one, parts = LatencyLog(), [LatencyLog(), LatencyLog()]
    for i, v in enumerate(values[0]):
        one.record(float(v), float(values[1][i]))
        parts[i % 2].record(float(v), float(values[1][i]))
    merged = LatencyLog()
    for part in parts:
        merged.merge(pickle.loads(pickle.dumps(part)))  # as a loader worker ships it
    assert merged.summary() == one.summary()
    empty = LatencyLog().summary()
    assert empty["requests"] == 0 and empty["total_p99_s"] is None


def test_a_process_log_is_taken_once() -> None:
    latency.take()
    latency.record(0.001, 0.004)
    latency.merge(None)
    got = latency.take()
    assert got is not None and got.count == 1 and got.total_max_s == 0.004
    assert latency.take() is None


def test_a_log_travels_as_integers_and_merges_the_same() -> None:
    """A DALI worker sends its requests as integers beside a sample; read back, they merge
    into the same figures as the log itself (maxima to the nanosecond)."""
    log = LatencyLog()
    for first, total in ((0.0012, 0.004), (0.0007, 0.0301), (2e-7, 3e-7), (0.5, 1.25)):
        log.record(first, total)
    back = LatencyLog.from_ints(log.as_ints())
    assert back == log
    merged, direct = LatencyLog(), LatencyLog()
    merged.merge(back)
    direct.merge(log)
    assert merged.summary() == direct.summary()
