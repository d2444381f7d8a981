"""summary.json's figures against the formulas of the engine MLPerf Storage v3.0 ran,
mlcommons/DLIO_local_changes ``dlio_benchmark/utils/statscounter.py``
@2a9cf78b8361a936ab15fb54d00d08d6b4daf096 (v3.0.2), each written out here from its source
(``compute_metrics_train``, ``end_train``, ``end_run``, ``end_save_ckpt``/``end_load_ckpt``) and
applied to the same steps our metrics read; and the files a leaf gets for upstream's tools.
Facts only: the formulas are restated, no upstream code is copied."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest

from dliobench.results import metrics
from dliobench.results.dlio_outputs import (
    checkpoint_stats,
    metric_block,
    rank_output,
    training_stats,
)
from dliobench.results.dlio_summary import DLIO_TIME, GIB, dlio_summary
from dliobench.results.timeline import Timeline

BATCH = 4
EXCLUDE_START, EXCLUDE_END = 1, 1
RECORD = 3 * 2**20
# per rank, per epoch: (wait, compute) of each step, steps back to back from t=0
STEPS = {0: {0: [(0.5, 0.2), (0.1, 0.2), (0.3, 0.2), (0.0, 0.2), (0.4, 0.2)],
             1: [(0.2, 0.2), (0.2, 0.2), (0.1, 0.2), (0.6, 0.2)]},
         1: {0: [(0.1, 0.3), (0.2, 0.3), (0.0, 0.3), (0.2, 0.3), (0.1, 0.3)],
             1: [(0.4, 0.3), (0.0, 0.3), (0.3, 0.3), (0.2, 0.3)]}}


def _timeline(rank: int) -> Timeline:
    tl, t = Timeline(rank), 0.0
    for epoch, steps in STEPS[rank].items():
        for step, (wait, compute) in enumerate(steps):
            tl.record(epoch, step, t, wait, compute, BATCH, BATCH * RECORD)
            t += wait + compute
    return tl


def _v3_block(steps: list[tuple[float, float]]) -> tuple[float, float]:
    """v3.0's ``compute_metrics_train`` for one block (one epoch here): the window is steps
    ``exclude_start .. steps-1-exclude_end``; AU = compute in it / (block time - proc of the
    excluded steps); throughput = window steps x batch / that time; AU in percent."""
    proc = [w + c for w, c in steps]
    end = len(steps) - 1 - EXCLUDE_END
    window = [c for _, c in steps][EXCLUDE_START:end + 1]
    total = sum(proc) - sum(proc[:EXCLUDE_START]) - sum(proc[end + 1:])
    if not window or total <= 0:
        return 0.0, 0.0
    return 100.0 * sum(window) / total, len(window) / total * BATCH


def _v3_summary() -> dict[str, float]:
    """``end_train`` (one block: its figures) then ``end_run``: per epoch AU averaged over
    ranks (allreduce / comm size), samples/s summed over ranks; then np.mean / np.std over
    epochs, MB/s = samples/s x record_length / 1024 / 1024."""
    au, rate = [], []
    for epoch in (0, 1):
        blocks = [_v3_block(STEPS[r][epoch]) for r in (0, 1)]
        au.append(sum(b[0] for b in blocks) / 2)
        rate.append(sum(b[1] for b in blocks))
    return {"train_au_mean_percentage": float(np.mean(au)),
            "train_au_stdev_percentage": float(np.std(au)),
            "train_throughput_mean_samples_per_second": float(np.mean(rate)),
            "train_throughput_stdev_samples_per_second": float(np.std(rate)),
            "train_io_mean_MB_per_second": float(np.mean(rate)) * RECORD / 1024 / 1024,
            "train_io_stdev_MB_per_second": float(np.std(rate)) * RECORD / 1024 / 1024}


def _result() -> dict[str, Any]:
    """A result with our metrics of the timelines above, as assemble builds its epochs."""
    tables = [_timeline(r).by_epoch() for r in (0, 1)]
    epochs = []
    for e in (0, 1):
        parts = [[metrics.epoch_metrics(t[e], EXCLUDE_START, EXCLUDE_END)] for t in tables]
        epochs.append({"epoch": e, **metrics.combine_ranks(parts, np.zeros(0))})
    config = {"workflow": {"train": True, "checkpoint": False},
              "metric": {"au": 0.9, "exclude_start_steps": EXCLUDE_START,
                         "exclude_end_steps": EXCLUDE_END},
              "dataset": {"num_files_train": 64, "num_samples_per_file": 1,
                          "record_length_bytes": RECORD}}
    return {"status": "complete", "config": config, "epochs": epochs, "ranks_count": 2,
            "machine": {"hosts": ["a"], "host": "a", "cpus": 4, "memory_bytes": 2**30},
            "nodes": [{"host": "a", "ranks": [0, 1]}], "ranks": [],
            "started_at": "2026-01-02T03:04:05.000001+00:00",
            "finished_at": "2026-01-02T03:04:09+00:00"}


def test_training_figures_follow_v3_0s_formulas() -> None:
    summary = dlio_summary(_result())
    for key, value in _v3_summary().items():
        assert summary["metric"][key] == pytest.approx(value, rel=1e-12), key
    assert summary["epochs"] == 2 and summary["num_hosts"] == 1


def test_checkpoint_figures_follow_v3_0s_formulas() -> None:
    """``end_save_ckpt``: throughput = checkpoint size (GiB, all ranks' states) / duration;
    ``end_run``: np.mean and np.std of those and of the durations, per direction, only for
    a direction that ran; ``checkpoint_size_GB`` the checkpoint's GiB."""
    size = 3 * GIB // 2
    writes, reads = [2.0, 3.0, 6.0], [1.5, 0.5]
    rows = {op: {"checkpoints": [{"index": i, "bytes": size, "duration_s": d}
                                 for i, d in enumerate(ds)]}
            for op, ds in (("write", writes), ("read", reads))}
    result = {**_result(), "checkpoint": {"workflow": "checkpoint-only", **rows}}
    result["config"] = {**result["config"], "workflow": {"train": False, "checkpoint": True}}
    metric = dlio_summary(result)["metric"]
    for name, ds in (("save", writes), ("load", reads)):
        io = [1.5 / d for d in ds]
        assert metric[f"{name}_checkpoint_io_mean_GB_per_second"] == pytest.approx(np.mean(io))
        assert metric[f"{name}_checkpoint_io_stdev_GB_per_second"] == pytest.approx(np.std(io))
        assert metric[f"{name}_checkpoint_duration_mean_seconds"] == pytest.approx(np.mean(ds))
        assert metric[f"{name}_checkpoint_duration_stdev_seconds"] == pytest.approx(np.std(ds))
    assert metric["checkpoint_size_GB"] == 1.5 and "train_au_percentage" not in metric
    stats = checkpoint_stats(result)["1"]  # per_epoch_stats: the same per-checkpoint figure
    assert [stats[f"save_ckpt{i}"]["throughput"] for i in (1, 2, 3)] == [1.5 / d for d in writes]
    assert stats["load_ckpt2"]["duration"] == 0.5
    only_writes = {**result, "checkpoint": {"workflow": "checkpoint-only",
                                            "write": rows["write"], "read": {}}}
    assert not any(k.startswith("load_") for k in dlio_summary(only_writes)["metric"])


def test_a_ranks_output_json_holds_its_steps_and_block_figures() -> None:
    """``<rank>_output.json``: per epoch (from 1) the steps' load/proc/compute and the
    block's AU (percent) and this rank's samples/s, then the host keys."""
    result = _result()
    summary = dlio_summary(result)
    out = rank_output(result, _timeline(1), summary)
    steps = STEPS[1][0]
    assert out["1"]["load"]["block1"] == [w for w, _ in steps]
    assert out["1"]["proc"]["block1"] == pytest.approx([w + c for w, c in steps])
    au, rate = _v3_block(steps)
    assert out["1"]["au"]["block1"] == pytest.approx(au)
    assert out["1"]["throughput"]["block1"] == pytest.approx(rate)
    assert set(out) == {"1", "2", "host_memory_GB", "host_cpu_count", "hostname"}
    lines = metric_block(summary)
    assert any(line.startswith("[METRIC] Training Accelerator Utilization [AU] (%): "
                               f"{summary['metric']['train_au_mean_percentage']:.4f}")
               for line in lines)


def test_per_epoch_stats_hold_each_epoch_and_its_training_checkpoints() -> None:
    """``<rank>_per_epoch_stats.json`` of a training rank: epochs from 1 with their duration
    as DLIO's ``'%.2f'`` string, ``block1``, and a checkpoint taken after step 2 of epoch 0
    as ``save_ckpt1`` (float duration, GiB/s), starting when that step's work ended."""
    result = {**_result(), "checkpoint": {"checkpoints": [
        {"index": 0, "epoch": 0, "step": 2, "bytes": GIB, "write_s": 0.25}]}}
    stats = training_stats(result, _timeline(0))
    steps = STEPS[0][0]
    assert stats["1"]["duration"] == f"{sum(w + c for w, c in steps):.2f}"
    assert stats["1"]["block1"]["duration"] == stats["1"]["duration"]
    assert stats["1"]["save_ckpt1"]["duration"] == 0.25
    assert stats["1"]["save_ckpt1"]["throughput"] == 4.0
    after_step_2 = dt.datetime.fromisoformat(result["started_at"]) + dt.timedelta(seconds=1.5)
    assert stats["1"]["save_ckpt1"]["start"] == after_step_2.astimezone().strftime(DLIO_TIME)
    assert "save_ckpt1" not in stats["2"]
