"""A sweep's closing lines give each point's rates beside its AU: MB/s is what a storage
engineer compares, AU alone hides it."""

from __future__ import annotations

from typing import Any

from dliobench.report.sweep import PointOutcome
from dliobench.report.sweep_command import point_status


def outcome(au: float | None, limiter: str, meets: bool | None) -> PointOutcome:
    result: Any = {"metrics": {"au": au, "samples_per_s": 1234.56, "bytes_per_s": 343.6e6},
                   "verdict": {"limiter": limiter, "meets_floor": meets}}
    return PointOutcome("r1", 1, {}, run_dir="x", result=result)


def test_each_point_gives_its_rates_with_its_au() -> None:
    assert point_status(outcome(0.832, "client", False)) == \
        "AU 83.2 %, 1,234.6 samples/s, 343.6 MB/s (client-limited)"
    assert point_status(outcome(0.95, "none", True)) == "AU 95.0 %, 1,234.6 samples/s, 343.6 MB/s"
    assert point_status(outcome(None, "not applicable", None)) == \
        "1,234.6 samples/s, 343.6 MB/s (compute 0: no AU)"
    assert point_status(PointOutcome("r2", 2, {}, error="boom")) == "error: boom"
