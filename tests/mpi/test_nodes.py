"""Emulated nodes (``dliobench nodes``): 2 nodes x 2 ranks on this machine, each node its own
hostname, node-local folder and /dev/shm (namespaces, so root), MPI between nodes over TCP.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import last_result

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytestmark = [
    pytest.mark.mpi, pytest.mark.slow,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)"),
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                       reason="emulated nodes need root and unshare (mount namespaces)"),
]
UNET3D = Path(__file__).resolve().parents[2] / "workloads" / "unet3d.yaml"
SMALL = ["dataset.data_folder=data", "dataset.num_files_train=16",
         "dataset.num_samples_per_file=1", "dataset.record_length_bytes=64KiB",
         "dataset.record_length_bytes_stdev=0", "dataset.record_length_bytes_resize=0",
         "dataset.num_subfolders_train=0", "reader.batch_size=2", "reader.read_threads=1",
         "reader.data_loader=native",  # unet3d ships pytorch: 4 ranks' torch, +10 s
         "reader.file_shuffle=off", "reader.sample_shuffle=off"]


def nodes_cmd(local: Path, *run_args: str) -> list[str]:
    return [sys.executable, "-m", "dliobench", "nodes", "--nodes", "2", "--ranks-per-node",
            "2", "--local", str(local), "--", "run", str(UNET3D), "--no-progress", *SMALL,
            *run_args]


def test_two_nodes_stage_their_ranks_files_and_read_every_sample_once(workdir: Path) -> None:
    """Node-local staging on 2 x 2: each node copies only its own ranks' 8 files into its
    own folder (the path outside the nodes stays empty), the 4 ranks read every sample once
    an epoch, and the result holds each node's figures."""
    local = workdir / "local"
    proc = subprocess.run(nodes_cmd(local, "train.epochs=2", "train.computation_time=0.005",
                                    f"storage.stage_to={local}", "storage.stage_scope=node",
                                    "storage.keep_staged=true"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    assert result["machine"]["hosts"] == ["node-0", "node-1"]
    assert [(n["host"], n["ranks"]) for n in result["nodes"]] == [("node-0", [0, 1]),
                                                                   ("node-1", [2, 3])]
    file_bytes = (workdir / "data/train/img_0000000.npz").stat().st_size
    assert [(s["host"], s["files"], s["bytes"]) for s in result["staging"]["nodes"]] == [
        ("node-0", 8, 8 * file_bytes), ("node-1", 8, 8 * file_bytes)]
    assert not list(local.iterdir())  # kept copies were in the nodes' own folders
    assert result["metrics"]["exactly_once"] is True
    assert [e["delivered"] for r in result["ranks"] for e in r["epochs"]] == [4] * 8
    for node in result["nodes"]:
        assert node["samples"] > 0 and node["bytes"] > 0 and node["staging_s"] > 0
        assert node["memory_bytes"] > 0 and node["machine_id"]
    # one machine: the page-cache rule weighs its memory once, not once per node
    assert result["honesty"]["host_memory_bytes"] == result["nodes"][0]["memory_bytes"]
    assert "per node" in proc.stdout and "node-1" in proc.stdout


def _pids(run_dir: Path, ranks: list[int]) -> list[int]:
    """The pids of ``ranks`` from their journals' start records, once each journaled a step."""
    deadline = time.monotonic() + 60
    paths = [run_dir / f"journal/rank-{r:05d}.jsonl" for r in ranks]
    while time.monotonic() < deadline:
        if all(p.exists() and b'{"k":"steps"' in p.read_bytes() for p in paths):
            return [json.loads(p.read_bytes().split(b"\n")[0][9:])["pid"] for p in paths]
        time.sleep(0.1)
    raise AssertionError("the ranks never journaled a step")


def test_a_killed_node_ends_the_job_naming_it_and_the_others_measurements_stay(
        workdir: Path) -> None:
    """SIGKILL both ranks of node-1 mid-run: node-0's ranks stall at the next epoch, and
    within the stall timeout the job ends with one sentence naming node-1; the partial
    result holds node-0's measurements (and node-1's up to its last second)."""
    stall = 3
    proc = subprocess.Popen(nodes_cmd(workdir / "local", "train.epochs=2000",
                                      "train.computation_time=0.005",
                                      f"train.stall_timeout_s={stall}"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (workdir / "reports").exists() or not any((workdir / "reports").iterdir()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        run_dir = next((workdir / "reports").iterdir())
        for pid in _pids(run_dir, [2, 3]):
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=60)  # hang guard: the stall timeout is 3 s
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    errors = [line for line in err.splitlines() if line.startswith("dliobench: error:")]
    assert len(errors) == 1, err
    assert "node node-1 (ranks 2, 3) stopped" in errors[0] and "Traceback" not in err
    # the survivors ended it at the stall timeout (their own clock, in the sentence), not
    # later; the wall-clock bound is only a hang guard (10x what it takes)
    assert re.search(rf"ends the job after [{stall}{stall + 1}] s without progress", errors[0])
    assert took < 10 * (stall + 2), took
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "partial"
    ended = {e["rank"]: e["ended"] for e in result["ranks_ended"]}
    # rank 0 spoke for the survivors and journaled its end; the job's abort took rank 1
    assert (ended[0], ended[2], ended[3]) == ("stalled", "no end record", "no end record")
    assert all(r["steps"] > 0 for r in result["ranks"])
    assert [n["host"] for n in result["nodes"]] == ["node-0", "node-1"]


def test_without_the_right_to_make_namespaces_it_says_so_in_one_sentence(workdir: Path) -> None:
    """An unprivileged user (here: root's rights dropped in a user namespace) gets one
    sentence saying what the emulated nodes need, no traceback."""
    proc = subprocess.run(["unshare", "--user", *nodes_cmd(workdir / "local")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("dliobench: error:") == 1 and "Traceback" not in proc.stderr
    assert "needs root (or CAP_SYS_ADMIN)" in proc.stderr
