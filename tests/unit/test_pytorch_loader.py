"""The PyTorch loader beyond the LoaderContract: a batch crosses from a worker process as one
packed tensor, whatever its samples' sizes, and each sample is the bytes SampleReader reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from dliobench.dataset.sharding import rank_samples
from dliobench.loaders import make_loader, sample_reader
from tests.contract.test_loaders import dataset


@pytest.mark.parametrize("stdev", [0, 1024])
def test_batches_of_equal_and_mixed_sizes_are_the_samples_read(tmp_path: Path,
                                                              stdev: int) -> None:
    plan = dataset(tmp_path, "reader.data_loader=pytorch", "dataset.num_samples_per_file=1",
                   f"dataset.record_length_bytes_stdev={stdev}", "reader.batch_size=3")
    loader = make_loader(plan)
    try:
        batches = list(loader.epoch(rank_samples(plan.spec, 0)))
    finally:
        loader.close()
    fresh = sample_reader(plan)
    sizes = set()
    for batch in batches:
        assert batch.nbytes == sum(plan.sizes[i] for i in batch.ids)
        for sample_id, sample in zip(batch.ids, batch.data, strict=True):
            want, _ = fresh.read(int(sample_id))
            assert np.array_equal(np.asarray(sample), want)
            sizes.add(want.size)
    assert sum(b.samples for b in batches) == 6
    assert (len(sizes) > 1) == bool(stdev)
