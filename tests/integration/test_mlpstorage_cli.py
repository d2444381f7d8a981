"""mlpstorage's command lines, typed as its users type them, run through the real ``dliobench``
and write their runs where mlpstorage puts them (docs/mlpstorage.md).

The commands are upstream's own: the README's U-Net3D ``training run`` quick-start
(mlcommons/storage README.md@be69aeb5dccb701ae207b27820b7ae7c7bcf80b1, "U-Net3D", with
v3.0's b200) and test/run_tests.sh's llama3-8b ``checkpointing run``
(@caa90c9c7d6a543de815222fff834a846823f922), scaled down with --param (sizes, and the two
settings below that spare the test imports and sleeps), with one rank (their 4 and 8 ranks,
which dliobench starts itself, and the rest of the documents' commands:
tests/integration/test_journeys.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dliobench.report.commands import check_runs
from dliobench.report.runs import find_run_dirs, load_runs

REPO = Path(__file__).resolve().parents[2]
STAMP = re.compile(r"^\d{8}_\d{6}$")  # mlpstorage's DATETIME_STR
# sizes: 16 files of 64 KiB (two batches of 7), one epoch; and our own thread-pool loader,
# which spares the test importing torch for the DataLoader (4 s of this 2-core machine)
TRAIN_SIZE = ["dataset.num_files_train=16", "dataset.record_length_bytes=65536",
              "dataset.record_length_bytes_stdev=0", "train.epochs=1",
              "reader.data_loader=native"]
# a thousandth of every tensor; no pause between checkpoints (DLIO's stand-in for training
# steps) and raw files, which spare the test 5 s of sleep and importing torch
CKPT_SIZE = ["checkpoint.scale=0.0001", "checkpoint.time_between_checkpoints=0",
             "checkpoint.file_format=raw"]


def dliobench(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m dliobench ARGV`` in ``cwd``, this tree first on the path."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "WORLD_SIZE", "PMI_RANK"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "dliobench", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def only_run(parent: Path) -> Path:
    """The one run folder below ``parent``, named as mlpstorage names it."""
    runs = list(parent.iterdir())
    assert len(runs) == 1 and STAMP.match(runs[0].name), runs
    assert (runs[0] / "result.json").is_file()
    return runs[0]


def test_training_quick_start_runs_into_mlpstorage_layout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = dliobench(tmp_path, "training", "run", "--hosts", "127.0.0.1",
                     "--num-client-hosts", "1", "--client-host-memory-in-gb", "64",
                     "--num-accelerators", "1", "--accelerator-type", "b200", "--model",
                     "unet3d", "--data-dir", "unet3d_data", "--results-dir", "unet3d_results",
                     "--param", *TRAIN_SIZE)
    assert done.returncode == 0, done.stderr
    run = only_run(tmp_path / "unet3d_results" / "training" / "unet3d" / "run")
    config = json.loads((run / "result.json").read_text())["config"]
    assert config["dataset"]["data_folder"] == "unet3d_data/unet3d"  # mlpstorage's <dir>/<model>
    assert config["train"]["accelerator"] == "b200"
    assert config["output"]["layout"] == "mlpstorage"
    summary = json.loads((run / "summary.json").read_text())  # what mlpstorage's tools parse
    assert {"train_au_mean_percentage", "train_au_meet_expectation",
            "train_throughput_mean_samples_per_second"} <= set(summary["metric"])
    # our own reading commands find it in the nested layout
    assert find_run_dirs([tmp_path / "unet3d_results"]) == [run]
    assert [r.path for r in load_runs([tmp_path / "unet3d_results"])] == [run]
    # and `check` takes where the run was put for what it is, not a changed parameter
    capsys.readouterr()
    check_runs([str(tmp_path / "unet3d_results")], "closed", True)
    findings = capsys.readouterr().out
    assert "output.folder" not in findings and "output.layout" not in findings
    assert "train.epochs" in findings  # a parameter the run did change


def test_checkpointing_quick_start_runs_into_mlpstorage_layout(tmp_path: Path) -> None:
    done = dliobench(tmp_path, "mlpstorage", "checkpointing", "run", "--hosts", "127.0.0.1",
                     "--model", "llama3-8b", "--client-host-memory-in-gb", "512",
                     "--num-processes", "1", "--checkpoint-folder", "ckpt", "--results-dir",
                     "results", "--num-checkpoints-read", "1", "--num-checkpoints-write", "1",
                     "--param", *CKPT_SIZE)
    assert done.returncode == 0, done.stderr
    run = only_run(tmp_path / "results" / "checkpointing" / "llama3-8b")
    result = json.loads((run / "result.json").read_text())
    ckpt = result["config"]["checkpoint"]
    assert ckpt["checkpoint_folder"] == "ckpt/llama3-8b"
    assert (ckpt["mode"], ckpt["num_checkpoints_write"], ckpt["num_checkpoints_read"]) == \
        ("subset", 1, 1)
    assert "checkpoint" in result


@pytest.mark.parametrize(("argv", "says"), [
    (["--ssh-username", "me"], "ssh"),
    # other hosts are asked over ssh first (issue Cluster): one sentence per host that fails
    (["--hosts", "no-such-host.invalid", "--num-accelerators", "1"], "no-such-host.invalid"),
    (["--exec-type", "docker"], "container"),
    (["--frobnicate"], "--frobnicate"),
])
def test_flags_without_meaning_here_are_one_sentence(tmp_path: Path, argv: list[str],
                                                     says: str) -> None:
    done = dliobench(tmp_path, "training", "run", "--model", "unet3d", *argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and says in lines[0], done.stderr
    assert not (tmp_path / "data").exists()  # refused before any work


def test_help_lists_the_flags_accepted_and_refused(tmp_path: Path) -> None:
    door = dliobench(tmp_path, "mlpstorage", "--help").stdout
    run = dliobench(tmp_path, "training", "run", "--help").stdout
    for flag in ("--model", "--accelerator-type", "--num-accelerators", "--data-dir",
                 "--param", "--results-dir", "--client-host-memory-in-gb"):
        assert flag in run, flag
        assert flag.split()[0] in door or flag in ("--results-dir",
                                                   "--client-host-memory-in-gb"), flag
    assert "Refused, exit 2" in door and "--ssh-username" in door
    assert "be69aeb5dccb701ae207b27820b7ae7c7bcf80b1" in door


def test_runs_of_one_second_get_folders_of_their_own(tmp_path: Path) -> None:
    # a run set starts runs back to back: under mlpstorage's layout, whose names have only
    # seconds, the second waits for the next second rather than share or fail
    from dliobench.config.load import load
    from dliobench.results.files import make_run_dir

    ours, _ = load(REPO / "workloads" / "llama3_8b.yaml", [f"output.folder={tmp_path}"])
    assert make_run_dir(ours, "some-run-id") == tmp_path / "some-run-id"
    theirs, _ = load(REPO / "workloads" / "llama3_8b.yaml",
                     [f"output.folder={tmp_path}", "output.layout=mlpstorage"])
    first, second = make_run_dir(theirs, "a"), make_run_dir(theirs, "b")
    assert first != second and first.parent == second.parent == \
        tmp_path / "checkpointing" / "llama3-8b"
    assert STAMP.match(first.name) and STAMP.match(second.name)


def test_datasize_commands_answer_as_ours(tmp_path: Path) -> None:
    # the README's datasize example: 16 a100 on 2 hosts of 128 GB; its datagen example
    # writes the 56,000 files this asks for (500 steps x 16 accelerators x batch 7)
    sized = dliobench(tmp_path, "training", "datasize", "-m", "unet3d",
                      "--client-host-memory-in-gb", "128", "--max-accelerators", "16",
                      "--num-client-hosts", "2", "--accelerator-type", "a100",
                      "--results-dir", "mlps-results")
    assert sized.returncode == 0 and "dataset.num_files_train=56000" in sized.stdout, sized
    ckpt = dliobench(tmp_path, "checkpointing", "datasize", "--model", "llama3-8b",
                     "--num-processes", "8", "--checkpoint-folder", "c")
    assert ckpt.returncode == 0 and "112,425,623,552 B" in ckpt.stdout, ckpt  # 8B x 14 B
    assert "1,124.26 GB written" in ckpt.stdout  # 10 writes, mlpstorage's default


def test_loops_runs_a_set_whose_first_run_is_the_warm_up(tmp_path: Path) -> None:
    """``--loops N`` is N runs in one invocation, the first the rules' warm-up."""
    done = dliobench(tmp_path, "training", "run", "--model", "unet3d", "--accelerator-type",
                     "b200", "--data-dir", "d", "--results-dir", "r", "--loops", "2",
                     "--param", *TRAIN_SIZE)
    assert done.returncode == 0, done.stderr
    parent = tmp_path / "r" / "training" / "unet3d" / "run"
    runs = sorted(p for p in parent.iterdir() if p.is_dir())
    assert len(runs) == 2 and all(STAMP.match(r.name) for r in runs), runs
    places = [json.loads((r / "result.json").read_text())["run_set"] for r in runs]
    assert [p["warmup"] for p in places] == [True, False]
    assert len({p["set_id"] for p in places}) == 1
