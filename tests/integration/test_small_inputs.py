"""Issue 49, item 9: small inputs whose answers disagreed with what the user typed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dliobench.dataset.indexing import EXTENSIONS, NOT_YET
from dliobench.report.sweep import check_points, load_sweep
from dliobench.results.sysinfo import cpu_model

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["dataset.num_files_train=4", "dataset.record_length_bytes=4096", "train.epochs=1",
         "train.computation_time=0", "--no-progress"]


def test_a_missing_folder_that_may_not_be_generated_is_one_sentence_and_not_made(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    missing = workdir / "nowhere" / "sub"
    assert run_cli("run", "default", f"dataset.data_folder={missing}",
                   "workflow.generate_data=false", *QUICK) == 1
    out, err = capsys.readouterr()
    assert "reads:" not in out and not (workdir / "nowhere").exists()
    assert err.strip().count("\n") == 0 and f"{missing} does not exist" in err


def test_dataset_on_a_generated_folder_names_only_what_the_user_typed(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("generate", "default", "dataset.data_folder=gen", *QUICK[:2], "--yes",
                   "--no-progress") == 0
    capsys.readouterr()
    assert run_cli("run", "default", "--dataset", "gen", *QUICK) != 0
    err = capsys.readouterr().err
    assert "--dataset" in err and "dataset.source" not in err and "dataset.layout" not in err


def test_the_empty_folder_error_names_every_format(
        workdir: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "empty").mkdir()
    assert run_cli("run", "default", "--dataset", "empty", *QUICK) == 2
    err = capsys.readouterr().err
    formats = set(EXTENSIONS.values()) | set(NOT_YET.values())
    assert len(formats) == 8 and all(f in err for f in formats), err


def test_a_sweep_file_names_a_shipped_workload_from_any_folder(workdir: Path) -> None:
    sweep = workdir / "elsewhere" / "sw.yaml"
    sweep.parent.mkdir()
    sweep.write_text(yaml.safe_dump({"workload": "default", "overrides": QUICK[:3],
                                     "axes": {"reader.read_threads": [1, 2]}}))
    spec = load_sweep(sweep)
    assert spec.workload.name == "default.yaml" and spec.workload.exists()
    assert len(check_points(spec)) == 2


def test_the_loader_comparison_says_how_it_reads() -> None:
    text = (ROOT / "configs" / "loader_comparison.yaml").read_text()
    spec = load_sweep(ROOT / "configs" / "loader_comparison.yaml")
    assert all(config.reader.odirect for _, _, config in check_points(spec))
    assert "page cache serves" not in text and "O_DIRECT" in text


def test_the_processor_is_named_from_proc_cpuinfo(tmp_path: Path, workdir: Path,
                                                  run_cli: Callable[..., int]) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\n"
                    "model name\t: Intel(R) Xeon(R) Platinum 8480C\n")
    assert cpu_model(str(info)) == "Intel(R) Xeon(R) Platinum 8480C"
    assert run_cli("run", "default", "dataset.data_folder=d", *QUICK, "--yes") == 0
    run = next((workdir / "reports").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["host_processor_name"] == cpu_model() != ""
