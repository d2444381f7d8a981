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

from dliobench.comm.world import LocalComm, ThreadGroup, World
from dliobench.config.load import load
from dliobench.config.schema import Config
from dliobench.results.schema import RunResult
from dliobench.run import preflight, session
from dliobench.run.judge import delivered_per_rank, judge_client

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
BURN = "while True: pass"


@contextlib.contextmanager
def busy_cores(cores: set[int]) -> Iterator[None]:
    """One CPU burner process per core of ``cores``, each pinned to them, for the block."""
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in cores]
    try:
        for burner in burners:
            os.sched_setaffinity(burner.pid, cores)
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
        outcomes = list(pool.map(one, range(size)))
    result = outcomes[0].result
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


def test_a_dlrm_ceiling_below_what_the_run_delivered_is_not_used(tmp_path: Path) -> None:
    """The shipped DLRM workload scaled down by keys, read from the device (evicted), judged
    with metric.client_ceiling: auto. The ceiling is measured by the real probe run, held to
    4/5 of what the run delivered by a compute time (as a ceiling measured while something
    else held the client would be): below what the run delivered, it is measured once more,
    still below, and then not used: the verdict stays the storage's and says why."""
    config, _ = load(WORKLOADS / "dlrm.yaml", [
        f"dataset.data_folder={tmp_path / 'd'}", f"output.folder={tmp_path / 'r'}",
        "dataset.num_files_train=2", "dataset.num_samples_per_file=32768",
        "reader.read_threads=0", "storage.drop_cache=true", "metric.client_ceiling=off",
        "metric.client_cpu_busy=off"])  # the CPU rule apart: this is the ceiling's test
    world, comm = World.single(), LocalComm()
    result = session.run(config, world, comm, [], show_progress=False).result
    assert result is not None and result["verdict"]["limiter"] == "storage", result["verdict"]
    delivered = delivered_per_rank(result)
    assert delivered is not None
    probes: list[float] = []

    def held_probe(probe: Config) -> RunResult | None:
        compute = probe.reader.batch_size / (delivered / 1.25)
        probes.append(compute)
        held = replace(probe, train=replace(probe.train, computation_time=compute))
        return session.run(held, world, comm, [], show_progress=False).result

    auto = replace(config, metric=replace(config.metric, client_ceiling="auto"))
    judge_client(auto, world, comm, result, held_probe)
    verdict = result["verdict"]
    assert len(probes) == 2  # measured, below what was delivered: measured once more
    unused = verdict["client_ceiling_unused"]
    ceiling = unused["samples_per_s_per_rank"]
    assert 0 < ceiling < delivered and unused["delivered_samples_per_s_per_rank"] == delivered
    assert verdict["limiter"] == "storage" and verdict["client_ceiling_source"] == "re-measured"
    assert verdict["client_ceiling_samples_per_s_per_rank"] is None
    assert verdict["reason"].endswith(f"(client ceiling {ceiling:,.1f} < delivered "
                                      f"{delivered:,.1f} samples/s per rank: not used)")
