"""The predictor's client CPU from a real client-ceiling measurement on this host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.report.predict import Scale, predict
from dliobench.run import ceiling, session
from tests.conftest import tiny_workload


def test_ceiling_measurement_feeds_the_prediction(workdir: Path,
                                                  write_workload: Callable[..., Path]) -> None:
    doc = tiny_workload(dataset={"format": "npy", "record_length_bytes": 16384},
                        reader={"batch_size": 4}, train={"computation_time": 0.01})
    config, _ = load(write_workload(doc), [])
    before = predict(config, Scale(2, 2, 2**30))["client"]
    assert before["ceiling_samples_per_s_per_rank"] is None  # nothing measured yet
    measured = session.measure_ceiling(config, World.single(), LocalComm())
    client = predict(config, Scale(2, 2, 2**30))["client"]  # 1 rank per host, as measured
    then = (ceiling.entry(config, World.single()) or {}).get("load") or {}
    if not ceiling.load_matches(then, client["ceiling_load"]):  # a shared host's load moved:
        assert client["ceiling_samples_per_s_per_rank"] is None  # not reused, as run does
        assert client["ceiling_stale_load"] == then
        return
    assert client["ceiling_samples_per_s_per_rank"] == pytest.approx(measured)
    cpu = client["cpu_s_per_sample"]
    assert cpu is not None and 0 < cpu < 1
    demand = 4 * config.metric.au / 0.01
    assert client["cpu_cores_per_host"] == pytest.approx(cpu * demand)
    assert client["client_keeps_up"] == (measured >= demand)
