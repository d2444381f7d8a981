"""The native loader on large one-sample files: work items of about ``ITEM_BYTES`` (so a
reader done early goes on with queued samples instead of waiting for the oldest batch), and
sample memory that starts on a page (the kernel's copy into memory 16 bytes into a page, where
``np.empty`` puts a large array, costs ~40 % more CPU)."""

from __future__ import annotations

import mmap
import threading
from pathlib import Path

import numpy as np
import pytest

from dliobench.dataset.sharding import rank_samples
from dliobench.loaders import make_loader
from dliobench.loaders.base import SampleReader
from dliobench.storage.buffers import SampleBuffers
from tests.contract.test_loaders import dataset


def _items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *overrides: str) -> list[int]:
    """The samples of each work item of one epoch (batch 8, 4 readers, prefetch 4)."""
    plan = dataset(tmp_path, "reader.data_loader=native", "dataset.num_samples_per_file=1",
                   "dataset.num_files_train=16", "dataset.record_length_bytes_stdev=0",
                   "dataset.format=npy", "reader.batch_size=8", "reader.read_threads=4",
                   "reader.prefetch_size=4", *overrides)
    items: list[int] = []
    lock = threading.Lock()
    read_many = SampleReader.read_many

    def recorded(self: SampleReader, ids: list[int],
                 pool: SampleBuffers | None = None) -> list[tuple[np.ndarray, int]]:
        with lock:
            items.append(len(ids))
        return read_many(self, ids, pool)

    monkeypatch.setattr(SampleReader, "read_many", recorded)
    loader = make_loader(plan)
    try:
        got = list(loader.epoch(rank_samples(plan.spec, 0)))
    finally:
        loader.close()
        monkeypatch.undo()
    assert sorted(np.concatenate([b.ids for b in got]).tolist()) == list(range(16))
    return sorted(items)


def test_large_samples_are_read_in_items_of_about_four_mib(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 MiB samples: items of 4 (4 MiB), not one item of the whole batch (a batch per
    # reader in flight, none queued for a reader done early)
    large = _items(tmp_path / "large", monkeypatch, "dataset.record_length_bytes=1048576")
    assert large == [4, 4, 4, 4]
    # 4 KiB samples: a batch is one item (prefetch 4 keeps 4 readers busy), as before
    assert _items(tmp_path / "small", monkeypatch, "dataset.record_length_bytes=4096") == [8, 8]


def test_sample_memory_starts_on_a_page() -> None:
    pool = SampleBuffers(3 << 20, keep=3)
    pool.reserve(2)
    blocks = [pool.take() for _ in range(3)]  # two reserved, one made on demand
    assert [b.ctypes.data % mmap.PAGESIZE for b in blocks] == [0, 0, 0]
    assert [b.size for b in blocks] == [3 << 20] * 3
