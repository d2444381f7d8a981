"""DLIO's Hydra-style command line: workload=NAME (DLIO's names too) and ++workload. keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.base.errors import ConfigError
from dliobench.config.hydra import split
from dliobench.config.load import load
from tests.conftest import last_result


@pytest.mark.parametrize(("name", "workload", "accelerator"), [
    ("unet3d", "unet3d", None), ("unet3d_h100", "unet3d", "h100"),
    ("unet3d_b200", "unet3d", "b200"), ("resnet50_a100", "resnet50", "a100"),
    ("bert_v100", "bert", "v100"), ("cosmoflow_h100", "cosmoflow", "h100"),
])
def test_dlio_names_resolve_to_our_workload_and_profile(name: str, workload: str,
                                                        accelerator: str | None) -> None:
    line = split([f"workload={name}", "++workload.reader.batch_size=2"], "default")
    assert (line.path.stem, line.accelerator) == (workload, accelerator)
    assert line.overrides == ["++workload.reader.batch_size=2"]


def test_every_override_form_dlio_and_mlpstorage_write() -> None:
    line = split(["++workload.reader.batch_size=2", "+workload.train.epochs=3",
                  "workload.dataset.num_files_train=5", "workload=unet3d_a100",
                  "hydra.run.dir=/tmp/x"], "default")
    config, _ = load(line.path, [f"train.accelerator={line.accelerator}", *line.overrides])
    assert (config.reader.batch_size, config.train.epochs, config.dataset.num_files_train) \
        == (2, 3, 5)
    assert config.train.computation_time == pytest.approx(0.636)  # unet3d_a100.yaml
    assert line.ignored == ["hydra.run.dir=/tmp/x"]


@pytest.mark.parametrize(("items", "says"), [
    (["workload=unet3d_x999"], "has no 'x999' accelerator profile"),
    (["workload=nosuch"], "no workload named 'nosuch'"),
    (["workload=unet3d", "workload=bert"], "two workloads"),
])
def test_wrong_names_are_one_sentence(items: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        split(items, "default")


def test_unet3d_h100_runs_scaled_down(workdir: Path, run_cli: Callable[..., int]) -> None:
    code = run_cli("run", "workload=unet3d_h100", "++workload.train.epochs=1",
                   f"++workload.dataset.data_folder={workdir / 'data'}",
                   "++workload.dataset.num_files_train=4", "++workload.reader.batch_size=2",
                   "++workload.dataset.record_length=8192",
                   "++workload.dataset.record_length_stdev=1024",
                   "++workload.dataset.record_length_resize=4096", "--no-progress")
    assert code == 0
    result = last_result(workdir / "reports")
    assert result["config"]["train"]["accelerator"] == "h100"
    assert result["config"]["train"]["computation_time"] == pytest.approx(0.323)
    assert result["config"]["train"]["epochs"] == 1
    assert result["metrics"]["exactly_once"] is True
