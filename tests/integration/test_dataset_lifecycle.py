"""Generation that is killed and resumed, cache eviction, sizing and layout checks."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

from dliobench.base.errors import ConfigError
from dliobench.comm.world import World
from dliobench.config.load import load
from dliobench.dataset.manifest import identity
from dliobench.run.planning import check_run
from tests.conftest import last_result, manifest_files, tiny_workload

BIG = ["dataset.num_files_train=40", "dataset.record_length_bytes=8MiB",
       "dataset.record_length_bytes_stdev=1MiB"]  # O_DIRECT writes from writer threads
MANY = ["dataset.num_files_train=8000", "dataset.record_length_bytes=4KiB"]  # writer processes


def generate_cmd(path: Path, folder: str, shape: list[str]) -> list[str]:
    return [sys.executable, "-m", "dliobench", "generate", str(path), "--no-progress",
            f"dataset.data_folder={folder}", *shape]


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "kill_after"), [(BIG, 3), (MANY, 300)], ids=["big", "many"])
def test_killed_generation_resumes_to_identical_bytes(
        workdir: Path, write_workload: Callable[..., Path], shape: list[str],
        kill_after: int) -> None:
    path = write_workload(tiny_workload())
    total = int(shape[0].split("=")[1])
    train = workdir / "data/killed/train"
    proc = subprocess.Popen(generate_cmd(path, "data/killed", shape))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if train.exists() and sum(1 for _ in train.glob("img_*")) >= kill_after:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.2)  # a writer killed inside its rename syscall still completes that rename
    done_before = sum(1 for _ in train.glob("img_*"))
    assert done_before < total, "generation finished before it could be killed; enlarge it"
    time.sleep(0.5)
    assert sum(1 for _ in train.glob("img_*")) == done_before, "writers outlived the kill"
    subprocess.run(generate_cmd(path, "data/killed", shape), check=True)
    subprocess.run(generate_cmd(path, "data/fresh", shape), check=True)
    assert not list(train.glob(".*tmp*"))
    fresh = workdir / "data/fresh/train"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in train.iterdir()) and len(names) == total
    for name in names:
        assert (train / name).read_bytes() == (fresh / name).read_bytes(), name
    held = manifest_files(workdir / "data/killed")
    assert {n: size for n, (size, _) in held.items()} == {
        n: (train / n).stat().st_size for n in names}
    with np.load(train / names[0]) as npz:
        assert npz["x"].shape[0] == 1


def test_drop_cache_marks_the_run_honest(workdir: Path, write_workload: Callable[..., Path],
                                         run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload(storage={"drop_cache": True}))
    assert run_cli("run", str(path), "--no-progress") == 0
    honesty = last_result(workdir / "reports")["honesty"]
    assert honesty["evicted"] is True
    assert honesty["page_cache_possible"] is False


def test_odirect_run_counts_aligned_reads(workdir: Path, write_workload: Callable[..., Path],
                                          run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload(reader={"odirect": True}))
    assert run_cli("run", str(path), "--no-progress") == 0
    result = last_result(workdir / "reports")
    assert result["honesty"]["page_cache_possible"] is False
    assert result["metrics"]["exactly_once"] is True


def test_many_samples_in_one_shared_file(workdir: Path, write_workload: Callable[..., Path],
                                         run_cli: Callable[..., int]) -> None:
    doc = tiny_workload(dataset={"num_files_train": 1, "num_samples_per_file": 16},
                        reader={"file_access": "shared", "sample_shuffle": "seed"})
    assert run_cli("run", str(write_workload(doc)), "--no-progress") == 0
    m = last_result(workdir / "reports")["metrics"]
    assert m["exactly_once"] is True
    assert m["samples"] == 2 * (8 - 1) * 2
    # each sample is read on its own: its bytes, not the whole file
    assert m["bytes"] < m["samples"] * 65536 * 1.1


def test_file_sharding_needs_a_file_per_rank() -> None:
    cfg, _ = load(None, ["dataset.num_files_train=2", "reader.sharding=file",
                         "reader.file_access=shared"])
    with pytest.raises(ConfigError, match=r"one file per rank.*shared"):
        check_run(cfg, World(rank=0, size=4))


def test_storage_root_prefixes_relative_data_folders() -> None:
    cfg, _ = load(None, ["storage.storage_root=/mnt/lustre", "dataset.data_folder=data/u"])
    assert cfg.dataset.data_folder == "/mnt/lustre/data/u"


def test_datasize_applies_both_rules(run_cli: Callable[..., int],
                                     capsys: pytest.CaptureFixture[str],
                                     write_workload: Callable[..., Path]) -> None:
    path = write_workload(tiny_workload())  # 64 KiB samples, batch 2
    assert run_cli("datasize", str(path), "--accelerators", "4", "--host-memory-gb", "1") == 0
    out = capsys.readouterr().out
    # 5 x 1 GiB / 65536 B = 81,920 files; 500 steps x 2 x 4 = 4,000 files
    assert "dataset.num_files_train=81920" in out and "memory rule decides" in out


def test_checkpoints_are_written_timed_and_read_back(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> None:
    doc = tiny_workload(model={"name": "tiny", "model_size_bytes": 3_000_000},
                        workflow={"checkpoint": True},
                        checkpoint={"checkpoint_folder": "ckpt", "checkpoint_after_epoch": 1,
                                    "epochs_between_checkpoints": 1, "read_after_write": True,
                                    "optimizer_state_factor": 1.0, "keep": True})
    path = write_workload(doc)
    assert run_cli("run", str(path), "--no-progress", "checkpoint.keep=false", "--output",
                   str(workdir / "first")) == 0
    assert not list((workdir / "ckpt").iterdir())  # measured, then deleted by default
    assert run_cli("run", str(path), "--no-progress") == 0
    result = last_result(workdir / "reports")
    ckpt = result["checkpoint"]
    assert ckpt["count"] == 2  # after epochs 1 and 2
    assert ckpt["bytes"] == 2 * 6_000_000
    assert ckpt["write_bytes_per_s"] > 0 and ckpt["read_bytes_per_s"] > 0
    files = sorted((workdir / "ckpt" / result["run_id"]).glob("*/rank-*.bin"))
    assert [f.stat().st_size for f in files] == [6_000_000, 6_000_000]
    rows = (workdir / "reports" / result["run_id"] / "timeline.csv").read_text().splitlines()
    ckpt_col = rows[0].split(",").index("ckpt_s")
    assert sum(float(r.split(",")[ckpt_col]) > 0 for r in rows[1:]) == 2


def test_dlio_checkpoint_keys_are_understood() -> None:
    cfg, warnings = load(None, ["checkpoint.model_size=1000", "workflow.checkpoint=true",
                                "checkpoint.type=all_ranks",
                                "checkpoint.steps_between_checkpoints=5"])
    assert cfg.model.model_size_bytes == 1000
    assert cfg.checkpoint.type == "all_ranks"
    assert cfg.checkpoint.steps_between_checkpoints == 5
    assert warnings == []


def test_a_deleted_or_damaged_index_is_restored_by_generate(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload(dataset={"format": "indexed_binary",
                                                 "num_samples_per_file": 4}))
    assert run_cli("generate", str(path), "--no-progress") == 0
    victim = workdir / "data/tiny/train/img_0000003.indexed_binary.off.idx"
    good = victim.read_bytes()
    victim.unlink()
    capsys.readouterr()
    assert run_cli("generate", str(path), "--no-progress") == 0
    assert "wrote 1 of 8 files" in capsys.readouterr().out
    assert victim.read_bytes() == good
    damaged = bytearray(good)
    damaged[8] ^= 0x01  # same size: only the recorded CRC-32C tells
    victim.write_bytes(bytes(damaged))
    assert run_cli("generate", str(path), "--no-progress") == 0
    assert "all 8 files are already" in capsys.readouterr().out  # a stat cannot see it
    assert run_cli("generate", str(path), "--no-progress", "--verify") == 0
    assert "wrote 1 of 8 files" in capsys.readouterr().out
    assert victim.read_bytes() == good
    assert run_cli("run", str(path), "--no-progress") == 0
    assert last_result(workdir / "reports")["metrics"]["exactly_once"] is True


def test_a_schema_1_manifest_is_migrated_not_regenerated(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import shutil

    path = write_workload(tiny_workload())
    assert run_cli("generate", str(path), "--no-progress") == 0
    data = workdir / "data/tiny"
    held = manifest_files(data)
    shutil.rmtree(data / "dliobench-manifest")
    params = dict(identity(load(None, ["dataset.data_folder=data/tiny"])[0].dataset))
    (data / "dliobench-manifest.json").write_text(json.dumps({  # as dliobench 0.x wrote it
        "schema": 1, "params": params, "files": {n: s for n, (s, _) in held.items()},
        "checksums": {n: c for n, (_, c) in held.items()}}))
    inodes = {n: (data / "train" / n).stat().st_ino for n in held}
    capsys.readouterr()
    assert run_cli("generate", str(path), "--no-progress", "--verify") == 0
    assert "all 8 files are already" in capsys.readouterr().out
    assert not (data / "dliobench-manifest.json").exists()
    assert manifest_files(data) == held
    assert {n: (data / "train" / n).stat().st_ino for n in held} == inodes


def _second_sample(path: Path, fmt: str) -> bytes:
    """The stored bytes of sample 1 of a 3-sample file, read by the format's own library."""
    if fmt == "npy":
        return bytes(np.load(path)[1])
    if fmt == "npz":
        with np.load(path) as npz:
            return bytes(npz["x"][1])
    if fmt == "hdf5":
        with h5py.File(path) as f:
            return bytes(f["records"][1])
    return path.read_bytes()[4096:8192]  # indexed_binary: the samples, back to back


