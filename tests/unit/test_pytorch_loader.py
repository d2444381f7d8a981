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


FEEDER = """
import multiprocessing as mp, sys, time
{start}
queue = mp.Queue()
queue._reader.close()  # the parent gone: the feeder thread meets a broken pipe
queue.put(b"x" * 100)
time.sleep(0.5)
"""


def test_a_worker_whose_parent_has_gone_says_nothing() -> None:
    """A stopped run's DataLoader worker: its result queue's feeder thread meets a broken
    pipe, which multiprocessing prints as a traceback unless the worker started with
    ``quiet_worker`` (the fault sweep's "SIGTERM run pytorch" met it once in ~18 runs)."""
    import subprocess
    import sys

    start = "from dliobench.loaders.pytorch import quiet_worker; quiet_worker(0)"
    loud, quiet = (subprocess.run([sys.executable, "-c", FEEDER.format(start=s)],
                                  capture_output=True, text=True, timeout=60, check=True)
                   for s in ("", start))
    assert "BrokenPipeError" in loud.stderr and quiet.stderr == ""
