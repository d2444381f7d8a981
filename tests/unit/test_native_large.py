"""The native loader on large one-sample files: work items of about ``ITEM_BYTES`` (so a
reader done early goes on with queued samples instead of waiting for the oldest batch), in
Python reader threads and in the C extension's ``ReadQueue``, and
sample memory that starts on a page (the kernel's copy into memory 16 bytes into a page, where
``np.empty`` puts a large array, costs ~40 % more CPU)."""

from __future__ import annotations

import mmap
import threading
from pathlib import Path

import numpy as np
import pytest

from dliobench.dataset.plan import Plan
from dliobench.dataset.sharding import rank_samples
from dliobench.loaders import make_loader, queued
from dliobench.loaders.base import SampleReader
from dliobench.loaders.queued import Started
from dliobench.storage import checked_reads, posix_io
from dliobench.storage.buffers import SampleBuffers
from tests.contract.test_loaders import dataset


def _plan(tmp_path: Path, *overrides: str) -> Plan:
    """16 one-sample npy files, batch 8, 4 readers, prefetch 4."""
    return dataset(tmp_path, "reader.data_loader=native", "dataset.num_samples_per_file=1",
                   "dataset.num_files_train=16", "dataset.record_length_bytes_stdev=0",
                   "dataset.format=npy", "reader.batch_size=8", "reader.read_threads=4",
                   "reader.prefetch_size=4", *overrides)


def _epoch(plan: Plan) -> None:
    loader = make_loader(plan)
    try:
        got = list(loader.epoch(rank_samples(plan.spec, 0)))
    finally:
        loader.close()
    assert sorted(np.concatenate([b.ids for b in got]).tolist()) == list(range(16))


def _items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *overrides: str) -> list[int]:
    """The samples of each work item of one epoch read by Python reader threads (no C
    extension)."""
    plan = _plan(tmp_path, *overrides)
    items: list[int] = []
    lock = threading.Lock()
    read_many = SampleReader.read_many

    def recorded(self: SampleReader, ids: list[int],
                 pool: SampleBuffers | None = None) -> list[tuple[np.ndarray, int]]:
        with lock:
            items.append(len(ids))
        return read_many(self, ids, pool)

    with monkeypatch.context() as patch:
        patch.setattr(posix_io, "_read_files", None)
        patch.setattr(SampleReader, "read_many", recorded)
        _epoch(plan)
    return sorted(items)


def _chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *overrides: str,
            ) -> list[tuple[str, int, int]]:
    """(how, samples, files a reader takes at once) of each batch submitted to the C
    extension's ``ReadQueue``: by index ("named", ``NamedBatch``) or as lists of paths and
    buffers ("lists", ``start_many``: pooled memory)."""
    plan = _plan(tmp_path, *overrides)
    submitted: list[tuple[str, int, int]] = []
    start_many, named = SampleReader.start_many, queued.NamedBatch.__init__

    def recorded(self: SampleReader, ids: list[int], queue: object,
                 pool: SampleBuffers | None = None, chunk: int = 1) -> Started:
        submitted.append(("lists", len(ids), chunk))
        return start_many(self, ids, queue, pool, chunk)

    def recorded_named(self: queued.NamedBatch, reader: SampleReader, queue: object,
                       names: object, ids: list[int], size: int, chunk: int) -> None:
        submitted.append(("named", len(ids), chunk))
        named(self, reader, queue, names, ids, size, chunk)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(SampleReader, "start_many", recorded)
        patch.setattr(queued.NamedBatch, "__init__", recorded_named)
        _epoch(plan)
    return submitted


def test_large_samples_are_read_in_items_of_about_four_mib(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 MiB samples: items of 4 (4 MiB), not one item of the whole batch (a batch per
    # reader in flight, none queued for a reader done early)
    large = _items(tmp_path / "large", monkeypatch, "dataset.record_length_bytes=1048576")
    assert large == [4, 4, 4, 4]
    # 4 KiB samples: a batch is one item (prefetch 4 keeps 4 readers busy), as before
    assert _items(tmp_path / "small", monkeypatch, "dataset.record_length_bytes=4096") == [8, 8]


@pytest.mark.skipif(checked_reads.read_queue() is None, reason="no C extension")
def test_queued_batches_are_shared_by_every_reader_in_items_of_at_most_four_mib(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # each batch is submitted whole; each of 4 readers takes 8 / 4 = 2 files at a time
    # (small files of one size: by index, into one block per batch)
    small = _chunks(tmp_path / "small", monkeypatch, "dataset.record_length_bytes=4096")
    assert small == [("named", 8, 2), ("named", 8, 2)]
    # 2 readers would take 4 files at a time; 2 MiB samples cap that at 2 (4 MiB)
    large = _chunks(tmp_path / "large", monkeypatch, "dataset.record_length_bytes=2097152",
                    "reader.read_threads=2")
    assert large == [("lists", 8, 2), ("lists", 8, 2)]


def test_sample_memory_starts_on_a_page() -> None:
    pool = SampleBuffers(3 << 20, keep=3)
    pool.reserve(2)
    blocks = [pool.take() for _ in range(3)]  # two reserved, one made on demand
    assert [b.ctypes.data % mmap.PAGESIZE for b in blocks] == [0, 0, 0]
    assert [b.size for b in blocks] == [3 << 20] * 3
