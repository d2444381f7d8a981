"""Sharding and shuffles: exactly-once across ranks, seeded orders that change per epoch."""

from __future__ import annotations

import numpy as np
import pytest

from dliobench.dataset.sharding import (
    ShardSpec,
    batches,
    delivered_exactly_once,
    file_order,
    rank_sample_count,
    rank_samples,
)


def all_ranks(size: int, **kw: object) -> list[np.ndarray]:
    return [rank_samples(ShardSpec(rank=r, size=size, **kw), 0) for r in range(size)]  # type: ignore[arg-type]


@pytest.mark.parametrize("sharding", ["sample", "file"])
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_ranks_cover_every_sample_once(sharding: str, size: int) -> None:
    parts = all_ranks(size, num_files=7, samples_per_file=3, sharding=sharding,
                      file_shuffle=True, sample_shuffle=True)
    merged = np.concatenate(parts)
    assert np.array_equal(np.sort(merged), np.arange(21))
    unit = 1 if sharding == "sample" else 3
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= unit


def test_file_sharding_keeps_files_whole() -> None:
    parts = all_ranks(2, num_files=6, samples_per_file=4, sharding="file", sample_shuffle=True)
    for part in parts:
        files = part // 4
        for f in np.unique(files):
            assert np.sum(files == f) == 4


def test_shuffle_changes_per_epoch_and_repeats_per_seed() -> None:
    spec = ShardSpec(num_files=50, samples_per_file=1, rank=0, size=1, sample_shuffle=True)
    e0, e1 = rank_samples(spec, 0), rank_samples(spec, 1)
    assert not np.array_equal(e0, e1)
    assert np.array_equal(e0, rank_samples(spec, 0))
    other = ShardSpec(num_files=50, samples_per_file=1, rank=0, size=1, sample_shuffle=True,
                      seed=7)
    assert not np.array_equal(e0, rank_samples(other, 0))
    fixed = ShardSpec(num_files=50, samples_per_file=1, rank=0, size=1, sample_shuffle=True,
                      seed_change_epoch=False)
    assert np.array_equal(rank_samples(fixed, 0), rank_samples(fixed, 3))


def test_no_shuffle_is_file_order() -> None:
    spec = ShardSpec(num_files=5, samples_per_file=2, rank=0, size=1)
    assert np.array_equal(rank_samples(spec, 3), np.arange(10))
    assert np.array_equal(file_order(spec, 3), np.arange(5))


def test_batches_drop_last() -> None:
    ids = np.arange(7)
    assert [b.tolist() for b in batches(ids, 3, True)] == [[0, 1, 2], [3, 4, 5]]
    assert [b.tolist() for b in batches(ids, 3, False)][-1] == [6]


def test_exactly_once_check_catches_duplicates_and_misses() -> None:
    expected = np.arange(6)
    assert delivered_exactly_once(expected, np.array([5, 4, 3, 2, 1, 0]), 6)
    assert not delivered_exactly_once(expected, np.array([0, 1, 2, 3, 4, 4]), 6)
    assert not delivered_exactly_once(expected, np.array([0, 1, 2, 3, 4]), 6)
    assert delivered_exactly_once(expected, np.array([3, 1, 2, 0]), 4)  # 2 left out
    assert not delivered_exactly_once(expected, np.array([3, 1, 2, 9]), 4)  # 9 is foreign
    assert not delivered_exactly_once(expected, np.array([3, 1, 2, -1]), 4)  # below them all
    assert delivered_exactly_once(expected, np.array([], dtype=np.int64), 0)
    assert not delivered_exactly_once(np.array([], dtype=np.int64), np.array([1]), 1)
    shuffled = np.random.default_rng(3).permutation(np.arange(10, 100_010, 3))
    assert delivered_exactly_once(shuffled, shuffled[::-1].copy(), shuffled.size)


@pytest.mark.parametrize("sharding", ["sample", "file"])
def test_rank_sample_count_matches_the_plan(sharding: str) -> None:
    for size in (1, 2, 3, 5):
        for rank in range(size):
            spec = ShardSpec(num_files=11, samples_per_file=3, rank=rank, size=size,
                             sharding=sharding)
            assert rank_sample_count(spec) == rank_samples(spec, 0).size
