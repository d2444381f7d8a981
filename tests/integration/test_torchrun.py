"""Real ranks under a real ``torchrun`` (gloo on CPU), and the launcher's precedence.

``--standalone`` gives each job its own rendezvous port, so these run in parallel safely.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.comm.launch import detect_launcher, quiet_rank
from tests.conftest import last_result, rank_pid, tiny_workload

TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent))
needs_torchrun = pytest.mark.skipif(TORCHRUN is None, reason="no torchrun (the torch extra)")


def torchrun_cmd(ranks: int, *args: str) -> list[str]:
    assert TORCHRUN is not None
    return [TORCHRUN, "--standalone", f"--nproc-per-node={ranks}", "-m", "dliobench", *args]


@pytest.mark.serial  # timing: alone, not beside another worker (Makefile)
@needs_torchrun
def test_torchrun_ranks_share_the_dataset_and_one_result(
        workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int]) -> None:
    """A sweep's point through ``launcher: torchrun`` on 2 ranks: the sweep starts
    ``torchrun --standalone --nproc-per-node=2 -m dliobench run ...`` (the command users
    type, which the kill and failure tests below start themselves), and the ranks share the
    dataset and write one result. One torchrun job for what were two tests (one through a
    sweep, one direct: ~5 s of torch's start-up each)."""
    import json

    import yaml

    doc = tiny_workload(dataset={"num_files_train": 24},
                        reader={"sample_shuffle": "seed", "file_shuffle": "seed"},
                        train={"computation_time": 0.005, "allreduce_bytes": "64KiB"})
    sweep = workdir / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "t", "workload": str(write_workload(doc)), "output": str(workdir / "sweeps"),
        "launcher": "torchrun", "axes": {"ranks": [2]}}))
    assert run_cli("sweep", str(sweep)) == 0
    summary = json.loads(next((workdir / "sweeps").glob("*/sweep.json")).read_text())
    result = json.loads(Path(summary["points"][0]["run_dir"], "result.json").read_text())
    assert result["ranks_count"] == 2 and result["launcher"] == "torch"
    assert [r["rank"] for r in result["ranks"]] == [0, 1]
    m = result["metrics"]
    assert m["exactly_once"] is True
    # what `mpiexec -n 2` delivers (tests/mpi): 24 samples / 2 ranks in batches of 2, 2 epochs
    delivered = sum(e["delivered"] for r in result["ranks"] for e in r["epochs"])
    assert delivered == 2 * 2 * 6 * 2
    assert delivered + m["undelivered_samples"] == 2 * 24
    assert m["comm_s"] > 0  # the overlapped allreduce ran over the torch Comm
    assert result["nodes"][0]["ranks"] == [0, 1]


def _journaled(workdir: Path, rank: int) -> bool:
    """Whether ``rank`` of the one run in ``workdir/reports`` has journaled a step."""
    return any(b'{"k":"steps"' in path.read_bytes()
               for path in (workdir / "reports").glob(f"*/journal/rank-{rank:05d}.jsonl"))


