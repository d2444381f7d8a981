"""The C extension's ``ReadQueue``: batches of whole files read and checked by threads that
never take the GIL. Each batch's results are ``read_checked``'s, shared among the threads a
few files at a time; a file gone or damaged is read again through its format (its sentence);
a cancelled or closed batch is not read; a wait for a batch nobody reads still runs Python's
signal handlers (SIGTERM and Ctrl-C reach a waiting rank); the native loader reads npz and
npy through it and leaves an epoch early without reading the rest."""

from __future__ import annotations

import errno
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import CorruptSampleError, DatasetError
from dliobench.dataset.sharding import rank_samples
from dliobench.loaders import make_loader, sample_reader
from dliobench.loaders.base import SampleReader
from dliobench.storage import checked_reads
from dliobench.storage.buffers import SampleBuffers
from tests.contract.test_loaders import dataset

pytestmark = pytest.mark.skipif(checked_reads.read_queue() is None,
                                reason="the _readfiles extension is not built here")


def _reader(tmp_path: Path, fmt: str, files: int = 12) -> SampleReader:
    plan = dataset(tmp_path, f"dataset.format={fmt}", "dataset.num_samples_per_file=1",
                   "dataset.record_length_bytes=65536", f"dataset.num_files_train={files}")
    return sample_reader(plan)


def _path(reader: SampleReader, i: int) -> Path:
    return Path(reader.backend.path(reader.keys[i]))


@pytest.fixture
def served() -> Iterator[object]:
    """A queue with 3 threads serving it, closed and joined afterwards."""
    queue = checked_reads.read_queue()
    assert queue is not None
    threads = [threading.Thread(target=queue.serve, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    yield queue
    queue.close()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)


@pytest.mark.parametrize("fmt", ["npz", "npy"])
def test_batches_read_through_the_queue_are_read_many_s(tmp_path: Path, fmt: str,
                                                        served: object) -> None:
    reader = _reader(tmp_path, fmt)
    ids = [5, 0, 11, 3, 7, 2, 9, 1, 4, 10, 6, 8]
    want = reader.read_many(ids)  # learns the template: the queue's reads then match it
    for chunk in (1, 2, 5, 12):
        got = reader.start_many(ids, served, chunk=chunk).result()
        assert [n for _, n in got] == [n for _, n in want]
        for (a, _), (b, _) in zip(got, want, strict=True):
            assert np.array_equal(a, b)
    pending = checked_reads.Pending(served, [str(_path(reader, i)) for i in ids],
                                    [reader.sizes[i] for i in ids],
                                    [reader.templates.get(reader.sizes[i]) for i in ids])
    entries, misses = pending.result()
    assert misses == 0 and all(isinstance(e[0], np.ndarray) for e in entries)  # type: ignore[index]


def test_a_file_gone_or_damaged_is_named_in_the_formats_words(tmp_path: Path,
                                                              served: object) -> None:
    reader = _reader(tmp_path, "npz")
    reader.read_many([0])
    gone, damaged = _path(reader, 3), _path(reader, 6)
    gone.unlink()
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="train"):
        reader.start_many([1, 2, 3, 4], served, chunk=2).result()
    with pytest.raises(CorruptSampleError, match="CRC-32"):
        reader.start_many([5, 6, 7], served).result()
    assert len(reader.start_many([7, 8], served).result()) == 2  # the others still read


def test_cancelled_and_closed_batches_are_not_read(tmp_path: Path) -> None:
    reader = _reader(tmp_path, "npy")
    paths = [str(_path(reader, i)) for i in range(4)]
    sizes = [reader.sizes[i] for i in range(4)]
    queue = checked_reads.read_queue()
    cancelled = checked_reads.Pending(queue, paths, sizes, [None] * 4)
    cancelled.cancel()
    kept = checked_reads.Pending(queue, paths, sizes, [None] * 4, chunk=3)
    thread = threading.Thread(target=queue.serve)
    thread.start()
    assert cancelled.result() == ([None] * 4, 4)  # -ECANCELED: as an unreadable file
    entries, _ = kept.result()
    assert [n for _, n in entries] == sizes  # type: ignore[misc]
    queue.close()
    thread.join(timeout=60)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        queue.submit(paths, [np.empty(n, np.uint8) for n in sizes],
                     [None] * 4)
    unread = checked_reads.read_queue()
    waiting = unread.submit(paths, [np.empty(n, np.uint8) for n in sizes],
                            [None] * 4)
    unread.close()
    got, misses = unread.wait(waiting)
    assert got == [-errno.ECANCELED] * 4 and misses == 4


