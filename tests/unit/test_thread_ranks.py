"""Several ranks simulated as threads in one process, through the real runner and loaders."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dliobench.base.errors import ConfigError
from dliobench.comm.world import ThreadGroup, World
from dliobench.config.load import load
from dliobench.run import session as benchmark


def run_ranks(size: int, overrides: list[str]) -> list[Any]:
    cfg, warnings = load(None, overrides)
    comms = ThreadGroup(size).comms()

    def one(rank: int) -> Any:
        world = World(rank=rank, size=size, local_rank=rank, local_size=size, host="h")
        return benchmark.run(cfg, world, comms[rank], warnings, show_progress=False)

    with ThreadPoolExecutor(size) as pool:
        return list(pool.map(one, range(size)))


def test_three_ranks_share_one_dataset_and_one_result(tmp_path: Path) -> None:
    outcomes = run_ranks(3, [f"dataset.data_folder={tmp_path / 'd'}",
                             f"output.folder={tmp_path / 'r'}", "dataset.num_files_train=13",
                             "reader.batch_size=2", "reader.sample_shuffle=seed",
                             "train.epochs=2", "train.allreduce_bytes=4096",
                             "train.computation_time=0.001"])
    root = outcomes[0]
    assert root.result is not None and all(o.result is None for o in outcomes[1:])
    result = root.result
    assert result["ranks_count"] == 3
    assert result["metrics"]["exactly_once"] is True
    # 13 samples over 3 ranks: 5, 4, 4; every rank takes 4 // 2 = 2 steps
    assert [sum(e["delivered"] for e in r["epochs"]) for r in result["ranks"]] == [8, 8, 8]
    assert result["metrics"]["undelivered_samples"] == 2 * 13 - 24
    assert len(list((tmp_path / "d/train").iterdir())) == 13


def test_thread_allreduce_sums() -> None:
    comms = ThreadGroup(3).comms()

    def one(rank: int) -> np.ndarray:
        buf = np.full(4, rank + 1, dtype=np.float32)
        comms[rank].allreduce_buffer(buf)
        return buf

    with ThreadPoolExecutor(3) as pool:
        for buf in pool.map(one, range(3)):
            assert buf.tolist() == [6.0] * 4


def test_more_ranks_than_samples_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="3 ranks but only 2 sample") as info:
        run_ranks(3, [f"dataset.data_folder={tmp_path / 'd'}", "dataset.num_files_train=2",
                      f"output.folder={tmp_path / 'r'}", "reader.drop_last=false"])
    assert "dataset.num_files_train" in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()
