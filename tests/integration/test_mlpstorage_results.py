"""What mlpstorage's report tools read in a run folder of ours, the read phase of a split
checkpoint set cleaning up, and the metadata phase's folder under mlpstorage's layout.

Real runs of the llama3-8b preset (a ten-thousandth of every tensor) and of a tiny training
workload, in process; the files read back as mlpstorage reads them (mlcommons/storage
``mlpstorage/rules.py``@caa90c9c7d6a543de815222fff834a846823f922 ``BenchmarkResult`` and
``get_runs_files``; ``mlpstorage_py/rules/models.py``@be69aeb5dccb701ae207b27820b7ae7c7bcf80b1
``DLIOResultParser``, ``ResultFilesExtractor._is_complete_metadata``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import yaml

from dliobench.cli.main import main
from tests.conftest import tiny_workload

PRESET = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
CKPT = ["checkpoint.scale=0.0001", "checkpoint.time_between_checkpoints=0",
        "checkpoint.checkpoint_folder=ckpt", "checkpoint.file_format=raw", "--no-progress"]
STORED = ["checkpoint-0000", "checkpoint-0001"]


def test_a_run_in_mlpstorage_layout_carries_what_reportgen_reads(workdir: Path) -> None:
    assert main(["run", str(PRESET), *CKPT, "checkpoint.num_checkpoints_write=1",
                 "checkpoint.num_checkpoints_read=1", "output.folder=R",
                 "output.layout=mlpstorage"]) == 0
    (run,) = (workdir / "R/checkpointing/llama3-8b").iterdir()
    metas = [p for p in run.iterdir() if p.name.endswith("_metadata.json")]  # get_runs_files
    assert [p.name for p in metas] == [f"checkpointing_{run.name}_metadata.json"]
    meta = json.loads(metas[0].read_text())
    assert {"benchmark_type", "run_datetime", "num_processes", "parameters"} <= set(meta)
    assert (meta["benchmark_type"], meta["model"], meta["command"], meta["run_datetime"],
            meta["num_processes"]) == ("checkpointing", "llama3-8b", "run", run.name, 1)
    assert meta["override_parameters"]["checkpoint.scale"] == "0.0001"
    config = yaml.safe_load((run / "dlio_config/config.yaml").read_text())["workload"]
    assert config["workflow"] == {"generate_data": False, "train": False, "checkpoint": True}
    assert config["model"]["name"] == "llama_8b"  # DLIO's name, as its workload file has it
    assert config["checkpoint"]["num_checkpoints_write"] == 1
    overrides = yaml.safe_load((run / "dlio_config/overrides.yaml").read_text())
    assert overrides[0] == "workload=llama3_8b"
    assert "++workload.checkpoint.scale=0.0001" in overrides
    assert not any(o.startswith("++workload.output.") for o in overrides)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["num_accelerators"] == 1 and "host_memory_GB" in summary


def test_default_layout_writes_no_mlpstorage_files(workdir: Path) -> None:
    assert main(["run", str(PRESET), *CKPT, "checkpoint.num_checkpoints_write=1",
                 "checkpoint.num_checkpoints_read=0", "output.folder=out"]) == 0
    (run,) = (workdir / "out").iterdir()
    assert not (run / "dlio_config").exists()
    assert not list(run.glob("*_metadata.json"))


def _split_set(workdir: Path, *read_extra: str) -> None:
    assert main(["run", str(PRESET), "--run-set", *CKPT, "checkpoint.num_checkpoints_write=2",
                 "checkpoint.num_checkpoints_read=0", "output.folder=out"]) == 0
    assert sorted(p.name for p in (workdir / "ckpt/llama3_8b").iterdir()) == STORED
    assert main(["run", str(PRESET), "--run-set", *CKPT, "checkpoint.num_checkpoints_write=0",
                 "checkpoint.num_checkpoints_read=2", "output.folder=out", *read_extra]) == 0


def test_the_read_phase_of_a_split_set_removes_what_it_read(workdir: Path) -> None:
    _split_set(workdir)
    assert not (workdir / "ckpt/llama3_8b").exists()  # nothing left to fill the disk


def test_the_read_phase_keeps_them_when_asked(workdir: Path) -> None:
    _split_set(workdir, "checkpoint.keep=true")
    assert sorted(p.name for p in (workdir / "ckpt/llama3_8b").iterdir()) == STORED


def test_the_metadata_phase_follows_the_mlpstorage_layout(
        workdir: Path, run_cli: Callable[..., int],
        write_workload: Callable[..., Path]) -> None:
    path = str(write_workload(tiny_workload(dataset={"num_files_train": 8, "format": "npy",
                                                     "record_length_bytes": 512})))
    assert run_cli("generate", path, "--no-progress") == 0
    assert run_cli("metadata", path, "--output", "R", "output.layout=mlpstorage") == 0
    (run,) = (workdir / "R/training/tiny/metadata").iterdir()
    assert len(run.name) == 15 and run.name[8] == "_"  # YYYYMMDD_HHMMSS
    assert json.loads((run / "metadata.json").read_text())["kind"] == "metadata"


def test_training_datagen_leaves_mlpstorage_record(workdir: Path) -> None:
    assert main(["training", "datagen", "--model", "unet3d", "--data-dir", "d",
                 "--results-dir", "R", "--param", "dataset.num_files_train=4",
                 "dataset.record_length_bytes=4096", "dataset.record_length_bytes_stdev=0"]) == 0
    (leaf,) = (workdir / "R/training/unet3d/datagen").iterdir()  # upstream's datagen leaf
    assert sorted(p.name for p in (leaf / "dlio_config").iterdir()) == [
        "config.yaml", "hydra.yaml", "overrides.yaml"]  # _DLIO_CONFIG_REQUIRED_FILES
    meta = json.loads((leaf / f"training_{leaf.name}_metadata.json").read_text())
    assert (meta["command"], meta["model"], meta["accelerator"]) == ("datagen", "unet3d", None)
    config = yaml.safe_load((leaf / "dlio_config/config.yaml").read_text())["workload"]
    assert config["workflow"] == {"generate_data": True, "train": False, "checkpoint": False}
    overrides = yaml.safe_load((leaf / "dlio_config/overrides.yaml").read_text())
    assert overrides[:2] == ["workload=unet3d_datagen", "++workload.dataset.data_folder=d/unet3d"]
    assert len(list((workdir / "d/unet3d").rglob("*.npz"))) == 4
