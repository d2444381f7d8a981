"""The client's share of a verdict (docs/ARCHITECTURE.md, Verdicts): a run whose ranks waited
while their host's CPUs were busy is client-limited, more readers than cores is said before
the run, and a client ceiling below what the run delivered is measured again, then not used."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dliobench.comm.world import LocalComm, ThreadGroup, World
from dliobench.config.load import load
from dliobench.config.schema import Config
from dliobench.results.schema import RunResult
from dliobench.run import preflight, session
from dliobench.run.judge import judge_client

BURN = "while True: pass"


@contextlib.contextmanager
def busy_cores(cores: set[int]) -> Iterator[None]:
    """One CPU burner process per core of ``cores``, each pinned to them, for the block."""
    burners = [subprocess.Popen([sys.executable, "-c", BURN],
                                preexec_fn=lambda: os.sched_setaffinity(0, cores))
               for _ in cores]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@contextlib.contextmanager
def pinned(cores: set[int]) -> Iterator[None]:
    """This thread (and the threads it starts: the ranks, their readers) on ``cores``."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def run_threads(config: Config, size: int) -> RunResult:
    """A run of ``size`` ranks as threads of this process (the real loop and loaders)."""
    comms = ThreadGroup(size).comms()

    def one(rank: int) -> Any:
        world = World(rank=rank, size=size, local_rank=rank, local_size=size, host="h")
        return session.run(config, world, comms[rank], [], show_progress=False)

    with ThreadPoolExecutor(size) as pool:
        result = list(pool.map(one, range(size)))[0].result
    assert result is not None
    return result


def test_three_ranks_on_two_busy_cores_are_client_limited(tmp_path: Path) -> None:
    """3 ranks, one reader each, on 2 cores that two burners keep busy: the ranks wait, the
    host's CPUs were busy over the counted window, so the run is the client's, whatever the
    storage did; and 3 readers on 2 cores was said before the run."""
    two = set(sorted(os.sched_getaffinity(0))[:2])
    config, _ = load(None, [f"dataset.data_folder={tmp_path / 'd'}",
                            f"output.folder={tmp_path / 'r'}", "dataset.num_files_train=96",
                            "dataset.record_length_bytes=256KiB", "reader.batch_size=4",
                            "reader.read_threads=1", "train.computation_time=0.0005",
                            "train.epochs=3",  # counted windows of many of the kernel's ticks
                            "metric.client_ceiling=100000"])  # 2 GB/s per rank demanded
    with pinned(two):
        warning = preflight.oversubscribed(config, 3)
        with busy_cores(two):
            result = run_threads(config, 3)
    assert warning is not None and warning.startswith("3 rank(s) x 1 reader thread(s) = 3 "
                                                      "readers on 2 core(s)")
    [node] = result["nodes"]
    busy = node["host_cpu_busy_share"]
    assert busy is not None and busy >= 0.9, node
    verdict = result["verdict"]
    assert verdict["limiter"] == "client", verdict
    assert verdict["host_cpu_busy_share"] == busy and verdict["host_cpu_busy_min"] == 0.9
    assert f"this host's CPUs were {busy:.0%} busy over the counted window" in verdict["reason"]
    assert "whatever the storage did" in verdict["reason"]


def test_readers_within_the_cores_are_not_said() -> None:
    config, _ = load(None, ["reader.read_threads=1"])
    cores, bound = preflight.host_cores()
    assert preflight.oversubscribed(config, 1 if bound else cores) is None
    crowded = preflight.oversubscribed(replace(config, reader=replace(
        config.reader, read_threads=cores + 1, data_loader="pytorch")), 1)
    assert crowded is not None and f"x {cores + 1} PyTorch worker process(es)" in crowded
