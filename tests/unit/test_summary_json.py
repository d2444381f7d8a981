"""summary.json as DLIO writes it, beside result.json: real tiny runs, their figures checked
against result.json, and the keys and types against summary.json files DLIO itself wrote.

``tests/data/dlio-2.0.0-train-summary.json``: DLIO 2.0.0 (PyPI) run here on the same tiny
benchmark as ``tiny_workload`` (8 npz files of one 65,536-byte sample, batch 2, 2 epochs,
computation_time 0.01). ``tests/data/dlio-mlperf_storage_v2.0-checkpoint-summary.json``:
argonne-lcf/dlio_benchmark@392621b (the branch mlcommons/storage pins) run here on a small
checkpoint-only transformer (2 writes, 2 reads). In both, ``host_cpuinfo`` and
``host_meminfo`` are cut to their first three entries; nothing else was edited.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dliobench.results.dlio_summary import SUMMARY_NAME, dlio_summary
from dliobench.results.files import write_result
from dliobench.results.recover import recover
from tests.conftest import tiny_workload
from tests.unit.test_journal import _trained

DATA = Path(__file__).resolve().parents[1] / "data"
PRESET = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
DLIO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$")
NOT_WRITTEN = {"host_cpuinfo", "host_meminfo"}  # docs/results.md, "summary.json"


def _run_folder(root: Path) -> Path:
    (folder,) = [p for p in root.iterdir() if (p / "result.json").exists()]
    return folder


def _read(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return (json.loads((folder / "result.json").read_text()),
            json.loads((folder / SUMMARY_NAME).read_text()))


def _same_shape(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Every key DLIO wrote is ours too (but the ones we say we leave out), holding the same
    kind of value: a list stays a list, a string a string, a number a number."""
    assert set(theirs) - set(ours) == NOT_WRITTEN
    assert set(theirs["metric"]) <= set(ours["metric"])
    for doc_ours, doc_theirs in ((ours, theirs), (ours["metric"], theirs["metric"])):
        for key, value in doc_theirs.items():
            if key in NOT_WRITTEN or key == "host_processor_name":
                continue
            kind = (list if isinstance(value, list) else str if isinstance(value, str)
                    else dict if isinstance(value, dict) else (int, float))
            assert isinstance(doc_ours[key], kind), key
    assert DLIO_TIME.match(ours["start"]) and DLIO_TIME.match(ours["end"])


def test_a_training_run_writes_dlios_summary_from_its_result(
        write_workload: Callable[..., Path], run_cli: Callable[..., int],
        workdir: Path) -> None:
    doc = tiny_workload(train={"computation_time": 0.01})
    assert run_cli("run", str(write_workload(doc)), "--no-progress") == 0
    result, summary = _read(_run_folder(workdir / "reports"))
    metric = summary["metric"]
    au = [100 * e["au"] for e in result["epochs"]]
    rate = [e["samples_per_s"] for e in result["epochs"]]
    assert metric["train_au_percentage"] == pytest.approx(au)
    assert metric["train_au_mean_percentage"] == pytest.approx(100 * result["metrics"]["au"])
    assert metric["train_au_stdev_percentage"] == pytest.approx(float(np.std(au)))
    assert metric["train_au_meet_expectation"] == (
        "success" if result["verdict"]["meets_floor"] else "fail")
    assert metric["train_throughput_samples_per_second"] == pytest.approx(rate)
    assert metric["train_throughput_mean_samples_per_second"] == pytest.approx(np.mean(rate))
    assert metric["train_throughput_mean_samples_per_second"] == pytest.approx(
        result["metrics"]["samples_per_s"], rel=0.1)  # mean of epochs vs total over wall
    assert metric["train_io_mean_MB_per_second"] == pytest.approx(np.mean(rate) * 65536 / 2**20)
    assert metric["train_io_stdev_MB_per_second"] == pytest.approx(np.std(rate) * 65536 / 2**20)
    assert summary["epochs"] == len(result["epochs"]) == 2
    assert summary["num_accelerators"] == result["ranks_count"]
    assert summary["hostname"] == result["machine"]["host"]
    assert summary["host_memory_GB"] == [result["machine"]["memory_bytes"] / 2**30]
    assert summary["dliobench"]["run_id"] == result["run_id"]
    assert summary["dliobench"]["read_MiB_per_second"] == pytest.approx(
        result["metrics"]["bytes_per_s"] / 2**20)  # the console's figure (results.figures)
    dlio = json.loads((DATA / "dlio-2.0.0-train-summary.json").read_text())
    _same_shape(summary, dlio)
    for key in ("num_accelerators", "num_hosts", "num_files_train", "num_files_eval",
                "num_samples_per_file", "data_size_per_host_GB", "epochs"):
        assert summary[key] == dlio[key], key  # the same benchmark: the same figures


