"""Every result says whether the run met its AU floor and, if not, what limited it."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from dliobench.comm.world import ThreadGroup, World
from dliobench.config.load import load
from dliobench.results.schema import parse_version
from dliobench.run import ceiling, session
from tests.conftest import last_result, tiny_workload

SLOWDISK = Path(__file__).resolve().parents[3] / "shared" / "tools" / "slowdisk.sh"
PINNED = "metric.client_ceiling=100000"  # tests pin the ceiling: nothing is measured here
# the rules apart from the host CPU's (a shared test host may be busy: test_client_limits.py)
CPU_OFF = "metric.client_cpu_busy=off"
# Runs judged storage-limited read from the device: each epoch's files are evicted first (a
# run that reads from the page cache is client-limited: test_device_reads.py)
EVICT = {"drop_cache": True}


def run(run_cli: Callable[..., int], path: Path, *overrides: str) -> int:
    return int(run_cli("run", str(path), "--no-progress", PINNED, CPU_OFF, *overrides))


def test_meeting_the_floor_and_where_the_time_went(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workload(tiny_workload(train={"computation_time": 0.01}))
    assert run(run_cli, path) == 0
    result = last_result(workdir / "reports")
    verdict, shares = result["verdict"], result["time_shares"]
    assert verdict["meets_floor"] is True and verdict["limiter"] == "none"
    assert parse_version(result["schema_version"]) >= (1, 1)  # 1.1 brought the verdict
    assert set(shares) == {"compute", "wait", "comm", "checkpoint", "other"}
    assert sum(shares.values()) == pytest.approx(1.0) and shares["compute"] > 0.5
    assert result["ranks"][0]["cpu_s"] > 0 and 0 < result["ranks"][0]["cpu_share"] <= 1.5
    out = capsys.readouterr().out
    assert "meets the floor" in out and "where the time went" in out
    assert f"results: reports/{result['run_id']}/result.json" in out  # never cut
    with open(workdir / "reports" / result["run_id"] / "timeline.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert sum(int(r["counted"]) for r in rows) == result["metrics"]["steps"]
    assert next(r["counted"] for r in rows if r["epoch"] == "0") == "0"  # warm-up step


def test_compute_zero_has_no_floor(workdir: Path, write_workload: Callable[..., Path],
                                   run_cli: Callable[..., int]) -> None:
    assert run(run_cli, write_workload(tiny_workload()), "--fail-below-floor") == 0
    verdict = last_result(workdir / "reports")["verdict"]
    assert verdict["meets_floor"] is None and verdict["limiter"] == "not applicable"


def test_a_demand_above_the_client_ceiling_is_client_limited(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> None:
    path = write_workload(tiny_workload(dataset={"record_length_bytes": 4 << 20},
                                        reader={"read_threads": 0}, storage=EVICT,
                                        train={"computation_time": 0.0005}))
    assert run_cli("run", str(path), "--no-progress", "metric.client_ceiling=off", CPU_OFF) == 0
    unjudged = last_result(workdir / "reports")["verdict"]  # off: never measured
    assert unjudged["limiter"] == "storage" and unjudged["client_ceiling_source"] is None
    assert run(run_cli, path, "metric.client_ceiling=10", "--output", str(workdir / "c")) == 0
    verdict = last_result(workdir / "c")["verdict"]
    assert verdict["meets_floor"] is False and verdict["limiter"] == "client"
    assert verdict["demand_samples_per_s_per_rank"] == pytest.approx(2 / 0.0005)
    # ceiling 100000: storage-limited, and --fail-below-floor makes the miss exit 3
    assert run(run_cli, path, "--fail-below-floor", "--output", str(workdir / "again")) == 3
    assert last_result(workdir / "again")["verdict"]["limiter"] == "storage"


def test_auto_measures_the_ceiling_and_reuses_it_only_under_the_same_load(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A wait-limited run with metric.client_ceiling: auto (the default) measures this host's
    loader from memory; its demand (4,000 samples/s of 4 MiB, one reader) is beyond it. A
    ceiling cached for these settings under another load (more cores busy than there are) is
    not reused; the one measured serves the next run only if the host's load still matches
    (on this shared host it moves, so that run is checked against the load it sampled)."""
    path = write_workload(tiny_workload(dataset={"record_length_bytes": 4 << 20},
                                        reader={"read_threads": 0}, storage=EVICT,
                                        train={"computation_time": 0.0005}))
    config, _ = load(str(path), [])
    cores = len(os.sched_getaffinity(0))
    ceiling._remember(config, World.single(), 1e9, {"load": {"cores": cores,
                                                             "busy_cores": cores + 1.0}})
    assert run_cli("run", str(path), "--no-progress", CPU_OFF) == 0
    first = last_result(workdir / "reports")["verdict"]
    assert first["client_ceiling_source"] == "measured" and first["limiter"] == "client"
    assert 0 < first["client_ceiling_samples_per_s_per_rank"] < 4000
    [entry] = json.loads(ceiling.cache_path().read_text()).values()  # the planted one, replaced
    assert entry["load"]["cores"] == cores and entry["load"]["busy_cores"] <= cores
    assert run_cli("run", str(path), "--no-progress", CPU_OFF, "--output",
                   str(workdir / "again")) == 0
    again = last_result(workdir / "again")["verdict"]
    reused = ceiling.load_matches(entry["load"], again["client_ceiling_load"])
    assert again["client_ceiling_source"] == ("cached" if reused else "measured"), again
    capsys.readouterr()
    assert run_cli("ceiling", str(path)) == 0
    out = capsys.readouterr().out
    assert "samples/s per rank" in out and "cannot keep up, whatever the storage" in out
    assert not list(Path("/dev/shm").glob("dliobench-ceiling-*"))  # the copy is removed


