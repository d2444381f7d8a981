"""Compute per batch measured by training a real small PyTorch model (run.model_compute),
and said where it came from in the workload (train.computation_source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dliobench.report.trace_command import FromTrace, from_trace

pytest.importorskip("torch")

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def test_measured_compute_is_written_with_its_source(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from dliobench.run.model_compute import measure

    m = measure(batch_size=2, steps=2, warmup=1)
    assert m.mean > 0 and "training steps of a small residual CNN" in m.where
    assert "on cpu" in m.where or "on NVIDIA" in m.where
    out = tmp_path / "job.yaml"
    from_trace(FromTrace(DATA / "np_load.pfw", out, batch_size=2, measure_compute=True))
    text = out.read_text()
    assert 'computation_source: "measured: 10 training steps' in text
    assert "not inferred: train.computation_time" not in capsys.readouterr().out
