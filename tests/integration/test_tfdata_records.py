"""The tf.data loader's TFRecord ids: inferred from the order TFRecordDataset's deterministic
interleave delivers (``interleave_order``), checked against what TensorFlow delivers."""

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


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_each_record_delivered_is_the_sample_its_id_names(tmp_path: Path, threads: int) -> None:
    from dliobench.loaders.tfdata.sources import interleave_order

    plan = dataset(tmp_path, "dataset.format=tfrecord", "reader.data_loader=tensorflow",
                   "reader.sample_shuffle=off", "reader.file_shuffle=seed",
                   "reader.drop_last=false", f"reader.read_threads={threads}")
    loader = make_loader(plan)
    try:
        ids = rank_samples(plan.spec, 0)
        got = list(loader.epoch(ids))
        expect = {i: loader.reader.read(i)[0].reshape(-1) for i in range(21)}
    finally:
        loader.close()
    assert len({row.tobytes() for row in expect.values()}) == 21  # samples tell apart
    delivered = np.concatenate([b.ids for b in got])
    assert sorted(delivered.tolist()) == list(range(21))
    for batch in got:
        for sample_id, row in zip(batch.ids.tolist(), batch.data, strict=True):
            assert np.array_equal(row, expect[sample_id])
    files = list(dict.fromkeys((ids // 3).tolist()))  # the order the plan reaches them
    local = interleave_order(len(files), 3, threads)
    assert delivered.tolist() == [files[i // 3] * 3 + i % 3 for i in local.tolist()]
