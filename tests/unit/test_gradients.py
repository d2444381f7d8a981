"""The emulated gradient allreduce: off by default, overlapped with compute when on."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dliobench.comm.world import ThreadComm, ThreadGroup, World
from dliobench.config.load import load
from dliobench.run.accelerator import busy_wait
from dliobench.run.gradients import GradientSync, allreduce_bytes

COMM_S = 0.1
COMPUTE_S = 0.2


class SlowComm(ThreadComm):
    """A thread rank whose allreduce takes ``COMM_S`` (a large buffer on a slow network)."""

    def allreduce_buffer(self, buffer: np.ndarray) -> None:
        time.sleep(COMM_S)
        super().allreduce_buffer(buffer)

    def dup(self) -> SlowComm:
        plain = super().dup()
        return SlowComm(plain.group, plain.rank)


def steps(overlap: bool, n: int = 4) -> list[tuple[float, float]]:
    """(step wall time, seconds waited for communication) of rank 0, 2 thread ranks."""
    cfg, _ = load(None, ["train.allreduce_bytes=1MiB",
                         f"train.allreduce_overlap={str(overlap).lower()}"])
    comms = [SlowComm(c.group, c.rank) for c in ThreadGroup(2).comms()]

    def rank(r: int) -> list[tuple[float, float]]:
        sync = GradientSync(cfg, World(rank=r, size=2), comms[r])
        out = []
        try:
            for _ in range(n):
                start = time.perf_counter()
                sync.start()
                busy_wait(COMPUTE_S)
                waited = sync.finish()
                out.append((time.perf_counter() - start, waited))
        finally:
            sync.close()
        return out

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(rank, range(2)))  # both ranks, their errors raised
    return results[0]


def test_an_allreduce_shorter_than_compute_costs_nothing_when_overlapped() -> None:
    for wall, waited in steps(overlap=True)[1:]:
        assert wall < COMPUTE_S + 0.5 * COMM_S  # ~0.2 s, not 0.3 s (loose: 2 cores)
        assert waited < 0.5 * COMM_S


def test_the_blocking_allreduce_adds_its_time() -> None:
    for wall, waited in steps(overlap=False)[1:]:
        assert wall >= COMPUTE_S + COMM_S
        assert waited >= COMM_S


def test_no_communication_unless_asked() -> None:
    cfg, _ = load(None, [])
    assert cfg.train.allreduce_bytes == 0
    assert not GradientSync(cfg, World(rank=0, size=4), ThreadGroup(4).comms()[0]).enabled
    model, _ = load(None, ["train.allreduce_bytes=model", "model.model_size_bytes=1000"])
    assert allreduce_bytes(model) == 1000
    legacy, _ = load(None, ["train.allreduce_bytes=-1", "model.model_size_bytes=1000"])
    assert allreduce_bytes(legacy) == 1000
    with pytest.raises(Exception, match="allreduce_bytes"):
        load(None, ["train.allreduce_bytes=lots"])