def test_a_wait_for_a_batch_nobody_reads_runs_signal_handlers(tmp_path: Path) -> None:
    reader = _reader(tmp_path, "npy", files=2)
    queue = checked_reads.read_queue()  # no thread serves it
    pending = checked_reads.Pending(queue, [str(_path(reader, 0))], [reader.sizes[0]], [None])

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            pending.result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        queue.close()
    assert time.monotonic() - start < 30  # a hang guard: the handler ran within ~50 ms


@pytest.mark.parametrize("fmt", ["npz", "npy"])
def test_the_native_loader_reads_through_the_queue_and_leaves_an_epoch_early(
        tmp_path: Path, fmt: str) -> None:
    plan = dataset(tmp_path, "reader.data_loader=native", f"dataset.format={fmt}",
                   "dataset.num_samples_per_file=1", "dataset.num_files_train=40",
                   "dataset.record_length_bytes=4096", "reader.batch_size=4",
                   "reader.read_threads=3", "reader.prefetch_size=2")
    loader = make_loader(plan)
    try:
        assert loader._queue is not None
        ids = rank_samples(plan.spec, 0)
        batches = list(loader.epoch(ids))
        assert np.array_equal(np.concatenate([b.ids for b in batches]), ids)
        reader = sample_reader(plan)
        for batch in batches:
            for sample_id, sample in zip(batch.ids.tolist(), batch.data, strict=True):
                assert np.array_equal(sample, reader.read(sample_id)[0])
        early = loader.epoch(rank_samples(plan.spec, 1))
        next(early)
        early.close()  # the batches read ahead are cancelled
        again = list(loader.epoch(rank_samples(plan.spec, 2)))
        assert sum(b.samples for b in again) == 40
    finally:
        loader.close()
    assert not any(t.is_alive() for t in loader._threads)


def test_pooled_memory_goes_back_once_the_samples_are_dropped(tmp_path: Path,
                                                               served: object) -> None:
    reader = _reader(tmp_path, "npy", files=4)
    paths = [str(_path(reader, i)) for i in range(4)]
    sizes = [reader.sizes[i] for i in range(4)]
    pool = SampleBuffers(sizes[0], keep=8)
    pending = checked_reads.Pending(served, paths, sizes, [None] * 4, pool, chunk=2)
    entries, _ = pending.result()
    assert [n for _, n in entries] == sizes  # type: ignore[misc]
    assert not pool._free  # lent: the samples are alive
    del entries
    assert len(pool._free) == 4  # the ticket and the pending batch kept none of them


@pytest.mark.parametrize(("resize", "queued"), [(0, True), (65536, True), (65535, False)])
def test_samples_resized_below_their_files_are_read_by_python_threads(
        tmp_path: Path, resize: int, queued: bool) -> None:
    # a queued batch holds its whole files until handed over; reader threads keep only the
    # resized copies (UNet3D's 2 MiB of ~147 MB files: 2.1 GB peak RSS against 0.8 GB)
    plan = dataset(tmp_path, "dataset.format=npy", "dataset.num_samples_per_file=1",
                   "dataset.record_length_bytes=65408", "dataset.record_length_bytes_stdev=0",
                   f"dataset.record_length_bytes_resize={resize}")
    reader = sample_reader(plan)
    assert reader.uniform_file_size() == 65536  # 128 bytes of npy header
    assert (reader.read_queue() is not None) == queued