@needs_torchrun
def test_killed_torchrun_rank_ends_the_job_within_seconds(
        workdir: Path, write_workload: Callable[..., Path]) -> None:
    """SIGKILL rank 1 once both ranks journaled steps: the job ends within seconds, and the
    surviving rank 0 (which loses its peer, or is sent SIGTERM by torchrun) assembles the
    partial result from both ranks' journals, saying where rank 1's records end and why."""
    path = write_workload(tiny_workload(train={"epochs": 500, "computation_time": 0.02}),
                          "killme.yaml")
    proc = subprocess.Popen(torchrun_cmd(2, "run", str(path), "--no-progress"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, pid = time.monotonic() + 60, None
        while pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
            if (workdir / "reports").exists() and _journaled(workdir, 0) \
                    and _journaled(workdir, 1):
                pid = rank_pid("killme.yaml", 1, variable="RANK")
        assert pid is not None, "rank 1 never started training"
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        assert time.monotonic() - killed < 10
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # torchrun's failure report names the killed rank as the root cause
    assert "rank      : 1 (local_rank: 1)" in stderr and "SIGKILL" in stderr
    result = last_result(workdir / "reports")
    assert result["status"] == "partial" and [r["rank"] for r in result["ranks"]] == [0, 1]
    assert all(r["steps"] > 0 for r in result["ranks"])
    ended = {e["rank"]: e for e in result["ranks_ended"]}
    assert ended[1]["ended"] == "no end record" and "killed" in ended[1]["why"]
    assert ended[0]["ended"] in ("lost a peer", "terminated")
    said = " ".join(stderr.split())  # the log wraps its lines
    assert "what ranks 0, 1 measured is in" in said and "(status: partial)" in said


@needs_torchrun
def test_a_failing_torchrun_rank_is_named_as_the_root_cause(
        workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int]) -> None:
    """Rank 1 reads a corrupt file: its sentence is the one error, rank 0 (which only lost its
    peer) says so and lets torchrun stop it, or is stopped by torchrun before it notices,
    and torchrun's table names rank 1 as the root cause with that sentence; the partial
    result keeps rank 1's measurements."""
    path = write_workload(tiny_workload(dataset={"num_files_train": 8}, train={"epochs": 1}),
                          "corrupt.yaml")
    assert run_cli("generate", str(path), "--no-progress") == 0
    victim = workdir / "data/tiny/train/img_0000007.npz"  # read by rank 1 (no shuffle)
    raw = bytearray(victim.read_bytes())
    raw[3000] ^= 0xFF
    victim.write_bytes(bytes(raw))
    proc = subprocess.run(torchrun_cmd(2, "run", str(path), "--no-progress",
                                       "train.computation_time=0.05"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "dliobench: error: rank 1 of 2" in proc.stderr
    assert proc.stderr.count("dliobench: error:") == 1
    # rank 0 either finds its peer gone and waits to be stopped, or torchrun's SIGTERM
    # reaches it first (it was emulating compute): either way one line, not gloo's
    lost = "dliobench: rank 0 of 2 on" in proc.stderr and "another rank ended" in proc.stderr
    assert lost or "dliobench: terminated (SIGTERM)" in proc.stderr
    assert "gloo" not in proc.stderr and "Connection closed" not in proc.stderr
    root = proc.stderr.split("Root Cause")[-1]
    assert "rank      : 1 (local_rank: 1)" in root and "img_0000007.npz" in root
    # every rank's journal is in the partial result (rank 1's failure, rank 0's records)
    result = last_result(workdir / "reports")
    assert result["status"] == "partial" and [r["rank"] for r in result["ranks"]] == [0, 1]
    ended = {e["rank"]: e for e in result["ranks_ended"]}
    assert ended[1]["ended"] == "error" and "img_0000007.npz" in ended[1]["why"]


MPI_ENV = {"PMI_RANK": "1", "PMI_SIZE": "2"}
TORCH_ENV = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost"}


@pytest.mark.parametrize(("env", "launcher", "quiet"), [
    ({}, "none", False), (MPI_ENV, "mpi", True), (TORCH_ENV, "torch", True),
    ({**TORCH_ENV, "RANK": "0"}, "torch", False), ({**MPI_ENV, **TORCH_ENV}, "mpi", True),
    ({"RANK": "3"}, "none", False)])
def test_launcher_precedence(env: dict[str, str], launcher: str, quiet: bool,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*MPI_ENV, *TORCH_ENV, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "PMIX_RANK", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert detect_launcher() == launcher
    assert quiet_rank() is quiet


def test_launcher_torch_without_torchrun_is_one_line(
        workdir: Path, write_workload: Callable[..., Path]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in TORCH_ENV and k != "MASTER_PORT"}
    proc = subprocess.run([sys.executable, "-m", "dliobench", "run",
                           str(write_workload(tiny_workload())), "--launcher", "torch"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "dliobench: error: --launcher torch needs torchrun's environment; RANK, WORLD_SIZE, "
        "MASTER_ADDR, MASTER_PORT not set (start dliobench with torchrun, or use --launcher "
        "auto)"]
