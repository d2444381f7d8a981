"""The tf.data loader's dense batches (npz through our readers): handed to TensorFlow in
reused page-aligned memory, which TensorFlow takes without a copy, and never lent again while
a batch over it is held."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from dliobench.dataset.sharding import rank_samples
from dliobench.loaders import make_loader
from tests.contract.test_loaders import dataset

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                reason="TensorFlow (the tensorflow extra) is not installed")


def test_batches_are_zero_copy_in_reused_memory_and_intact_while_held(tmp_path: Path) -> None:
    plan = dataset(tmp_path, "dataset.format=npz", "reader.data_loader=tensorflow",
                   "dataset.num_files_train=24", "dataset.num_samples_per_file=1",
                   "reader.batch_size=4", "reader.read_threads=2", "reader.prefetch_size=2",
                   "dataset.record_length_bytes_stdev=0")
    loader = make_loader(plan)
    try:  # two epochs' batches all held at once: reused memory must not be lent meanwhile
        held = [b for epoch in range(2) for b in loader.epoch(rank_samples(plan.spec, epoch))]
        expect = {i: loader.reader.read(i)[0].reshape(-1).view(np.uint8) for i in range(24)}
    finally:
        loader.close()
    assert len(held) == 12
    for batch in held:
        # row 0 of the [batch, bytes] tensor at a page boundary: the pool's memory, which
        # TensorFlow wrapped as it was (a copy of it would be in TensorFlow's own memory)
        assert batch.data[0].ctypes.data % 4096 == 0
        for sample_id, row in zip(batch.ids.tolist(), batch.data, strict=True):
            assert np.array_equal(row, expect[sample_id])
