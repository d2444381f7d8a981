"""The sliceable seeded permutation behind sample-level shuffles."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from dliobench.dataset.permutation import Permutation
from dliobench.dataset.sharding import ShardSpec, rank_samples


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 1000, 4097])
def test_is_a_bijection_and_slices_agree(n: int) -> None:
    perm = Permutation(n, [5, 2])
    whole = perm.slice(0, n)
    assert np.array_equal(np.sort(whole), np.arange(n))
    cut = n // 3
    assert np.array_equal(perm.slice(cut, n), whole[cut:])
    assert np.array_equal(perm[np.array([n - 1, 0])], whole[[n - 1, 0]])


def test_seeds_give_different_shuffled_orders() -> None:
    a, b = Permutation(1000, [1, 2]).slice(0, 1000), Permutation(1000, [2, 2]).slice(0, 1000)
    assert not np.array_equal(a, b)
    assert np.mean(a == np.arange(1000)) < 0.01  # hardly a fixed point: really shuffled
    # neighbours land far apart, as in a real shuffle
    assert np.median(np.abs(np.diff(a))) > 100


@pytest.mark.slow
def test_a_rank_never_builds_the_global_order() -> None:
    # BERT's full size: 156.8 M samples; one of 64 ranks computes only its 2.45 M ids
    spec = ShardSpec(num_files=500, samples_per_file=313_532, rank=63, size=64,
                     file_shuffle=True, sample_shuffle=True)
    tracemalloc.start()
    try:
        ids = rank_samples(spec, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200e6  # the global order alone would be 1.25 GB
    assert ids.size == 500 * 313_532 // 64 and ids.nbytes < 25e6
    assert ids.min() >= 0 and ids.max() < 500 * 313_532 and np.unique(ids).size == ids.size
