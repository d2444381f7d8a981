"""End to end through the CLI: generate, train, result files, and the failure paths."""

from __future__ import annotations

import csv
import importlib.util
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result, manifest_files, tiny_workload

RESULT_KEYS = {"schema_version", "run_id", "status", "dliobench_version", "commit", "config",
               "machine", "storage", "honesty", "metrics", "epochs", "ranks"}
METRIC_KEYS = {"au", "au_min", "samples_per_s", "bytes_per_s", "wait_p50_s", "wait_p90_s",
               "wait_p99_s", "wait_max_s", "steps", "samples", "bytes", "first_step_s",
               "exactly_once"}


def test_run_writes_result_and_timeline(workdir: Path, write_workload: Callable[..., Path],
                                        run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload(reader={"sample_shuffle": "seed"}))
    assert run_cli("run", str(path), "--no-progress") == 0
    result = last_result(workdir / "reports")
    assert set(result) >= RESULT_KEYS
    assert set(result["metrics"]) >= METRIC_KEYS
    assert result["status"] == "complete"
    assert re.fullmatch(r"\d{8}-\d{6}-tiny-[0-9a-f]{6}", result["run_id"])
    m = result["metrics"]
    assert m["exactly_once"] is True
    assert m["steps"] == 2 * (4 - 1)  # 8 samples / batch 2 = 4 steps, first one excluded
    assert m["samples"] == 12
    sizes = sorted(size for size, _ in manifest_files(workdir / "data/tiny").values())
    assert m["bytes"] == pytest.approx(12 * sizes[0], rel=0.01)  # every byte of 12 files
    assert result["storage"]["fs_type"] and result["storage"]["mount"]
    assert result["honesty"]["page_cache_possible"] is True
    # 3 counted steps per epoch, prefetch 2: every counted batch may have been read earlier
    assert result["honesty"]["readahead_share"] == 1.0
    assert result["honesty"]["window_too_short"] is True
    assert len(result["epochs"]) == 2 and len(result["ranks"]) == 1
    with open(workdir / "reports" / result["run_id"] / "timeline.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8
    assert set(rows[0]) == {"rank", "epoch", "step", "t_start_s", "wait_s", "compute_s",
                            "comm_s", "ckpt_s", "samples", "bytes", "counted"}


def test_au_high_when_compute_dominates(workdir: Path, write_workload: Callable[..., Path],
                                        run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload(train={"epochs": 1, "computation_time": 0.1}))
    assert run_cli("run", str(path), "--no-progress") == 0
    assert last_result(workdir / "reports")["metrics"]["au"] > 0.95


def test_au_zero_when_compute_is_zero(workdir: Path, write_workload: Callable[..., Path],
                                      run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("run", str(path), "--no-progress") == 0
    m = last_result(workdir / "reports")["metrics"]
    assert m["au"] < 0.05
    assert 0 < m["samples_per_s"] < float("inf")


def test_long_enough_window_is_not_flagged(workdir: Path, write_workload: Callable[..., Path],
                                           run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload(dataset={"num_files_train": 40},
                                        train={"epochs": 1}))
    assert run_cli("run", str(path), "--no-progress") == 0
    result = last_result(workdir / "reports")
    assert result["metrics"]["min_counted_steps"] == 19  # 20 steps, the first left out
    assert result["honesty"]["readahead_share"] == pytest.approx(3 / 19)
    assert result["honesty"]["window_too_short"] is False


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow (the tensorflow extra) is not installed")
def test_dlio_style_workload_runs_with_size_overrides(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> None:
    doc = {"model": "unet3d", "framework": "pytorch",
           "workflow": {"generate_data": True, "train": True, "checkpoint": False},
           "dataset": {"data_folder": "data/unet3d/", "format": "npz", "num_files_train": 168,
                       "num_samples_per_file": 1, "record_length": 146600628,
                       "record_length_stdev": 68341808, "record_length_resize": 2097152},
           "reader": {"data_loader": "tensorflow", "batch_size": 7, "read_threads": 4,
                      "file_shuffle": "seed", "sample_shuffle": "seed"},
           "train": {"epochs": 5, "computation_time": 0.323}}
    path = write_workload(doc, "unet3d_h100.yaml")
    code = run_cli("run", str(path), "--no-progress", "++workload.dataset.num_files_train=8",
                   "++workload.dataset.record_length=65536", "dataset.record_length_stdev=8192",
                   "dataset.record_length_resize=4096", "train.epochs=1",
                   "train.computation_time=0.01", "reader.batch_size=2")
    assert code == 0
    result = last_result(workdir / "reports")
    assert result["config"]["reader"]["data_loader"] == "tensorflow"  # tf.data, no substitute
    assert not any("tensorflow" in w for w in result.get("warnings", []))
    assert all(c["exactly_once"] for c in result["ranks"][0]["epochs"])


def test_total_training_steps_replaces_epochs(workdir: Path, write_workload: Callable[..., Path],
                                              run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("run", str(path), "--no-progress", "train.total_training_steps=6") == 0
    result = last_result(workdir / "reports")
    checks = result["ranks"][0]["epochs"]
    assert [c["delivered"] for c in checks] == [8, 4]  # 4 steps of 2, then 2 more
    assert [c["complete"] for c in checks] == [True, False]
    assert all(c["exactly_once"] for c in checks)
    assert result["metrics"]["steps"] == (4 - 1) + (2 - 1)


def test_misspelled_key_exits_2_with_one_line(write_workload: Callable[..., Path],
                                              run_cli: Callable[..., int],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("run", str(path), "dataset.num_file_train=3") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "did you mean 'dataset.num_files_train'" in err
    assert "Traceback" not in err


def test_batch_larger_than_rank_share_exits_2(write_workload: Callable[..., Path],
                                              run_cli: Callable[..., int],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("run", str(path), "reader.batch_size=9") == 2
    assert "reader.batch_size=9 is larger than the 8 samples" in capsys.readouterr().err


def test_missing_dataset_without_generation_says_how(
        write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload(workflow={"generate_data": False}))
    assert run_cli("run", str(path)) == 1
    err = capsys.readouterr().err
    assert "has none of its 8 npz files" in err and "dliobench generate" in err


def test_a_file_of_the_wrong_size_is_named_with_both_sizes_and_what_to_run(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    """It was "lacks 1 of 8 npz files", though the file was there, truncated."""
    path = write_workload(tiny_workload(workflow={"generate_data": False}))
    assert run_cli("generate", str(path), "--no-progress") == 0
    victim = sorted((workdir / "data/tiny/train").glob("*.npz"))[3]
    size = victim.stat().st_size
    os.truncate(victim, 1000)
    capsys.readouterr()
    assert run_cli("run", str(path), "--no-progress") == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"dliobench: error: 1 of the 8 npz files of the dataset in data/tiny is not "
                   f"complete (data/tiny/train/{victim.name} is 1,000 bytes where {size:,} were "
                   "written); run `dliobench generate` with the same workload and overrides to "
                   "write it again, or set workflow.generate_data=true")
    assert run_cli("generate", str(path), "--no-progress") == 0  # what it says to run
    assert victim.stat().st_size == size
    assert run_cli("run", str(path), "--no-progress") == 0


def test_generate_resumes_and_refuses_other_parameters(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("generate", str(path), "--no-progress") == 0
    first = {p.name: p.read_bytes() for p in (workdir / "data/tiny/train").iterdir()}
    victim = workdir / "data/tiny/train/img_0000003.npz"
    victim.unlink()
    capsys.readouterr()
    assert run_cli("generate", str(path), "--no-progress") == 0
    assert "wrote 1 of 8 files" in capsys.readouterr().out
    assert victim.read_bytes() == first[victim.name]
    assert run_cli("generate", str(path), "dataset.record_length_bytes=1000") == 1
    assert "generated with other parameters" in capsys.readouterr().err


def test_corrupt_file_stops_with_partial_result(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload(train={"epochs": 1}))
    assert run_cli("generate", str(path), "--no-progress") == 0
    victim = workdir / "data/tiny/train/img_0000006.npz"
    raw = bytearray(victim.read_bytes())
    raw[5000] ^= 0xFF
    victim.write_bytes(bytes(raw))
    assert run_cli("run", str(path), "--no-progress") == 1
    err = capsys.readouterr().err
    assert "img_0000006.npz" in err and "CRC-32 mismatch" in err
    result = last_result(workdir / "reports")
    assert result["status"] == "partial"
    assert result["errors"]
    interrupted = result["epochs"][-1]  # the epoch the damaged file ended: nothing to claim
    assert interrupted["complete"] is False and interrupted["exactly_once"] is None
    assert result["metrics"]["exactly_once"] is None


def test_generate_verify_rewrites_damaged_files(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("generate", str(path), "--no-progress") == 0
    held = manifest_files(workdir / "data/tiny")
    assert len(held) == 8 and all(crc for _, crc in held.values())
    victim = workdir / "data/tiny/train/img_0000002.npz"
    good = victim.read_bytes()
    raw = bytearray(good)
    raw[-100] ^= 0xFF  # same size: only the checksum can tell
    victim.write_bytes(bytes(raw))
    capsys.readouterr()
    assert run_cli("generate", str(path), "--no-progress") == 0
    assert "already" in capsys.readouterr().out  # sizes match: a plain generate trusts them
    assert run_cli("generate", str(path), "--no-progress", "--verify") == 0
    assert "wrote 1 of 8 files" in capsys.readouterr().out
    assert victim.read_bytes() == good
