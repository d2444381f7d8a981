"""Parquet end to end: scaled-down copies of upstream's DLRM and Flux workloads (DLIO key
names, only sizes changed) generated and trained with native and pytorch; every file written
reads back in pyarrow with the configured columns and row groups."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import last_result

# mlcommons/storage configs/dlio/workload/dlrm_b200.yaml @ 8349485, sizes scaled down
DLRM: dict[str, Any] = {
    "model": {"name": "dlrm"}, "framework": "pytorch",
    "workflow": {"generate_data": True, "train": True, "checkpoint": False},
    "dataset": {"data_folder": "data/dlrm/", "format": "parquet", "num_files_train": 4,
                "num_samples_per_file": 5000, "record_length_bytes": 160,
                "compression": "none",
                "parquet": {"row_group_size": 1024, "read_mode": "row_group", "columns": [
                    {"name": "label", "dtype": "float32", "size": 1},
                    {"name": "numerical_features", "dtype": "float32", "size": 13},
                    {"name": "categorical_features", "dtype": "float32", "size": 26}]}},
    "reader": {"data_loader": "pytorch", "batch_size": 2048, "prefetch_size": 2,
               "read_threads": 2, "file_shuffle": "seed"},
    "train": {"epochs": 1, "computation_time": 0.0005},
    "metric": {"au": 0.70},
}
# flux_b200.yaml @ e3ffed0, sizes scaled down (the columns' sizes too: rows of 2 MB are slow)
FLUX: dict[str, Any] = {
    "model": {"name": "flux"}, "framework": "pytorch",
    "workflow": {"generate_data": True, "train": True, "checkpoint": False},
    "dataset": {"data_folder": "data/flux/", "format": "parquet", "compression": "none",
                "num_files_train": 3, "num_samples_per_file": 16, "record_length": 4 * 1077,
                "parquet": {"columns": [
                    {"name": "t5_encodings", "dtype": "float32", "size": 524},
                    {"name": "clip_encodings", "dtype": "float32", "size": 409},
                    {"name": "mean", "dtype": "float32", "size": 68},
                    {"name": "logvar", "dtype": "float32", "size": 69},
                    {"name": "timestamp", "dtype": "float32", "size": 7}]}},
    "reader": {"data_loader": "pytorch", "batch_size": 8, "read_threads": 2,
               "file_shuffle": "seed"},
    "train": {"epochs": 1, "computation_time": 0.001},
    "metric": {"au": 0.90},
}


def _run(doc: dict[str, Any], loader: str, workdir: Path,
         write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> dict[str, Any]:
    doc = {**doc, "reader": {**doc["reader"], "data_loader": loader}}
    code = run_cli("run", str(write_workload(doc)), "--no-progress")
    assert code == 0
    result = last_result(workdir / "reports")
    assert result["metrics"]["exactly_once"] is True
    assert result["metrics"]["bytes"] > 0
    return result


def _check_files(folder: Path, doc: dict[str, Any]) -> None:
    d = doc["dataset"]
    files = sorted(folder.rglob("*.parquet"))
    assert len(files) == d["num_files_train"]
    names = [c["name"] for c in d["parquet"]["columns"]]
    group = d["parquet"].get("row_group_size")
    for path in files:
        table = pq.read_table(path)
        assert table.column_names == names and table.num_rows == d["num_samples_per_file"]
        meta = pq.ParquetFile(path).metadata
        if group:
            assert meta.row_group(0).num_rows == group


@pytest.mark.parametrize("loader", ["native", "pytorch"])
def test_dlrm_scaled_down(loader: str, workdir: Path, write_workload: Callable[..., Path],
                          run_cli: Callable[..., int]) -> None:
    result = _run(DLRM, loader, workdir, write_workload, run_cli)
    assert result["metrics"]["samples"] > 0
    _check_files(workdir / "data" / "dlrm", DLRM)


def test_flux_scaled_down(workdir: Path, write_workload: Callable[..., Path],
                          run_cli: Callable[..., int]) -> None:
    _run(FLUX, "native", workdir, write_workload, run_cli)
    _check_files(workdir / "data" / "flux", FLUX)