def test_a_blocking_large_allreduce_is_communication_limited(tmp_path: Path) -> None:
    cfg, warnings = load(None, [f"dataset.data_folder={tmp_path / 'd'}",
                                f"output.folder={tmp_path / 'r'}", "dataset.num_files_train=16",
                                "reader.batch_size=2", "train.computation_time=0.001",
                                "train.allreduce_bytes=16MiB", "train.allreduce_overlap=false",
                                PINNED])
    comms = ThreadGroup(2).comms()

    def one(rank: int) -> Any:
        world = World(rank=rank, size=2, local_rank=rank, local_size=2, host="h")
        return session.run(cfg, world, comms[rank], warnings, show_progress=False)

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(one, range(2)))
    result = outcomes[0].result
    assert result is not None
    assert result["verdict"]["limiter"] == "communication"
    assert result["time_shares"]["comm"] > 0.5


@pytest.mark.slow
def test_a_capped_tier_is_storage_limited(workdir: Path, write_workload: Callable[..., Path],
                                          run_cli: Callable[..., int]) -> None:
    """Reads capped by the kernel at 20 MB/s (``slowdisk.sh``), O_DIRECT, a demand of
    100 MB/s: storage-limited, the ceiling being far above the demand."""
    if not SLOWDISK.exists() or shutil.which("mkfs.ext4") is None:
        pytest.skip("../shared/tools/slowdisk.sh or mkfs.ext4 is missing")
    mount = workdir / "slow"
    up = subprocess.run(["bash", str(SLOWDISK), "up", str(mount), "64", "20"],
                        capture_output=True, text=True)
    if up.returncode == 3:
        pytest.skip(up.stderr.strip())
    assert up.returncode == 0, up.stderr
    try:
        path = write_workload(tiny_workload(dataset={"data_folder": str(mount / "data"),
                                                     "num_files_train": 12,
                                                     "record_length_bytes": 1 << 20},
                                            reader={"odirect": True},
                                            train={"computation_time": 0.02}))
        assert run_cli("generate", str(path), "--no-progress") == 0
        done = subprocess.run(["bash", str(SLOWDISK), "run", str(mount), sys.executable, "-m",
                               "dliobench", "run", str(path), "--no-progress", PINNED,
                               CPU_OFF],  # other processes on a shared host: not the point
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        verdict = last_result(workdir / "reports")["verdict"]
        assert verdict["meets_floor"] is False and verdict["limiter"] == "storage", verdict
    finally:
        subprocess.run(["bash", str(SLOWDISK), "down", str(mount)], capture_output=True)
