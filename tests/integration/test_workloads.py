"""Every shipped workload file runs end to end, scaled down, with each loader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
SCALE_DOWN = ["dataset.num_files_train=4", "dataset.record_length_bytes=8KiB",
              "dataset.record_length_bytes_stdev=1KiB", "dataset.record_length_bytes_resize=4KiB",
              "dataset.num_subfolders_train=2", "reader.batch_size=2", "train.epochs=2",
              "train.total_training_steps=-1", "train.computation_time=0.002",
              "--no-progress"]


def spf_override(name: str) -> list[str]:
    text = (WORKLOADS / name).read_text()
    out = ["dataset.num_samples_per_file=3"] if "num_samples_per_file: 1\n" not in text else []
    if "format: parquet" in text:  # rows of 8 KiB do not fit the columns: one uint8 column
        out.append("dataset.parquet.columns=[]")
    return out


# the llama3 checkpoint presets run in tests/integration/test_checkpoints.py, the KV-cache
# ones in tests/integration/test_kvcache.py, the vector-database ones (an index built first)
# in tests/integration/test_vectordb_cli.py
@pytest.mark.parametrize("name", sorted(p.name for p in WORKLOADS.glob("*.yaml")
                                        if not p.name.startswith(("llama3_", "kvcache",
                                                                  "vectordb"))))
def test_workload_runs_scaled_down(name: str, workdir: Path, run_cli: Callable[..., int]) -> None:
    code = run_cli("run", str(WORKLOADS / name), f"dataset.data_folder={workdir / 'data'}",
                   *SCALE_DOWN, *spf_override(name))
    assert code == 0
    result = last_result(workdir / "reports")
    assert result["metrics"]["exactly_once"] is True
    assert result["metrics"]["samples_per_s"] > 0


@pytest.mark.parametrize("loader", ["native", "pytorch"])
def test_unet3d_with_each_loader(loader: str, workdir: Path, run_cli: Callable[..., int]) -> None:
    code = run_cli("run", str(WORKLOADS / "unet3d.yaml"), f"reader.data_loader={loader}",
                   f"dataset.data_folder={workdir / 'data'}", *SCALE_DOWN)
    assert code == 0
    result = last_result(workdir / "reports")
    assert result["config"]["reader"]["data_loader"] == loader
    assert result["config"]["train"]["accelerator"] == "b200"  # v3.0's, the default
    assert result["metrics"]["bytes"] > 0


def test_accelerator_flag_selects_the_profile(workdir: Path, run_cli: Callable[..., int]) -> None:
    code = run_cli("run", str(WORKLOADS / "cosmoflow.yaml"), "--accelerator", "a100",
                   f"dataset.data_folder={workdir / 'data'}", *SCALE_DOWN[:-2], "--no-progress")
    assert code == 0
    cfg = last_result(workdir / "reports")["config"]
    assert cfg["train"]["accelerator"] == "a100"
    assert cfg["train"]["computation_time"] == pytest.approx(0.00551)
    assert cfg["metric"]["au"] == pytest.approx(0.70)
