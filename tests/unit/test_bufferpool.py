"""Read buffers are reused only once no view of them is left."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np

from dliobench.storage import posix_io as storage
from dliobench.storage.buffers import GRANULE, AlignedBuffer, BufferPool


def test_buffer_is_lent_until_its_last_view_dies() -> None:
    pool = BufferPool()
    first = pool.take(5000)
    view = memoryview(first)[100:200]
    array = np.frombuffer(view[10:20], dtype=np.uint8)  # a view of a view
    del first, view
    second = pool.take(5000)
    assert second is not array.base.obj  # type: ignore[union-attr]
    lent = id(second)
    del second
    assert id(pool.take(5000)) == lent  # free again: reused
    del array
    gc.collect()
    assert pool.held_bytes() == 2 * GRANULE  # the first one is free too, nothing new mapped
    assert len({id(pool.take(10)), id(pool.take(10))}) == 1


def test_smallest_fitting_free_buffer_is_chosen_and_free_ones_are_trimmed() -> None:
    pool = BufferPool(keep_free_bytes=0)
    small, large = pool.take(GRANULE), pool.take(3 * GRANULE)
    small_id, large_id = id(small), id(large)
    del small, large
    assert id(pool.take(GRANULE // 2)) == small_id
    assert id(pool.take(2 * GRANULE)) == large_id
    kept = pool.take(GRANULE)  # both free: reused, nothing trimmed
    assert pool.held_bytes() == 4 * GRANULE
    bigger = pool.take(8 * GRANULE)  # no fit: the free large one is unmapped first
    assert pool.held_bytes() == GRANULE + 8 * GRANULE
    del kept, bigger


def test_direct_reads_never_overwrite_a_sample_still_held(tmp_path: Path) -> None:
    held = []
    for k in range(6):
        path = tmp_path / f"f{k}"
        path.write_bytes(bytes([k]) * 50_000)
        data, _ = storage.read_range(path, 0, 50_000, odirect=True)
        held.append(np.frombuffer(data, dtype=np.uint8))
    for k, sample in enumerate(held):
        assert sample.size == 50_000 and (sample == k).all()


def test_a_forked_process_gets_its_own_copy_of_a_buffer() -> None:
    # Generation forks writer processes after the parent has used its buffer (the space
    # probe): they must not fill one shared buffer at once.
    buffer = AlignedBuffer()
    view = buffer.view(4096)
    view[:4] = b"mine"
    pid = os.fork()
    if pid == 0:  # the child scribbles on its copy and leaves at once
        view[:4] = b"kids"
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert bytes(view[:4]) == b"mine"
    view.release()
    buffer.close()