@pytest.mark.parametrize(("fmt", "per_file"), [("npy", 3), ("npz", 3), ("hdf5", 3),
                                               ("indexed_binary", 3), ("png", 1)])
def test_per_sample_checksums_catch_what_the_format_cannot(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str], fmt: str, per_file: int) -> None:
    path = write_workload(tiny_workload(dataset={"format": fmt, "num_samples_per_file": per_file,
                                                 "record_length_bytes": 4096,
                                                 "sample_checksums": True}))
    assert run_cli("run", str(path), "--no-progress", "reader.verify_samples=true") == 0
    assert last_result(workdir / "reports")["metrics"]["exactly_once"] is True
    if per_file == 1:
        return
    victim = workdir / f"data/tiny/train/img_0000002.{fmt}"
    raw = bytearray(victim.read_bytes())
    at = raw.find(_second_sample(victim, fmt)[:256])
    assert at > 0
    raw[at + 100] ^= 0x01  # inside sample 1 (of 3): the format has no checksum of its own
    victim.write_bytes(bytes(raw))
    capsys.readouterr()
    assert run_cli("run", str(path), "--no-progress") == 0  # unverified: wrong bytes pass
    # (the spelling of the key works too)
    assert run_cli("run", str(path), "--no-progress", "reader.verify_checksums=true") == 1
    err = capsys.readouterr().err
    assert f"img_0000002.{fmt}" in err and "does not match the CRC-32C" in err
    assert "Traceback" not in err


def test_sample_checksums_need_a_lossless_format_and_a_dataset_that_has_them(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload())
    assert run_cli("run", str(path), "--no-progress") == 0
    capsys.readouterr()
    assert run_cli("run", str(path), "--no-progress", "reader.verify_samples=true") == 1
    assert "holds no per-sample checksums" in capsys.readouterr().err
    assert run_cli("run", str(path), "--no-progress", "dataset.sample_checksums=true") == 1
    assert "generated without per-sample checksums" in capsys.readouterr().err
    assert run_cli("run", str(path), "--no-progress", "dataset.format=jpeg",
                   "reader.verify_samples=true") == 2
    assert "jpeg is lossy" in capsys.readouterr().err
