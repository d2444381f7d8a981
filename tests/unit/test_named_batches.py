"""Batches submitted to the C extension's ``ReadQueue`` by file index (``NamedBatch``): the
reader threads make each path as the dataset's layout does, read each file into its row of
one page-aligned block and check it against the size's template; the first file of a size,
a damaged one or a missing one goes through its format (its sentence). While reads come from
the page cache, threads beyond the process's CPUs wait as spares; a read that waits for the
device wakes them."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.dataset.layout import _name
from dliobench.dataset.sharding import rank_samples
from dliobench.loaders import make_loader, sample_reader
from dliobench.loaders.base import SampleReader
from dliobench.loaders.queued import NamedBatch, file_names
from dliobench.storage import checked_reads
from tests.contract.test_loaders import dataset

_readfiles = pytest.importorskip("dliobench.storage._readfiles",
                                 reason="the _readfiles extension is not built here")
ReadQueue = _readfiles.ReadQueue


def _reader(tmp_path: Path, fmt: str = "npz", *overrides: str) -> SampleReader:
    plan = dataset(tmp_path, f"dataset.format={fmt}", "dataset.num_samples_per_file=1",
                   "dataset.record_length_bytes=20000", "dataset.record_length_bytes_stdev=0",
                   "dataset.num_files_train=12", *overrides)
    return sample_reader(plan)


def _serve(queue: ReadQueue, count: int) -> list[threading.Thread]:
    threads = [threading.Thread(target=queue.serve, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def _close(queue: ReadQueue, threads: list[threading.Thread]) -> None:
    queue.close()
    for thread in threads:
        thread.join(timeout=60)  # a hang guard
    assert not any(thread.is_alive() for thread in threads)


def _evict(reader: SampleReader, ids: list[int]) -> None:
    """Files ``ids`` out of the page cache: the next read of each waits for the device (a
    file system that keeps them, tmpfs, skips the test)."""
    for i in ids:
        fd = os.open(reader.backend.path(reader.keys[i]), os.O_RDONLY)  # type: ignore[attr-defined]
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT)
        except BlockingIOError:
            continue  # out of the cache
        finally:
            os.close(fd)
        pytest.skip("this file system keeps files in memory: no read waits for a device")


@pytest.fixture
def served() -> Iterator[ReadQueue]:
    """A queue with 3 threads serving it, closed and joined afterwards."""
    queue = ReadQueue()
    threads = _serve(queue, 3)
    yield queue
    _close(queue, threads)


@pytest.mark.parametrize("folders", [0, 1, 3, 10_000])
def test_names_made_in_c_are_the_layouts(folders: int) -> None:
    names = checked_reads.names("/data/train/", "img", folders, "npz")
    for i in (0, 1, 7, 10, 9_999, 10_000, 9_999_999, 10_000_000, 12_345_678, 2**62):
        assert names(i) == _name("/data/train/", "img", folders, "npz", i)  # type: ignore[misc]
    with pytest.raises(ValueError, match="negative"):
        names(-1)  # type: ignore[misc]
    fits = checked_reads.names("/" + "x" * 4070, "i", 0, "npz")  # 4,084 bytes and the NUL
    assert fits(1) == "/" + "x" * 4070 + "i_0000001.npz"  # type: ignore[misc]
    with pytest.raises(ValueError, match="too long"):
        checked_reads.names("/" + "x" * 4090, "i", 0, "npz")(1)  # type: ignore[misc]


def test_the_readers_names_are_its_backends_paths(tmp_path: Path) -> None:
    reader = _reader(tmp_path, "npz", "dataset.num_subfolders_train=2")
    got = file_names(reader)
    assert got is not None and got[1] == reader.uniform_file_size()
    names = got[0]
    for i in range(12):
        assert names(i) == reader.backend.path(reader.keys[i])  # type: ignore[operator, attr-defined]
        assert Path(names(i)).is_file()  # type: ignore[operator]


@pytest.mark.parametrize("fmt", ["npz", "npy"])
def test_a_named_batch_is_read_manys(tmp_path: Path, fmt: str, served: ReadQueue) -> None:
    reader = _reader(tmp_path, fmt)
    names, size = file_names(reader)  # type: ignore[misc]
    ids = [5, 0, 11, 3, 7, 2, 9, 1, 4, 10, 6, 8]
    want = [reader.read(i) for i in ids]
    assert size not in reader.templates
    # no template yet: every file is decoded through its format, which learns it
    first, nbytes = NamedBatch(reader, served, names, ids, size, 2).batch()
    assert reader.templates.get(size) is not None
    assert nbytes == sum(n for _, n in want) == 12 * size
    assert isinstance(first, list)
    for chunk in (1, 5, 12):  # with the template: every file checked in C, a row each
        index = np.array(ids) if chunk == 5 else ids  # the loader's int64 array, or a list
        got, nbytes = NamedBatch(reader, served, names, index, size, chunk).batch()
        assert nbytes == 12 * size
        assert isinstance(got, np.ndarray) and got.shape == (12, want[0][0].size)  # one view
        data_start = reader.templates[size][5]  # type: ignore[index]
        for sample, (expected, _), before in zip(got, want, first, strict=True):
            assert np.array_equal(sample, expected) and np.array_equal(before, expected)
            assert sample.ctypes.data % 4096 == data_start % 4096  # rows start on a page


def test_indices_are_a_list_or_an_int64_array(served: ReadQueue) -> None:
    names = _readfiles.Names("/nowhere/", "img", 0, "npz")
    for wrong in (np.arange(3, dtype=np.int32), np.zeros((2, 2), np.int64), "012", 7):
        with pytest.raises(TypeError, match="a list or an int64 array"):
            served.submit_named(names, wrong, 10, None)
    with pytest.raises(ValueError, match="negative"):
        served.submit_named(names, np.array([3, -1]), 10, None)
    ticket = served.submit_named(names, np.array([3, 4]), 10, None)
    assert served.wait(ticket)[1:] == ([-2, -2], bytes(2), 2, 0)  # ENOENT each, none read


def test_a_damaged_or_missing_file_is_named_in_the_formats_words(tmp_path: Path,
                                                                 served: ReadQueue) -> None:
    reader = _reader(tmp_path, "npz")
    names, size = file_names(reader)  # type: ignore[misc]
    NamedBatch(reader, served, names, [0], size, 1).batch()  # learns the template
    damaged = Path(reader.backend.path(reader.keys[6]))  # type: ignore[attr-defined]
    raw = bytearray(damaged.read_bytes())
    raw[-200] ^= 0xFF  # a data byte: the member's CRC-32 no longer matches
    damaged.write_bytes(bytes(raw))
    with pytest.raises(CorruptSampleError, match="CRC"):
        NamedBatch(reader, served, names, [4, 5, 6, 7], size, 2).batch()
    Path(reader.backend.path(reader.keys[9])).unlink()  # type: ignore[attr-defined]
    with pytest.raises(DatasetError, match="img_0000009"):
        NamedBatch(reader, served, names, [8, 9, 10], size, 1).batch()
    got, _ = NamedBatch(reader, served, names, [1, 2, 3], size, 1).batch()
    assert len(got) == 3  # the queue goes on


def test_a_cancelled_named_batch_is_not_read(tmp_path: Path) -> None:
    reader = _reader(tmp_path, "npy")
    names, size = file_names(reader)  # type: ignore[misc]
    queue = ReadQueue()
    batch = NamedBatch(reader, queue, names, list(range(12)), size, 1)
    batch.abandon()
    threads = _serve(queue, 2)  # serving starts after the cancel: nothing is read
    try:
        _, results, passed, misses, nbytes = queue.wait(batch.ticket)
        assert misses == 12 and set(results) == {-125} and passed == bytes(12)  # ECANCELED
        assert nbytes == 0
    finally:
        _close(queue, threads)


def test_spare_readers_serve_while_reads_wait_for_the_device(tmp_path: Path) -> None:
    reader = _reader(tmp_path, "npy")
    names, size = file_names(reader)  # type: ignore[misc]
    assert ReadQueue().cpus == len(os.sched_getaffinity(0))
    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(everywhere)})  # this thread: the queue sees one CPU
    try:
        queue = ReadQueue()
    finally:
        os.sched_setaffinity(0, everywhere)
    assert queue.cpus == 1
    threads = _serve(queue, 3)  # one at work on cached reads, two spares
    try:
        for _ in range(20):
            got, _ = NamedBatch(reader, queue, names, list(range(12)), size, 1).batch()
            assert len(got) == 12
        assert queue.blocking == 0  # page-cached
        _evict(reader, [3])
        got, _ = NamedBatch(reader, queue, names, [3], size, 1).batch()
        assert queue.blocking == 1
        got, _ = NamedBatch(reader, queue, names, list(range(12)), size, 12).batch()
        assert len(got) == 12 and queue.blocking == 0  # all cached again
    finally:
        _close(queue, threads)


def test_the_native_loader_reads_small_files_by_index(tmp_path: Path) -> None:
    plan = dataset(tmp_path, "reader.data_loader=native", "dataset.format=npz",
                   "dataset.num_samples_per_file=1", "dataset.num_files_train=24",
                   "dataset.record_length_bytes=8192", "dataset.record_length_bytes_stdev=0",
                   "reader.batch_size=4", "reader.read_threads=3")
    loader = make_loader(plan)
    reader = sample_reader(plan)
    try:
        assert loader._named is not None  # type: ignore[attr-defined]
        for epoch in range(2):
            for batch in loader.epoch(rank_samples(plan.spec, epoch)):
                for i, sample in zip(batch.ids.tolist(), batch.data, strict=True):
                    assert np.array_equal(sample, reader.read(i)[0])  # type: ignore[arg-type]
    finally:
        loader.close()


def test_a_batchs_memory_is_reused_once_its_samples_die(tmp_path: Path,
                                                        served: ReadQueue) -> None:
    # fresh memory per batch cost a page fault per 4 KiB (64 KiB npz: 28k against 97k
    # samples/s): a block whose arrays died goes to the next batch of its size
    reader = _reader(tmp_path, "npy")
    names, size = file_names(reader)  # type: ignore[misc]
    got, _ = NamedBatch(reader, served, names, list(range(8)), size, 2).batch()
    first = got[0].ctypes.data
    held, _ = NamedBatch(reader, served, names, list(range(8)), size, 2).batch()
    assert held[0].ctypes.data != first  # the first batch's samples are still alive
    del got
    again, _ = NamedBatch(reader, served, names, list(range(8)), size, 2).batch()
    assert again[0].ctypes.data == first
    assert np.array_equal(again[3], reader.read(3)[0])  # type: ignore[arg-type]


@pytest.mark.serial  # timing: alone, not beside another worker (Makefile)
def test_a_waiting_consumer_reads_files_rather_than_sleep(tmp_path: Path) -> None:
    # a sleep and a wake per batch took ~8 % of the CPU on 64 KiB samples
    reader = _reader(tmp_path, "npy")
    names, size = file_names(reader)  # type: ignore[misc]
    queue = ReadQueue()
    threads = _serve(queue, 1)
    try:
        # generation leaves its files out of the page cache, and the consumer does not read
        # while reads wait for the device: read them into it first
        for i in range(12):
            Path(names(i)).read_bytes()  # type: ignore[operator]
        NamedBatch(reader, queue, names, list(range(12)), size, 12).batch()
        ids = list(range(12)) * 100  # 1,200 reads, one at a time: the consumer takes some
        assert queue.blocking == 0
        got, nbytes = NamedBatch(reader, queue, names, ids, size, 1).batch()
        assert 0 < queue.helped < len(ids) and nbytes == len(ids) * size
        assert all(np.array_equal(g, got[i]) for i, g in enumerate(got[12:24]))
    finally:
        _close(queue, threads)
    # reads that wait for the device: every thread serves, the consumer only waits (a read
    # of its own could hold off SIGTERM)
    queue = ReadQueue()
    threads = _serve(queue, 1)
    try:
        _evict(reader, list(range(12)))
        NamedBatch(reader, queue, names, [0], size, 1).batch()  # by either thread
        assert queue.blocking == 1
        helped = queue.helped
        got, _ = NamedBatch(reader, queue, names, list(range(1, 12)), size, 1).batch()
        assert len(got) == 11 and queue.helped == helped
    finally:
        _close(queue, threads)
    idle = ReadQueue()  # nobody serves it: wait() does not read (cancel, close decide)
    ticket = NamedBatch(reader, idle, names, [0, 1], size, 1)
    idle.close()
    assert idle.wait(ticket.ticket)[3] == 2 and idle.helped == 0