def test_a_checkpoint_only_run_writes_dlios_checkpoint_figures(
        run_cli: Callable[..., int], workdir: Path) -> None:
    assert run_cli("run", str(PRESET), "checkpoint.scale=0.0001", "checkpoint.file_format=raw",
                   "checkpoint.time_between_checkpoints=0", "checkpoint.checkpoint_folder=ckpt",
                   "checkpoint.num_checkpoints_write=2", "checkpoint.num_checkpoints_read=2",
                   "--no-progress") == 0
    result, summary = _read(_run_folder(workdir / "reports"))
    metric = summary["metric"]
    for op, name in (("write", "save"), ("read", "load")):
        rows = result["checkpoint"][op]["checkpoints"]
        seconds = [r["duration_s"] for r in rows]
        rates = [r["bytes"] / 2**30 / r["duration_s"] for r in rows]
        assert metric[f"{name}_checkpoint_duration_mean_seconds"] == pytest.approx(
            result["checkpoint"][op]["duration_s_mean"])
        assert metric[f"{name}_checkpoint_duration_stdev_seconds"] == pytest.approx(
            np.std(seconds))
        assert metric[f"{name}_checkpoint_io_mean_GB_per_second"] == pytest.approx(
            np.mean(rates))
        assert metric[f"{name}_checkpoint_io_stdev_GB_per_second"] == pytest.approx(
            np.std(rates))
    assert metric["checkpoint_size_GB"] == pytest.approx(
        result["checkpoint"]["write"]["bytes_per_checkpoint"] / 2**30)
    assert summary["epochs"] == 0 and not any(k.startswith("train_") for k in metric)
    dlio = json.loads((DATA / "dlio-mlperf_storage_v2.0-checkpoint-summary.json").read_text())
    _same_shape(summary, dlio)
    assert set(summary["metric"]) == set(dlio["metric"])


def test_a_partial_result_gets_no_summary(tmp_path: Path) -> None:
    """DLIO writes summary.json only at the end of a run that finished, and mlpstorage reads
    a run folder without one as failed: a partial result must not look finished."""
    result: Any = {"status": "partial", "run_id": "r", "config": {}, "metrics": {}}
    assert write_result(tmp_path, result)
    assert (tmp_path / "result.json").exists() and not (tmp_path / SUMMARY_NAME).exists()


def test_an_epoch_without_counted_steps_counts_as_au_0_as_v3_0_does() -> None:
    """An epoch too short to count has no AU in result.json; v3.0's engine gives an empty
    window AU 0 and 0 samples/s and keeps it in the lists and in ``epochs``
    (mlcommons/DLIO_local_changes dlio_benchmark/utils/statscounter.py@2a9cf78
    ``compute_metrics_train``, ``end_run``); our section names it."""
    epochs = [{"epoch": 0, "au": 0.5, "samples_per_s": 10.0, "bytes_per_s": 2.0**20},
              {"epoch": 1, "au": None, "samples_per_s": None, "bytes_per_s": None}]
    config = {"workflow": {"train": True, "checkpoint": False},
              "metric": {"au": 0.9, "exclude_start_steps": 1, "exclude_end_steps": 0},
              "dataset": {"num_files_train": 8, "num_samples_per_file": 1,
                          "record_length_bytes": 2**20}}
    result = {"status": "complete", "config": config, "epochs": epochs, "ranks_count": 2,
              "machine": {"hosts": ["a", "b"], "host": "a", "cpus": 4, "memory_bytes": 2**30},
              "nodes": [{"host": "a", "ranks": [0]}, {"host": "b", "ranks": [1]}],
              "started_at": "2026-01-02T03:04:05+00:00", "finished_at": "not a time"}
    summary = dlio_summary(result)
    assert summary["metric"]["train_au_percentage"] == [50.0, 0.0]
    assert summary["metric"]["train_au_mean_percentage"] == 25.0
    assert summary["metric"]["train_au_meet_expectation"] == "fail"
    assert summary["metric"]["train_io_mean_MB_per_second"] == 5.0
    assert summary["dliobench"]["epochs_without_counted_steps"] == [1]
    assert summary["epochs"] == 2
    assert summary["host_cpu_count"] == [4, 4] and summary["num_hosts"] == 2
    assert summary["data_size_per_host_GB"] == 4 / 1024  # 1 rank per node of 2: 4 MiB
    assert DLIO_TIME.match(summary["start"]) and summary["end"] is None


def test_recover_writes_it_with_the_checkpoints_taken_during_training(tmp_path: Path) -> None:
    """`dliobench recover` commits through the same writer: a run assembled complete from its
    journal gets summary.json, with DLIO's save_ figures for the checkpoints of training."""
    _, _, run_dir, _ = _trained(tmp_path)
    recover(run_dir)
    result, summary = _read(run_dir)
    rows = result["checkpoint"]["checkpoints"]
    assert result["status"] == "complete" and len(rows) == 3
    metric = summary["metric"]
    assert metric["save_checkpoint_duration_mean_seconds"] == pytest.approx(
        np.mean([r["write_s"] for r in rows]))
    assert metric["save_checkpoint_io_mean_GB_per_second"] == pytest.approx(
        np.mean([r["bytes"] / 2**30 / r["write_s"] for r in rows]))
    assert metric["checkpoint_size_GB"] == pytest.approx(rows[0]["bytes"] / 2**30)
    assert "load_checkpoint_io_mean_GB_per_second" not in metric  # nothing was read back
    assert metric["train_au_percentage"] == pytest.approx([100 * e["au"]
                                                           for e in result["epochs"]])
